"""memory/recall/row_load.py: a user's vectors taken batch by batch give the index exactly
what the one-piece load gave (int8 rows, float16 file, codes, mean, search results)."""

import resource
import signal
import tempfile

import numpy as np
import pytest

from memory import MemoryLayer, Settings, Turn
from memory.recall.int8_rows import is_int8
from memory.recall.vectors import EXACT_BELOW, VectorIndex
from tests.memory.hash_embedder import HashEmbedder

from .test_vectors import half, random_units, topical_rows

NOW = 1_700_000_000.0


class Batches:
    """Stands in for `Store.read_user_vectors`: the rows in batches of `size`, after
    announcing `spare` more slots than rows (a partition's free slots)."""

    def __init__(self, ids, rows, size, spare=0):
        self.ids, self.rows, self.size, self.spare = np.asarray(ids), rows, size, spare

    def __call__(self, user_id, sink):
        sink.start(len(self.ids) + self.spare, self.rows.shape[1])
        for start in range(0, len(self.ids), self.size):
            sink.add(self.ids[start : start + self.size], self.rows[start : start + self.size])


def same_matrix(batched, whole):
    """The two views hold the same ids, int8 rows, codes, mean and float16 file rows."""
    assert np.array_equal(batched.ids, whole.ids)
    assert len(batched.blocks) == len(whole.blocks) == 1 and is_int8(batched.blocks[0])
    assert np.array_equal(batched.blocks[0].q, whole.blocks[0].q)
    assert np.array_equal(batched.blocks[0].scale, whole.blocks[0].scale)
    assert np.array_equal(batched.codes[0], whole.codes[0])
    assert np.array_equal(batched.mean, whole.mean)
    n = len(whole.ids)
    assert np.array_equal(batched.file.first(n), whole.file.first(n))


@pytest.mark.parametrize(("size", "spare"), [(4096, 0), (1000, 11), (7, 3), (50_000, 0)])
def test_a_large_user_read_in_batches_is_the_one_piece_load_bit_for_bit(size, spare):
    rows, rng = topical_rows(21, EXACT_BELOW + 1237)  # no multiple of any batch size
    ids = np.arange(1, len(rows) + 1) * 2
    whole = VectorIndex(lambda user: (ids, half(rows)))
    batched = VectorIndex(batches=Batches(ids, rows, size, spare))
    same_matrix(batched._matrix("alice"), whole._matrix("alice"))
    for n in range(5):
        query = rows[n * 331] + 0.4 * rng.normal(size=384).astype(np.float32) / 20
        query /= np.linalg.norm(query)
        assert batched.search("alice", query, 80) == whole.search("alice", query, 80)
        some = ids[n * 97 : n * 97 + 40].tolist()
        assert batched.similarities("alice", query, some) == whole.similarities(
            "alice", query, some
        )


def test_ids_out_of_order_are_sorted_with_their_rows():
    rows, _ = topical_rows(22, EXACT_BELOW + 10)
    ids = np.arange(1, len(rows) + 1)
    shuffled = np.random.default_rng(3).permutation(len(ids))  # slots reused out of order
    whole = VectorIndex(lambda user: (ids, half(rows)))
    batched = VectorIndex(batches=Batches(ids[shuffled], rows[shuffled], 4096))
    same_matrix(batched._matrix("alice"), whole._matrix("alice"))
    assert batched.search("alice", rows[8], 3) == whole.search("alice", rows[8], 3)


def test_a_small_user_read_in_batches_is_held_in_float32():
    rows = random_units(300, 4)
    ids = np.arange(10, 310)
    batched = VectorIndex(batches=Batches(ids, rows, 64, spare=5))
    whole = VectorIndex(lambda user: (ids, rows))
    view = batched._matrix("alice")
    assert view.file is None and view.blocks[0].dtype == np.float32
    assert np.array_equal(view.blocks[0], rows)
    assert batched.search("alice", rows[7], 5) == whole.search("alice", rows[7], 5)


def test_without_a_temporary_directory_batches_stay_in_float16(monkeypatch, caplog):
    monkeypatch.setattr(tempfile, "tempdir", "/nonexistent/moim-tmp")
    rows, _ = topical_rows(23, EXACT_BELOW + 5)
    ids = np.arange(1, len(rows) + 1)
    index = VectorIndex(batches=Batches(ids, rows, 4096))
    found = index.search("alice", rows[3], 3)
    view = index._matrix("alice")
    assert view.file is None and view.blocks[0].dtype == np.float16
    assert np.array_equal(view.blocks[0], half(rows))
    assert found[0] == (4, pytest.approx(1.0, abs=1e-3))
    assert "stay in RAM" in caplog.text


@pytest.mark.skipif(not hasattr(signal, "SIGXFSZ"), reason="needs RLIMIT_FSIZE (POSIX)")
def test_a_row_file_full_in_the_middle_of_a_load_keeps_every_row_in_float16(caplog):
    rows, _ = topical_rows(24, EXACT_BELOW + 100)
    ids = np.arange(1, len(rows) + 1)
    index = VectorIndex(batches=Batches(ids, rows, 4096))
    ignored = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    limits = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (3 * 4096 * 384 * 2, limits[1]))
    try:  # the file takes three batches, then its disk is full
        view = index._matrix("alice")
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, limits)
        signal.signal(signal.SIGXFSZ, ignored)
    assert view.file is None and np.array_equal(view.blocks[0], half(rows))
    assert index.search("alice", rows[-1], 1)[0][0] == int(ids[-1])
    assert "stay in RAM" in caplog.text


def test_the_layer_reads_a_large_user_from_the_store_in_batches(tmp_path, monkeypatch):
    # A real store: the layer's index (batches) against the store's one-piece read.
    monkeypatch.setattr("memory.recall.vectors.HALF_FROM", 30)
    layer = MemoryLayer(Settings(db_path=tmp_path / "m.db"), lambda _: HashEmbedder())
    try:
        for n in range(40):
            asked = {"role": "user", "content": f"the {n}th bicycle, a red one, was sold in May"}
            reply = {"role": "assistant", "content": f"Noted: bicycle {n}."}
            layer.store_only(Turn("ana", f"s-{n}", "gpt-4o-mini", (asked,), reply, NOW + n))
        layer.index_pending()
        whole = VectorIndex(lambda user: layer.store.user_vectors(user, half_from=30))
        layer.index.drop()
        view = layer.index._matrix("ana")
        assert len(view.ids) > 30 and view.file is not None
        same_matrix(view, whole._matrix("ana"))
    finally:
        layer.close()
