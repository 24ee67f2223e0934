"""memory/ingest/branches.py on a long session: a request that leaves the record early.

Agents whose runs open alike (one system prompt, one task message) share a derived session;
each new run's first request leaves the record right after the opening, before every earlier
run's messages. Those are no exchange a branch left, and are not read to find that out: the
rule's one read of them named each by its key, past Postgres's 65,535 parameters at ~65,000
messages (SQLite's 250,000), which failed the turn and marked the store down.
"""

import pytest

from memory.ingest.branches import left_behind
from memory.ingest.identity import resent_keys
from memory.store.postgres import PgStore
from memory.store.store import Store
from tests.memory.ingest.test_branches import HI, SYSTEM, said, send


@pytest.fixture
def pg_store(pg_database):
    store = PgStore(pg_database())
    yield store
    store.close()


def new_run_after_a_long_record(store, earlier):
    """The session's record (one exchange, then `earlier` keys of other runs' messages) and
    a new run's first request: what it leaves behind."""
    send(store, [SYSTEM, HI], "Sure.")
    stored = store.stored_keys("ana", "s-1") + [f"{i:032x}#1" for i in range(earlier)]
    conversation = [SYSTEM, HI, said("assistant", "Happy to help.")]
    keys = resent_keys(conversation, stored)
    return left_behind(store, "ana", "s-1", conversation, keys, stored)


def test_a_long_record_after_the_point_is_not_read_on_sqlite(tmp_path):
    assert new_run_after_a_long_record(Store(tmp_path / "moim.db"), 250_001) == []


def test_a_long_record_after_the_point_is_not_read_on_postgres(pg_store):
    assert new_run_after_a_long_record(pg_store, 65_536) == []
