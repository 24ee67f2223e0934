"""memory/recall/vectors.py: the in-RAM mirror of each user's vectors."""

import threading

import numpy as np
import pytest

from memory.recall.vectors import _BLOCK_ROWS, EXACT_BELOW, VectorIndex

E = np.eye(4, dtype=np.float32)  # four orthogonal unit vectors


def unit(*values):
    vector = np.array(values, dtype=np.float32)
    return vector / np.linalg.norm(vector)


class Loader:
    """Stands in for `Store.user_vectors`: fixed rows per user, and a log of calls."""

    def __init__(self, rows):
        self.rows = rows
        self.calls = []

    def __call__(self, user_id):
        self.calls.append(user_id)
        ids, vectors = self.rows.get(user_id, ([], np.zeros((0, 4), dtype=np.float32)))
        return np.asarray(ids, dtype=np.int64), np.asarray(vectors, dtype=np.float32)


def test_nothing_is_loaded_until_the_first_search():
    loader = Loader({"alice": ([1], E[:1])})
    index = VectorIndex(loader)
    assert (loader.calls, index.loaded_users()) == ([], 0)
    index.search("alice", E[0], 5)
    index.search("alice", E[0], 5)
    assert (loader.calls, index.loaded_users()) == (["alice"], 1)


def test_search_returns_the_top_k_best_first():
    rows = np.stack([unit(1, 0, 0, 0), unit(1, 1, 0, 0), unit(0, 1, 0, 0), unit(1, 3, 0, 0)])
    index = VectorIndex(Loader({"alice": ([10, 11, 12, 13], rows)}))
    found = index.search("alice", E[0], 3)
    assert [chunk_id for chunk_id, _ in found] == [10, 11, 13]
    assert [round(score, 4) for _, score in found] == [1.0, 0.7071, 0.3162]


def test_k_larger_than_the_user_returns_everything():
    index = VectorIndex(Loader({"alice": ([1, 2], E[:2])}))
    assert [chunk_id for chunk_id, _ in index.search("alice", E[1], 50)] == [2, 1]


def test_empty_user_finds_nothing():
    index = VectorIndex(Loader({}))
    assert index.search("nobody", E[0], 5) == []


def test_vectors_returns_the_rows_of_the_ids_held_and_skips_the_others():
    index = VectorIndex(Loader({"alice": ([1, 2, 3], E[:3]), "bob": ([4], E[3:4])}))
    index.count("alice")  # loaded, then one appended
    index.add("alice", [9], E[3:4])
    found = index.vectors("alice", [3, 9, 4, 77])
    assert sorted(found) == [3, 9]  # 4 is bob's, 77 nobody's
    assert np.array_equal(found[3], E[2]) and np.array_equal(found[9], E[3])
    assert found[3].dtype == np.float32
    assert index.vectors("alice", []) == {}


def test_vectors_of_a_float16_user_come_back_as_float32():
    rows = random_units(EXACT_BELOW, 5)
    index = VectorIndex(lambda user: (np.arange(1, EXACT_BELOW + 1), rows.astype(np.float16)))
    found = index.vectors("alice", [7, EXACT_BELOW])
    assert sorted(found) == [7, EXACT_BELOW]
    assert found[7].dtype == np.float32
    assert np.allclose(found[7], rows[6], atol=1e-3)


def test_add_after_load_is_searchable():
    index = VectorIndex(Loader({"alice": ([1], E[:1])}))
    index.search("alice", E[0], 5)
    index.add("alice", [2, 3], E[1:3])
    assert [chunk_id for chunk_id, _ in index.search("alice", E[2], 1)] == [3]
    assert sorted(chunk_id for chunk_id, _ in index.search("alice", E[0], 10)) == [1, 2, 3]


def test_add_to_a_loaded_empty_user_grows_its_matrix():
    index = VectorIndex(Loader({}))
    index.search("alice", E[0], 5)
    index.add("alice", list(range(100, 200)), np.tile(E[3], (100, 1)))
    found = index.search("alice", E[3], 200)
    assert sorted(chunk_id for chunk_id, _ in found) == list(range(100, 200))


def test_add_before_load_is_left_to_the_loader():
    loader = Loader({"alice": ([1], E[:1])})
    index = VectorIndex(loader)
    index.add("alice", [2], E[1:2])
    assert index.loaded_users() == 0
    assert [chunk_id for chunk_id, _ in index.search("alice", E[1], 5)] == [1]


def test_search_is_per_user():
    index = VectorIndex(Loader({"alice": ([1], E[:1]), "bob": ([2], E[:1])}))
    assert [chunk_id for chunk_id, _ in index.search("alice", E[0], 5)] == [1]
    assert [chunk_id for chunk_id, _ in index.search("bob", E[0], 5)] == [2]


def test_drop_one_user_reloads_only_that_user():
    loader = Loader({"alice": ([1], E[:1]), "bob": ([2], E[:1])})
    index = VectorIndex(loader)
    index.search("alice", E[0], 5)
    index.search("bob", E[0], 5)
    index.drop("alice")
    assert index.loaded_users() == 1
    index.search("alice", E[0], 5)
    index.search("bob", E[0], 5)
    assert loader.calls == ["alice", "bob", "alice"]


