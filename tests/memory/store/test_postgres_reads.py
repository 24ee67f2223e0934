"""memory/store/postgres.py's reads on a real Postgres: vectors as bytes, plans per user.

A recall fetches the vectors of its lexical-only candidates (`PgStore.vectors`); they come as
bytes (`vector_send`), not as text, so they must come back bit for bit as stored, each user's
only. Values far from a unit vector's (negative, tiny, large) show a wrong offset, byte order
or width at once. And every search is planned for the user it searches: no statement of the
pool is run with a plan made once for an average user.
"""

import threading
import time

import numpy as np
import psycopg
import pytest

from memory.errors import StoreUnavailable
from memory.records import Term
from memory.store.fts import search_terms
from memory.store.postgres import PgStore
from memory.store.store import NewMessage

DIM = 8


@pytest.fixture
def store(pg_database):
    store = PgStore(pg_database())
    store.ensure_vectors("test-model", DIM)
    yield store
    store.close()


def _index(store, user_id, vectors):
    """Store one message per vector for `user_id`, each indexed as one chunk with it."""
    rows = [
        NewMessage(
            f"m{n}", f"h-{user_id}-{n}", "user", None, f"text {n}", "{}", None, 1, False, 1.0
        )
        for n in range(len(vectors))
    ]
    store.add_messages(user_id, "s-1", rows)
    ids = []
    for message, vector in zip(store.unindexed_messages(100), vectors, strict=True):
        ids += store.add_chunks(message, [message.content], vector[None, :])
    return ids


def test_vectors_come_back_bit_for_bit_and_only_the_users(store):
    rng = np.random.default_rng(3)
    alice = rng.normal(0, 1e3, (3, DIM)).astype(np.float32)
    alice[0, :3] = [-1e-38, 3.4e38, -0.0]
    bob = rng.normal(size=(2, DIM)).astype(np.float32)
    alice_ids, bob_ids = _index(store, "alice", alice), _index(store, "bob", bob)

    found = store.vectors("alice", alice_ids + bob_ids)
    assert sorted(found) == sorted(alice_ids)
    for chunk_id, vector in zip(alice_ids, alice, strict=True):
        assert found[chunk_id].dtype == np.float32
        assert found[chunk_id].tobytes() == vector.tobytes()

    ids, matrix = store.user_vectors("bob")
    assert ids.tolist() == sorted(bob_ids)
    assert matrix.dtype == np.float32 and matrix.tobytes() == bob.tobytes()


def test_every_search_is_planned_for_its_own_user(store):
    # A statement a connection has run a few times becomes a prepared statement, and
    # Postgres may then plan it once for an average user (a generic plan). With a few
    # heavy users among many light ones, that plan re-counts a heavy user's chunks for each
    # chunk that matches: one lexical search of a 100k-chunk user ran for 25 minutes.
    rng = np.random.default_rng(5)
    for n in range(6):  # light users, and one heavier
        _index(store, f"light-{n}", rng.normal(size=(2, DIM)).astype(np.float32))
    _index(store, "heavy", rng.normal(size=(30, DIM)).astype(np.float32))
    for _ in range(12):
        store.lexical_search("heavy", search_terms("text 3 and text 7"), 80, 0.7)
        store.dense_search("heavy", rng.normal(size=DIM).astype(np.float32), 80)
    generic = [
        store._rows("SELECT coalesce(sum(generic_plans), 0) FROM pg_prepared_statements")[0][0]
        for _ in range(3)  # the pool's connections, whichever answers
    ]
    assert generic == [0, 0, 0]


