"""Binary codes of a large user's rows, and the rows nearest a query by them (Hamming).

A row's code is the signs of the row minus the user's mean vector: 48 bytes for 384
dimensions, held as one uint64 array per word (words × rows) so the scan reads each word of
every row in one pass. `memory.recall.vectors.VectorIndex` scores only the `RESCORED` rows
these codes put nearest the query (docs/performance.md has the recall of the exact top 80).

The scan is linear: at 1M rows it is ~5 ms of `np.bitwise_count` and xor (numpy's popcount
of a uint64 is ~0.4-1 ns an element). It runs `_SCAN_ROWS` rows at a time into buffers the
searching thread keeps (`memory.recall.scratch`: nothing mapped and faulted in per search;
the slices alone were no faster), every word of a slice in one call per step: xor, count,
then the counts summed two words at a time in bytes (~0.7 ms less at 1M than a step a word,
the same distances). simsimd's SIMD Hamming, two threads, a k-means partition
and a first pass over part of each code were measured and not kept (docs/performance.md,
"Dense: the 1M user's codes (fifth pass)").

The n nearest are chosen from a guess of the cut, taken on a sample of the distances, so that
only the rows under the guess are counted exactly: a histogram of all 1M distances took
~1.8 ms, the guess ~0.4. The result does not depend on the guess: a guess that turns out too
low (fewer than n rows under it) is redone over every row.
"""

from __future__ import annotations

import numpy as np

from memory.recall.int8_rows import CAST_ROWS, Rows, floats, width
from memory.recall.scratch import Scratch

# Rows scanned at a time: their words' xor and bit counts go to buffers of this many rows
# (768 KB of xor for 6 words; 32k rows were no faster than 16k, 8k slower).
_SCAN_ROWS = 16_384
# Distances sampled to guess the cut of the n smallest, and how far past n the guess reaches
# (a share of n and a few rows: the sample's count near the cut varies by about its root).
_SAMPLE = 16_384
_MARGIN = 1.25
_SLACK = 16


def binary_codes(rows: Rows, mean: np.ndarray) -> np.ndarray:
    """The binary codes of `rows` (signs of row − mean), as uint64 words × rows; computed
    `CAST_ROWS` at a time (the comparison's booleans take a byte per dimension)."""
    words = -(-width(rows) // 64)
    packed = np.zeros((len(rows), words * 8), dtype=np.uint8)
    for start in range(0, len(rows), CAST_ROWS):
        bits = np.packbits(floats(rows[start : start + CAST_ROWS]) > mean, axis=1)
        packed[start : start + len(bits), : bits.shape[1]] = bits
    return np.ascontiguousarray(packed.view(np.uint64).T)


def nearest(
    blocks: tuple[np.ndarray, ...], code: np.ndarray, n: int, scratch: Scratch
) -> np.ndarray:
    """Positions (over the blocks, in order) of the `n` rows whose codes are nearest `code`:
    those below the cut distance, then those at it (ties at the cut go by position)."""
    distances = scratch.array("distances", sum(codes.shape[1] for codes in blocks), np.uint16)
    xor = scratch.rows("xor", len(code), _SCAN_ROWS, np.uint64)
    ones = scratch.rows("ones", len(code), _SCAN_ROWS, np.uint8)
    at = 0
    for codes in blocks:  # one pass over the words of a slice of rows: ~0.5 ms per 100k
        for start in range(0, codes.shape[1], _SCAN_ROWS):
            words = codes[:, start : start + _SCAN_ROWS]
            into = distances[at + start : at + start + words.shape[1]]
            _hamming(words, code, into, xor[:, : len(into)], ones[:, : len(into)])
        at += codes.shape[1]
    return smallest(distances, n, len(code) * 64, scratch)


def _hamming(
    words: np.ndarray, code: np.ndarray, out: np.ndarray, xor: np.ndarray, ones: np.ndarray
) -> None:
    """`out` = the Hamming distance of each column of `words` to `code` (no allocation):
    every word's xor and bit count at once, then the counts of two words added as bytes
    (at most 128) before the sum over words in uint16."""
    np.bitwise_xor(words, code[:, None], out=xor)
    np.bitwise_count(xor, out=ones)
    half = len(code) // 2
    np.add(ones[:half], ones[len(code) - half :], out=ones[:half])
    np.add.reduce(ones[: len(code) - half], axis=0, dtype=np.uint16, out=out)


def smallest(
    distances: np.ndarray, n: int, bits: int, scratch: Scratch | None = None
) -> np.ndarray:
    """Positions of the `n` smallest `distances` (integers 0..bits): every one below the cut,
    then those at it by position. The same as counting all of them, from a sampled guess."""
    if n >= len(distances):
        return np.arange(len(distances))
    candidates = None
    step = len(distances) // _SAMPLE
    if step > 1:
        sample = distances[::step]
        want = min(len(sample), int(n / len(distances) * len(sample) * _MARGIN) + _SLACK)
        under = scratch.array("under", len(distances), np.bool_) if scratch else None
        under = np.less_equal(distances, _cut(sample, want, bits), out=under)
        candidates = np.flatnonzero(under)
        if len(candidates) < n:  # the guess fell below the cut: count them all
            candidates = None
    if candidates is None:
        candidates = np.arange(len(distances))
    held = distances[candidates]
    cut = _cut(held, n, bits)
    below = candidates[held < cut]
    at = candidates[held == cut][: n - len(below)]
    return np.concatenate([below, at])


def _cut(distances: np.ndarray, n: int, bits: int) -> int:
    """The smallest distance with at least `n` of `distances` at or below it."""
    counts = np.bincount(distances, minlength=bits + 1)
    return int(np.searchsorted(np.cumsum(counts), n))