def test_drop_everything_reloads_on_next_search():
    loader = Loader({"alice": ([1], E[:1])})
    index = VectorIndex(loader)
    index.search("alice", E[0], 5)
    loader.rows["alice"] = ([7], E[1:2])
    index.drop()
    assert index.loaded_users() == 0
    assert [chunk_id for chunk_id, _ in index.search("alice", E[1], 5)] == [7]


class SlowLoader(Loader):
    """A loader that blocks inside the load until the test releases it."""

    def __init__(self, rows, slow_user):
        super().__init__(rows)
        self.slow_user = slow_user
        self.entered = threading.Event()
        self.release = threading.Event()

    def __call__(self, user_id):
        result = super().__call__(user_id)
        if user_id == self.slow_user:
            self.entered.set()
            assert self.release.wait(5)
        return result


def in_thread(function, *args):
    box = {}
    thread = threading.Thread(target=lambda: box.setdefault("result", function(*args)))
    thread.start()
    return thread, box


def test_a_slow_load_does_not_hold_up_other_users():
    loader = SlowLoader({"alice": ([1], E[:1]), "bob": ([2], E[1:2])}, slow_user="alice")
    index = VectorIndex(loader)
    thread, box = in_thread(index.search, "alice", E[0], 1)
    assert loader.entered.wait(5)

    assert index.search("bob", E[1], 1) == [(2, 1.0)]  # answered while alice still loads

    loader.release.set()
    thread.join(5)
    assert box["result"] == [(1, 1.0)]


def test_concurrent_first_searches_load_a_user_once():
    loader = SlowLoader({"alice": ([1], E[:1])}, slow_user="alice")
    index = VectorIndex(loader)
    threads = [in_thread(index.search, "alice", E[0], 1) for _ in range(4)]
    assert loader.entered.wait(5)
    loader.release.set()
    for thread, box in threads:
        thread.join(5)
        assert box["result"] == [(1, 1.0)]
    assert loader.calls == ["alice"]


def test_chunks_indexed_during_a_load_are_not_lost():
    loader = SlowLoader({"alice": ([1], E[:1])}, slow_user="alice")
    index = VectorIndex(loader)
    thread, _ = in_thread(index.count, "alice")
    assert loader.entered.wait(5)

    index.add("alice", [1, 2], E[[0, 1]])  # 1 is also in the load; 2 is new

    loader.release.set()
    thread.join(5)
    assert sorted(i for i, _ in index.search("alice", E[1], 5)) == [1, 2]
    assert index.count("alice") == 2


def test_a_user_dropped_during_a_load_is_loaded_again_next_time():
    loader = SlowLoader({"alice": ([1], E[:1])}, slow_user="alice")
    index = VectorIndex(loader)
    thread, _ = in_thread(index.count, "alice")
    assert loader.entered.wait(5)
    index.drop("alice")
    loader.release.set()
    thread.join(5)

    assert index.loaded_users() == 0
    index.count("alice")
    assert loader.calls == ["alice", "alice"]


def test_spare_rows_of_a_loaded_matrix_are_ignored():
    spare = np.vstack([E[:1], np.full((3, 4), 9.0, dtype=np.float32)])  # one real row
    index = VectorIndex(lambda user: (np.array([5], dtype=np.int64), spare))
    assert index.search("alice", E[0], 5) == [(5, 1.0)]

    index.add("alice", [7], E[1:2])
    index.add("alice", [6], E[2:3])  # an id below the last one stays findable

    assert index.similarities("alice", E[2], [5, 6, 7]) == {5: 0.0, 6: 1.0, 7: 0.0}
    assert [i for i, _ in index.search("alice", E[1], 1)] == [7]