def test_a_lost_deadlock_fails_that_call_only_not_the_store(store, pg_database):
    # Two replicas indexing at once can deadlock (Postgres aborts one transaction). The
    # database is there all along: only that call fails; the next one must not be refused as
    # if the server were unreachable (chat would fail open on every replica call meanwhile).
    store.add_messages(
        "ana", "s-1", [NewMessage("a", "h-a", "user", None, "a", "{}", None, 1, False, 1.0)]
    )
    store.add_messages(
        "ana", "s-1", [NewMessage("b", "h-b", "user", None, "b", "{}", None, 1, False, 1.0)]
    )
    a, b = (
        store.read("SELECT id FROM messages WHERE message_key = ?", (key,))[0][0] for key in "ab"
    )
    other = psycopg.connect(store.url)
    other.execute("SET deadlock_timeout = '60s'")  # the store's side detects it: its victim
    other.execute("UPDATE messages SET tokens = 2 WHERE id = %s", [b])
    holding = threading.Event()

    def the_other_side():
        holding.wait(10)
        time.sleep(0.3)  # the store's transaction waits for row b by now
        other.execute("UPDATE messages SET tokens = 2 WHERE id = %s", [a])

    side = threading.Thread(target=the_other_side)
    side.start()
    with pytest.raises(StoreUnavailable, match="deadlock"):
        with store.write() as db:
            db.execute("UPDATE messages SET tokens = 3 WHERE id = ?", (a,))
            holding.set()
            db.execute("UPDATE messages SET tokens = 3 WHERE id = ?", (b,))
    side.join(10)
    other.commit()
    other.close()
    assert store.stats("ana").messages == 2  # at once: not "unreachable, retrying shortly"


def test_two_replicas_indexing_shared_words_in_opposite_orders_do_not_deadlock(store):
    # Each replica claims its own batch, and its claim is one transaction until the batch is
    # indexed. Words are unique per (user, stem): replica A adds "apple" then "banana",
    # replica B "banana" then "apple". Written as each chunk went in, A waited on B's
    # "banana" while B waited on A's "apple", and Postgres aborted one batch.
    other = PgStore(store.url)
    rows = [
        NewMessage(f"m{n}", f"h{n}", "user", None, f"text {n}", "{}", None, 1, False, 1.0)
        for n in range(4)
    ]
    store.add_messages("ana", "s-1", rows)
    first, second = store.unindexed_messages(2), other.unindexed_messages(2)
    assert len(first) == len(second) == 2
    words = {
        "apple": Term("apple", "apple", b"\x01" * DIM),
        "banana": Term("banana", "banana", b"\x02" * DIM),
    }
    order = {id(store): ["apple", "banana"], id(other): ["banana", "apple"]}
    both_started = threading.Barrier(2, timeout=10)
    failures: list[BaseException] = []

    def index(replica, messages):
        try:
            for n, (message, stem) in enumerate(zip(messages, order[id(replica)], strict=True)):
                if n == 1:
                    both_started.wait()  # each holds its first word by now
                vector = np.ones((1, DIM), dtype=np.float32)
                replica.add_chunks(message, [message.content], vector, words=[[words[stem]]])
        except BaseException as exc:  # noqa: BLE001 - the test reports it below
            failures.append(exc)

    sides = [
        threading.Thread(target=index, args=(store, first)),
        threading.Thread(target=index, args=(other, second)),
    ]
    for side in sides:
        side.start()
    for side in sides:
        side.join(30)
    other.close()
    assert failures == []
    assert store.count_unindexed() == 0
    assert sorted(t.word for t in store.vocabulary("ana")) == ["apple", "banana"]


def test_a_recall_read_ends_after_the_read_timeout_and_other_statements_do_not(pg_database):
    # A recall read that cannot finish (here: waiting on a lock; once, a bad plan) must end and
    # give its connection back, not hold it long after its request went on without memory.
    quick = PgStore(pg_database(), read_timeout=0.3)
    quick.ensure_vectors("test-model", DIM)
    ids = _index(quick, "ana", np.ones((2, DIM), dtype=np.float32))
    blocker = psycopg.connect(quick.url)
    blocker.execute("LOCK TABLE chunks IN ACCESS EXCLUSIVE MODE")
    started = time.monotonic()
    with pytest.raises(StoreUnavailable, match="statement timeout"):
        quick.chunks("ana", ids)
    assert time.monotonic() - started < 5
    blocker.rollback()
    blocker.close()
    assert sorted(quick.chunks("ana", ids)) == sorted(ids)  # the store is not "unreachable"
    assert quick._rows("SELECT pg_sleep(0.5)") == [("",)]  # writes and admin: no limit
    quick.close()


def test_store_sizes_count_the_databases_bytes(store):
    from memory.store.sizes import store_sizes

    _index(store, "ann", np.eye(DIM, dtype=np.float32)[:3])

    sizes = store_sizes(store)

    assert (sizes.users, sizes.messages, sizes.chunks) == (1, 3, 3)
    assert sizes.bytes > 1_000_000  # an empty Postgres database alone is ~7 MB
