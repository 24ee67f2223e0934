"""memory/recall/vectors.py for users past EXACT_BELOW: loading them, and what the codes find."""

import resource
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from memory import fix_mmap_threshold
from memory.recall.vectors import EXACT_BELOW, VectorIndex


def random_units(seed, n, dim=384):
    rows = np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


class HeldRows(np.ndarray):
    """float16 rows whose mean (the first thing a matrix is made of) waits for the test."""

    entered = threading.Event()
    release = threading.Event()

    def mean(self, *args, **kwargs):
        HeldRows.entered.set()
        assert HeldRows.release.wait(10)
        return np.asarray(self).mean(*args, **kwargs)


def test_making_a_large_users_matrix_does_not_hold_up_other_users():
    # Codes, int8 rows and the row file of a 1M-vector user take seconds: made under the
    # index's lock, every other user's search waited for them.
    HeldRows.entered, HeldRows.release = threading.Event(), threading.Event()
    rows = random_units(1, EXACT_BELOW + 10)
    held = rows.astype(np.float16).view(HeldRows)
    stored = {"big": (np.arange(1, len(rows) + 1), held), "small": (np.array([7]), rows[:1])}
    index = VectorIndex(lambda user: stored[user])
    big = threading.Thread(target=index.search, args=("big", rows[0], 5))
    big.start()
    try:
        assert HeldRows.entered.wait(10)
        small = threading.Thread(target=index.search, args=("small", rows[0], 1))
        small.start()
        small.join(5)
        assert not small.is_alive()  # answered while the big user's matrix is being made
    finally:
        HeldRows.release.set()
        big.join(10)
    assert index.search("big", rows[3], 1)[0][0] == 4


def test_a_large_user_of_random_unit_vectors_finds_most_of_the_exact_top_80():
    # Random unit vectors are the codes' worst case (no topics: the exact top 80 of a query
    # are barely nearer than the rest); measured 0.70 mean, 0.58 at worst, over 20 queries.
    # Real MiniLM vectors: 0.998 (docs/performance.md).
    rows = random_units(7, 30_000)
    ids = np.arange(1, len(rows) + 1)
    index = VectorIndex(lambda user: (ids, rows.astype(np.float16)))
    rng, recall = np.random.default_rng(8), []
    for _ in range(20):
        query = random_units(int(rng.integers(1 << 30)), 1)[0]
        truth = set(ids[np.argsort(-(rows @ query))[:80]].tolist())
        recall.append(len({i for i, _ in index.search("alice", query, 80)} & truth) / 80)
    assert np.mean(recall) >= 0.6


@pytest.mark.skipif(not hasattr(resource, "RUSAGE_THREAD"), reason="Linux counts per thread")
def test_a_large_users_searches_on_a_thread_reuse_its_memory():
    # The server maps every block of 1 MiB or more on its own and unmaps it when freed
    # (proxy/runtime.py: RSS), so a search's temporaries (megabytes at 1M rows) were faulted
    # in afresh every time: 25-50 ms a search at 1M in a server, ~3 ms at 100k. Its buffers
    # are now the searching thread's own, reused.
    fix_mmap_threshold(1 << 20)  # as `moim serve` does (tests/memory/test_heap.py too)
    rows = random_units(9, 300_000, dim=16)
    ids = np.arange(1, len(rows) + 1)
    index = VectorIndex(lambda user: (ids, rows.astype(np.float16)))
    index.count("alice")

    def faults_of_a_search(query):
        before = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
        index.search("alice", query, 80)
        return resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - before

    with ThreadPoolExecutor(1) as worker:
        worker.submit(faults_of_a_search, rows[0]).result()  # the thread's buffers are made
        faults = [worker.submit(faults_of_a_search, rows[n]).result() for n in (1, 2, 3)]
    assert max(faults) < 20  # before: ~600 pages a search (2.4 MB of xor, each word)
