"""memory/recall/codes.py: binary codes and the rows nearest a query by them."""

import numpy as np
import pytest

from memory.recall.codes import binary_codes, nearest, smallest
from memory.recall.scratch import Scratch


def counted(distances, n, bits):
    """The n smallest by a histogram of every distance: what `smallest` must give."""
    if n >= len(distances):
        return np.arange(len(distances))
    cut = int(np.searchsorted(np.cumsum(np.bincount(distances, minlength=bits + 1)), n))
    below = np.flatnonzero(distances < cut)
    return np.concatenate([below, np.flatnonzero(distances == cut)[: n - len(below)]])


def spread(seed, size):
    return np.random.default_rng(seed).binomial(384, 0.5, size).astype(np.uint16)


def ties(seed, size):
    return np.random.default_rng(seed).integers(100, 104, size).astype(np.uint16)


def sampled_low(seed, size):
    # Every row the sample reads is at 0, every other one at 200: the guess counts too few.
    distances = np.full(size, 200, dtype=np.uint16)
    distances[:: size // 16_384] = 0
    return distances


@pytest.mark.parametrize("make", [spread, ties, sampled_low])
@pytest.mark.parametrize("n", [1, 80, 2_000, 30_000])
def test_smallest_is_what_counting_every_distance_gives(make, n):
    distances = make(n, 300_000)
    assert np.array_equal(smallest(distances, n, 384), counted(distances, n, 384))
    assert np.array_equal(smallest(distances, n, 384, Scratch()), counted(distances, n, 384))


def test_smallest_of_fewer_rows_than_asked_is_all_of_them():
    assert np.array_equal(smallest(spread(1, 50), 80, 384), np.arange(50))


def test_nearest_finds_the_codes_nearest_by_hamming_over_every_block():
    rng = np.random.default_rng(2)
    rows = rng.normal(size=(70_000, 384)).astype(np.float32)
    mean = rows.mean(axis=0)
    codes = binary_codes(rows, mean)
    blocks = (codes[:, :50_000], codes[:, 50_000:])
    query = binary_codes(rows[123:124] + 0.5 * rng.normal(size=(1, 384)), mean)[:, 0]
    bits = np.unpackbits((codes ^ query[:, None]).T.copy().view(np.uint8), axis=1)
    distances = bits.sum(axis=1).astype(np.uint16)
    found = nearest(blocks, query, 500, Scratch())
    assert np.array_equal(found, counted(distances, 500, 384))
    assert 123 in found  # the row the query was made from


@pytest.mark.parametrize("words", [1, 2, 3, 5, 6, 7])
def test_nearest_counts_every_bit_of_codes_of_any_width(words):
    # Rows differing from the query in every bit (64 a word) must come last: a count that
    # wrapped around in a byte would put them first.
    rng = np.random.default_rng(words)
    codes = rng.integers(0, 2**64, size=(words, 40_000), dtype=np.uint64)
    query = rng.integers(0, 2**64, size=words, dtype=np.uint64)
    codes[:, ::7] = ~query[:, None]
    codes[:, 5::11] = query[:, None]
    bits = np.unpackbits((codes ^ query[:, None]).T.copy().view(np.uint8), axis=1)
    distances = bits.sum(axis=1).astype(np.uint16)
    for n in (1, 500, 30_000):
        found = nearest((codes[:, :25_000], codes[:, 25_000:]), query, n, Scratch())
        assert np.array_equal(found, counted(distances, n, words * 64))
