"""memory/store/postgres.py reads vectors back in pgvector's binary form, on a real Postgres.

A recall fetches the vectors of its lexical-only candidates (`PgStore.vectors`); they come as
bytes (`vector_send`), not as text, so they must come back bit for bit as stored, each user's
only. Values far from a unit vector's (negative, tiny, large) show a wrong offset, byte order
or width at once.
"""

import numpy as np
import pytest

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
