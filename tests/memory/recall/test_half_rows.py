"""memory/recall/half_rows.py: float16 rows cast by onnxruntime, bit for bit numpy's."""

import numpy as np

from memory.recall.half_rows import _session, half_rows
from memory.recall.vectors import EXACT_BELOW, VectorIndex


def as_bits(rows: np.ndarray) -> np.ndarray:
    return rows.view(np.uint32)


def test_the_session_loads():
    assert _session() is not None  # onnxruntime and onnx are dependencies: never the fallback


def test_rows_equal_numpys_cast_bit_for_bit_with_zeros_subnormals_and_extremes():
    rng = np.random.default_rng(3)
    matrix = (rng.normal(size=(500, 384)) / 20).astype(np.float16)
    specials = [0.0, -0.0, 6e-8, -6e-8, 3e-6, -3e-6, 6.1e-5, 65504.0, -65504.0, np.inf, -np.inf]
    matrix[7, : len(specials)] = specials
    positions = np.array([7, 0, 499, 7, 250, 3])  # any order, repeats
    rows = half_rows(matrix, positions)
    assert rows.dtype == np.float32 and rows.flags.c_contiguous
    assert np.array_equal(as_bits(rows), as_bits(matrix[positions].astype(np.float32)))


def test_no_positions_give_no_rows():
    matrix = np.ones((4, 8), dtype=np.float16)
    assert half_rows(matrix, np.array([], dtype=np.int64)).shape == (0, 8)


def test_a_large_float16_users_rows_are_the_ones_numpy_would_read():
    # One loaded block, then appended blocks: both of rows_at's ways read the same bits.
    rng = np.random.default_rng(5)
    rows = rng.normal(size=(EXACT_BELOW + 50, 384)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    half = rows.astype(np.float16)
    ids = np.arange(1, len(rows) + 1)
    index = VectorIndex(lambda user: (ids[:-50], half[:-50]))
    positions = np.array([len(ids) - 51, 0, 17, 9_000])
    loaded = index._matrix("alice")
    assert len(loaded.blocks) == 1
    assert np.array_equal(as_bits(loaded.rows_at(positions)), as_bits(rows_of(half, positions)))
    index.add("alice", ids[-50:].tolist(), rows[-50:])
    grown = index._matrix("alice")
    assert len(grown.blocks) == 2
    positions = np.array([len(ids) - 1, 0, 17, len(ids) - 30])
    assert np.array_equal(as_bits(grown.rows_at(positions)), as_bits(rows_of(half, positions)))
    assert index.search("alice", rows[-1], 1)[0][0] == len(ids)


def rows_of(half: np.ndarray, positions: np.ndarray) -> np.ndarray:
    return half[positions].astype(np.float32)