def random_units(n, seed):
    rows = np.random.default_rng(seed).normal(size=(n, 4)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_appends_across_many_blocks_match_one_matrix():
    # Rows added after the load go into blocks; recall must not see the difference.
    loaded, added = random_units(100, 1), random_units(_BLOCK_ROWS * 2 + 37, 2)
    index = VectorIndex(Loader({"alice": (list(range(100)), loaded)}))
    index.count("alice")
    ids = list(range(100, 100 + len(added)))
    for start in range(0, len(added), 1000):  # in indexing-sized batches
        index.add("alice", ids[start : start + 1000], added[start : start + 1000])

    everything, query = np.vstack([loaded, added]), unit(1, 2, 3, 4)
    expected = np.argsort(-(everything @ query), kind="stable")[:20]
    found = index.search("alice", query, 20)
    assert [i for i, _ in found] == expected.tolist()
    wanted = [3, 99, 100, 100 + _BLOCK_ROWS, 100 + len(added) - 1, 10**9]
    cosines = index.similarities("alice", query, wanted)
    assert set(cosines) == set(wanted[:-1])  # an id not held is absent
    for i in wanted[:-1]:
        assert cosines[i] == pytest.approx(float(everything[i] @ query), abs=1e-6)
    assert index.count("alice") == len(everything)


def test_an_id_added_out_of_order_after_blocks_stays_findable():
    index = VectorIndex(Loader({"alice": ([10, 20], E[:2])}))
    index.count("alice")
    index.add("alice", [30, 40], E[2:4])
    index.add("alice", [15], E[2:3])  # lower than the last id: a reused slot
    assert index.similarities("alice", E[2], [10, 15, 20, 30, 40]) == {
        10: 0.0,
        15: 1.0,
        20: 0.0,
        30: 1.0,
        40: 0.0,
    }
    assert sorted(i for i, _ in index.search("alice", E[2], 2)) == [15, 30]


def test_a_search_under_way_is_not_changed_by_appends():
    index = VectorIndex(Loader({"alice": ([1], E[:1])}))
    view = index._matrix("alice")
    index.add("alice", [2, 3], E[1:3])
    assert view.ids.tolist() == [1] and len(view.scores(E[0])) == 1
    assert index.count("alice") == 3


def test_a_large_user_is_searched_by_codes_then_scored_exactly():
    rng = np.random.default_rng(3)
    rows = rng.normal(size=(EXACT_BELOW + 500, 16)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    ids = np.arange(1, len(rows) + 1) * 2
    index = VectorIndex(Loader({"alice": (ids, rows)}))
    query = rows[777]
    found = index.search("alice", query, 10)
    assert found[0] == (int(ids[777]), pytest.approx(1.0, abs=1e-6))
    by_id = dict(zip(ids.tolist(), rows, strict=True))
    exact = [float(by_id[i] @ query) for i, _ in found]
    assert [score for _, score in found] == pytest.approx(exact, abs=1e-6)
    assert [score for _, score in found] == sorted((score for _, score in found), reverse=True)


def test_rows_appended_to_a_large_user_have_codes_and_are_found():
    rng = np.random.default_rng(4)
    rows = rng.normal(size=(EXACT_BELOW, 16)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    index = VectorIndex(Loader({"alice": (np.arange(1, EXACT_BELOW + 1), rows)}))
    index.search("alice", rows[0], 5)  # loaded
    extra = rng.normal(size=(_BLOCK_ROWS + 10, 16)).astype(np.float32)
    extra /= np.linalg.norm(extra, axis=1, keepdims=True)
    new_ids = list(range(EXACT_BELOW + 1, EXACT_BELOW + 1 + len(extra)))
    index.add("alice", new_ids, extra)
    for position in (0, _BLOCK_ROWS - 1, _BLOCK_ROWS + 5):
        assert index.search("alice", extra[position], 1)[0][0] == new_ids[position]


def test_float16_rows_of_a_large_user_find_the_same_top_hits_as_float32():
    # A fixed set with topics, as sentence embeddings have: rows around 300 centres, 20
    # queries near stored rows. (Real MiniLM vectors, 20k rows and 300 queries: top-80 overlap
    # of float16 with float32 0.999, scores within 6e-5, recall of the exact top 80 0.998.)
    rng = np.random.default_rng(11)
    centres = rng.normal(size=(300, 384)).astype(np.float32)
    rows = centres[rng.integers(0, 300, EXACT_BELOW + 1000)] / np.sqrt(384)
    rows += rng.normal(size=rows.shape).astype(np.float32) / np.sqrt(384)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    ids = np.arange(1, len(rows) + 1)
    full = VectorIndex(Loader({"alice": (ids, rows)}))
    half = VectorIndex(lambda user: (ids, rows.astype(np.float16)))
    recall: dict[str, list[float]] = {"float32": [], "float16": []}
    for n in range(20):
        query = rows[n * 97] + 0.3 * unit(*rng.normal(size=384))
        query /= np.linalg.norm(query)
        truth = ids[np.argsort(-(rows @ query), kind="stable")[:80]].tolist()
        rounded = half.search("alice", query, 80)
        for kind, found in (("float32", full.search("alice", query, 80)), ("float16", rounded)):
            recall[kind].append(len({i for i, _ in found} & set(truth)) / 80)
        assert [i for i, _ in rounded[:10]] == truth[:10]
        exact = {int(i): float(rows[i - 1] @ query) for i, _ in rounded}
        assert all(abs(score - exact[i]) < 1e-3 for i, score in rounded)
    assert np.mean(recall["float16"]) >= max(0.98, np.mean(recall["float32"]) - 0.005)


def test_rows_appended_to_a_float16_user_are_held_in_float16():
    rows = random_units(EXACT_BELOW, 5)
    index = VectorIndex(lambda user: (np.arange(1, EXACT_BELOW + 1), rows.astype(np.float16)))
    index.count("alice")
    extra = random_units(_BLOCK_ROWS + 3, 6)
    index.add("alice", list(range(EXACT_BELOW + 1, EXACT_BELOW + 4 + _BLOCK_ROWS)), extra)
    view = index._matrix("alice")
    assert {block.dtype for block in view.blocks} == {np.dtype(np.float16)}
    found = index.search("alice", extra[-1], 1)
    assert found[0][0] == EXACT_BELOW + 3 + _BLOCK_ROWS
    assert found[0][1] == pytest.approx(1.0, abs=1e-3)
    assert view.scores(extra[-1]).dtype == np.float32
