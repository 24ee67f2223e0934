"""memory/store/pg_journal.py on a real Postgres: a finished turn's row, at once and cheaply.

The row must be in `pending_turns` for any other connection (another replica adopting a dead
one's turns) as soon as `append` returns, and the append must not wait for the WAL flush: it
runs on the event loop, once per finished turn.
"""

import json
import time

import psycopg

from memory import Journal, Turn
from memory.store.pg_journal import PgJournal
from memory.store.postgres import PgStore


def test_an_appended_turn_is_visible_to_other_replicas_at_once_without_waiting_for_the_flush(
    pg_database, tmp_path
):
    store = PgStore(pg_database())
    journal = PgJournal(store, tmp_path / "a.journal")
    journal.append(
        Turn(
            user_id="ana",
            session_id="s1",
            model="m",
            messages=({"role": "user", "content": "my boat is called Gaivota"},),
            reply={"role": "assistant", "content": "noted"},
            created_at=time.time(),
        )
    )
    with psycopg.connect(store.url) as other:  # another replica's view
        rows = other.execute("SELECT owner, record FROM pending_turns").fetchall()
    assert [owner for owner, _ in rows] == [journal.owner]
    assert "Gaivota" in rows[0][1]
    assert [t.user_id for t in journal.turns()] == ["ana"]
    assert journal._conn.execute("SHOW synchronous_commit").fetchone() == ("off",)
    journal.clear()
    journal.close()
    store.close()


def test_drop_user_deletes_a_forgotten_users_rows_of_every_replica_and_in_the_file(
    pg_database, tmp_path
):
    store = PgStore(pg_database())
    ours, theirs = PgJournal(store, tmp_path / "a.journal"), PgJournal(store, tmp_path / "b")
    for journal, user in ((ours, "ana"), (theirs, "ana"), (ours, "bo")):
        said = ({"role": "user", "content": f"{user}: my boat is called Gaivota"},)
        journal.append(Turn(user, "s1", "m", said, None, time.time()))
    said = ({"role": "user", "content": "ana: while the database was down"},)
    Journal.append(ours, Turn("ana", "s2", "m", said, None, time.time()))  # the file only

    ours.drop_user("ana")

    with psycopg.connect(store.url) as other:
        rows = other.execute("SELECT record FROM pending_turns").fetchall()
    assert [json.loads(record)["user_id"] for (record,) in rows] == ["bo"]
    assert [t.user_id for t in ours.turns()] == ["bo"]
    for journal in (ours, theirs):
        journal.close()
    store.close()
