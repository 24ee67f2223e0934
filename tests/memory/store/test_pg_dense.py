"""Postgres's dense search is exact per user, however many other users' rows lie nearer.

An approximate index (HNSW, IVFFlat) filtered by `user_id` after the scan returns fewer than
k rows, or worse ones, for a user whose rows are few among many; LoCoMo's dense top 80 on
Postgres equals SQLite's exact scan for every question (bench/pg_gap.py). This pins it.
"""

import numpy as np
import pytest

from memory.store.postgres import PgStore
from memory.store.store import NewMessage

DIM = 8


@pytest.fixture
def store(pg_database):
    opened = PgStore(pg_database())
    opened.ensure_vectors("test-model", DIM)
    yield opened
    opened.close()


def index(store, user_id, vectors):
    """One message per vector for `user_id`, each indexed as one chunk; the chunk ids."""
    rows = [
        NewMessage(f"m{n}", f"h{n}", "user", None, f"text {n}", "{}", None, 1, False, 1.0)
        for n in range(len(vectors))
    ]
    store.add_messages(user_id, "s-1", rows)
    ids = []
    for message, vector in zip(store.unindexed_messages(1000), vectors, strict=True):
        ids += store.add_chunks(message, [message.content], vector[None, :])
    return ids


def unit(rows):
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def test_a_user_among_many_nearer_rows_gets_their_own_exact_top_k(store):
    rng = np.random.default_rng(7)
    query = unit(rng.normal(size=(1, DIM)))[0]
    index(store, "crowd", unit(query + 0.05 * rng.normal(size=(300, DIM))))  # all nearer
    mine = unit(rng.normal(size=(25, DIM)))
    ids = index(store, "ana", mine)

    found = store.dense_search("ana", query, 10)

    cosines = mine @ query
    best = np.argsort(-cosines, kind="stable")[:10]
    assert [i for i, _ in found] == [ids[n] for n in best]
    assert [c for _, c in found] == pytest.approx(cosines[best].tolist(), abs=1e-5)


class Sink:
    """Collects what `read_user_vectors` hands over."""

    def __init__(self):
        self.slots, self.ids, self.rows = None, [], []

    def start(self, slots, dim):
        self.slots = (slots, dim)

    def add(self, ids, rows):
        self.ids.append(ids)
        self.rows.append(rows)


def test_a_users_vectors_read_in_batches_are_the_one_piece_read(store, monkeypatch):
    monkeypatch.setattr("memory.store.pg_reads._SINK_ROWS", 4)
    rng = np.random.default_rng(5)
    ids = index(store, "ana", unit(rng.normal(size=(10, DIM))))
    index(store, "bob", unit(rng.normal(size=(3, DIM))))
    sink = Sink()
    store.read_user_vectors("ana", sink)
    whole_ids, whole = store.user_vectors("ana")
    assert sink.slots == (10, DIM) and [len(part) for part in sink.ids] == [4, 4, 2]
    assert np.concatenate(sink.ids).tolist() == whole_ids.tolist() == ids
    assert np.array_equal(np.concatenate(sink.rows), whole)
    assert all(part.dtype == np.float32 for part in sink.rows)
