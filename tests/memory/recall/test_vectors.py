"""memory/recall/vectors.py: the in-RAM mirror of each user's vectors."""

import resource
import signal
import tempfile
import threading

import numpy as np
import pytest

from memory.recall import vectors
from memory.recall.int8_rows import is_int8
from memory.recall.user_matrix import BLOCK_ROWS
from memory.recall.vectors import EXACT_BELOW, VectorIndex

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


def test_a_user_without_vectors_is_not_held_and_their_first_are_read_from_the_store():
    """Any request may name a new user: each held empty stayed for good (~1-4 kB each)."""
    loader = Loader({})
    index = VectorIndex(loader)
    for n in range(1000):
        assert index.search(f"user-{n}", E[0], 5) == []
    assert index.loaded_users() == 0
    loader.rows["user-7"] = (list(range(100, 200)), np.tile(E[3], (100, 1)))
    index.add("user-7", list(range(100, 200)), np.tile(E[3], (100, 1)))  # not held: the store's
    found = index.search("user-7", E[3], 200)
    assert sorted(chunk_id for chunk_id, _ in found) == list(range(100, 200))
    assert index.loaded_users() == 1


def test_a_user_without_vectors_is_read_from_the_store_once(monkeypatch):
    """Reading that a user has no vectors costs ~2 ms of SQLite: a new user's requests read it
    once, by id only (at most `EMPTY_HELD` ids, the oldest let go first), until their first
    vectors are added or they are dropped."""
    monkeypatch.setattr(vectors, "EMPTY_HELD", 3)
    loader = Loader({})
    index = VectorIndex(loader)
    for _ in range(3):
        assert index.search("new", E[0], 5) == []
    assert (loader.calls, index.loaded_users()) == (["new"], 0)
    for n in range(3):
        index.search(f"other-{n}", E[0], 5)
    index.search("new", E[0], 5)  # the oldest went first: read again
    assert loader.calls.count("new") == 2
    loader.rows["other-2"] = ([5], E[2:3])
    index.add("other-2", [5], E[2:3])  # their first vectors: read from the store
    assert [chunk_id for chunk_id, _ in index.search("other-2", E[2], 5)] == [5]
    index.drop("new")
    index.search("new", E[0], 5)
    assert loader.calls.count("new") == 3


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
    loaded, added = random_units(100, 1), random_units(BLOCK_ROWS * 2 + 37, 2)
    index = VectorIndex(Loader({"alice": (list(range(100)), loaded)}))
    index.count("alice")
    ids = list(range(100, 100 + len(added)))
    for start in range(0, len(added), 1000):  # in indexing-sized batches
        index.add("alice", ids[start : start + 1000], added[start : start + 1000])

    everything, query = np.vstack([loaded, added]), unit(1, 2, 3, 4)
    expected = np.argsort(-(everything @ query), kind="stable")[:20]
    found = index.search("alice", query, 20)
    assert [i for i, _ in found] == expected.tolist()
    wanted = [3, 99, 100, 100 + BLOCK_ROWS, 100 + len(added) - 1, 10**9]
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
    extra = rng.normal(size=(BLOCK_ROWS + 10, 16)).astype(np.float32)
    extra /= np.linalg.norm(extra, axis=1, keepdims=True)
    new_ids = list(range(EXACT_BELOW + 1, EXACT_BELOW + 1 + len(extra)))
    index.add("alice", new_ids, extra)
    for position in (0, BLOCK_ROWS - 1, BLOCK_ROWS + 5):
        assert index.search("alice", extra[position], 1)[0][0] == new_ids[position]


def topical_rows(seed, n, dim=384):
    """Rows around 300 centres, as sentence embeddings have topics."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(300, dim)).astype(np.float32)
    rows = centres[rng.integers(0, 300, n)] / np.sqrt(dim)
    rows += rng.normal(size=rows.shape).astype(np.float32) / np.sqrt(dim)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True), rng


def half(rows):
    """What the store hands over for a large user: float16 rows."""
    return rows.astype(np.float16)


def test_int8_rows_of_a_large_user_find_the_same_top_hits_as_float32():
    # The best 80 of the 2,000 rows the codes find, by int8 scores and then by the float16
    # rows' cosines: float32's rows but for a near tie at the edge, float32's cosines within
    # 1e-4. (Real MiniLM vectors, 20k rows and 300 queries: docs/performance.md has the
    # recall of the exact top 80 and the error of int8 scores.)
    rows, rng = topical_rows(11, EXACT_BELOW + 1000)
    ids = np.arange(1, len(rows) + 1)
    full = VectorIndex(Loader({"alice": (ids, rows)}))
    small = VectorIndex(lambda user: (ids, half(rows)))
    recall: dict[str, list[float]] = {"float32": [], "int8": []}
    for n in range(20):
        query = rows[n * 97] + 0.3 * unit(*rng.normal(size=384))
        query /= np.linalg.norm(query)
        found, expected = small.search("alice", query, 80), full.search("alice", query, 80)
        assert [i for i, _ in found[:10]] == [i for i, _ in expected[:10]]
        assert len({i for i, _ in found} & {i for i, _ in expected}) >= 79
        cosines = dict(expected)
        assert [c for i, c in found if i in cosines] == pytest.approx(
            [cosines[i] for i, _ in found if i in cosines], abs=1e-4
        )
        truth = set(ids[np.argsort(-(rows @ query), kind="stable")[:80]].tolist())
        for kind, hits in (("float32", expected), ("int8", found)):
            recall[kind].append(len({i for i, _ in hits} & truth) / 80)
    assert np.mean(recall["int8"]) >= max(0.98, np.mean(recall["float32"]) - 0.005)
    assert all(is_int8(block) for block in small._matrix("alice").blocks)


def test_the_cosines_of_int8_rows_are_the_float16_rows():
    rows, rng = topical_rows(12, EXACT_BELOW + 100)
    ids = np.arange(1, len(rows) + 1) * 3
    index = VectorIndex(lambda user: (ids, half(rows)))
    query = rows[5] + 0.5 * unit(*rng.normal(size=384))
    query /= np.linalg.norm(query)
    rounded = dict(zip(ids.tolist(), half(rows).astype(np.float32) @ query, strict=True))
    found = index.search("alice", query, 80)
    assert [c for _, c in found] == pytest.approx([rounded[i] for i, _ in found], abs=1e-6)
    some = [int(ids[0]), int(ids[-1]), 7]  # 7 is no chunk of hers
    cosines = index.similarities("alice", query, some)
    assert cosines == {i: pytest.approx(float(rounded[i]), abs=1e-6) for i in some[:2]}
    held = index.vectors("alice", some)
    assert set(held) == set(some[:2]) and held[some[1]].dtype == np.float32
    assert np.array_equal(held[some[1]], half(rows)[-1].astype(np.float32))  # the float16 row
    # The int8 rows' own scores, which only rank: a few thousandths off.
    view = index._matrix("alice")
    positions = np.arange(0, len(ids), 7)
    error = np.abs(view.scores_at(positions, query) - view.cosines_at(positions, query))
    assert 1e-5 < error.max() < 5e-3


def test_rows_a_recall_read_give_the_same_floats_as_reading_them_again():
    # One recall's searches keep the float16 rows they read (`read`): the later turns take
    # them from there. Bit for bit what a fresh read gives, in the order asked (BLAS sums a
    # row differently by its place in a matrix, so the cosines must come from the same one).
    rows, rng = topical_rows(13, EXACT_BELOW + 500)
    ids = np.arange(1, len(rows) + 1) * 2
    index = VectorIndex(lambda user: (ids, half(rows)))
    for n in range(5):
        query = rows[n * 101] + 0.4 * unit(*rng.normal(size=384))
        query /= np.linalg.norm(query)
        read: dict[int, np.ndarray] = {}
        found = index.search("alice", query, 80, read)
        assert found == index.search("alice", query, 80)
        assert {i for i, _ in found} <= set(read)
        lexical = [int(i) for i in rng.choice(ids, 70, replace=False)] + [3]  # 3: not hers
        asked = [i for i in lexical if i not in dict(found)]
        assert index.similarities("alice", query, asked, read) == index.similarities(
            "alice", query, asked
        )
        assert set(lexical[:-1]) <= set(read)
        later = [i for i, _ in found[:5]] + lexical  # read by the search and the cosines
        again, fresh = index.vectors("alice", later, read), index.vectors("alice", later)
        assert list(again) == list(fresh)
        assert all(np.array_equal(again[i], fresh[i]) for i in fresh)
        mixed = [int(ids[n]), *later[:30]]  # one row not read yet, among rows read
        assert index.similarities("alice", query, mixed, read) == index.similarities(
            "alice", query, mixed
        )


def test_a_user_held_in_float32_keeps_no_rows_read():
    rows, _ = topical_rows(14, 300)
    index = VectorIndex(lambda user: (np.arange(1, 301), rows))
    read: dict[int, np.ndarray] = {}
    index.search("alice", rows[0], 10, read)
    index.similarities("alice", rows[0], [1, 2, 3], read)
    assert read == {}


def test_rows_appended_to_an_int8_user_are_held_in_int8_and_in_the_file():
    rows = random_units(EXACT_BELOW, 5)
    ids = np.arange(1, EXACT_BELOW + 1)
    extra = random_units(BLOCK_ROWS + 3, 6)
    new_ids = np.arange(EXACT_BELOW + 1, EXACT_BELOW + 4 + BLOCK_ROWS)
    index = VectorIndex(lambda user: (ids, half(rows)))
    index.count("alice")
    index.add("alice", new_ids.tolist(), extra)
    view = index._matrix("alice")
    assert len(view.blocks) == 3 and all(is_int8(block) for block in view.blocks)
    for position in (0, BLOCK_ROWS - 1, BLOCK_ROWS + 2):
        found = index.search("alice", extra[position], 1)
        assert found == [(int(new_ids[position]), pytest.approx(1.0, abs=1e-3))]
    # An id out of order: the rows are merged, sorted, and written to a new file.
    index.add("alice", [5_000_000, 0], np.stack([extra[0], rows[1]]))
    merged = index._matrix("alice")
    assert merged.ids[0] == 0 and len(merged.ids) == EXACT_BELOW + 5 + BLOCK_ROWS
    assert all(is_int8(block) for block in merged.blocks) and merged.file is not view.file
    assert index.search("alice", rows[1], 2)[0][1] == pytest.approx(1.0, abs=1e-3)
    assert {i for i, _ in index.search("alice", rows[1], 2)} == {0, 2}
    assert index.similarities("alice", extra[5], [int(new_ids[5])])[int(new_ids[5])] > 0.999
    assert view.file is not None and view.cosines_at(np.array([0]), rows[0])[0] > 0.999


def test_without_a_temporary_directory_a_large_user_stays_in_float16(monkeypatch, caplog):
    monkeypatch.setattr(tempfile, "tempdir", "/nonexistent/moim-tmp")
    rows, rng = topical_rows(14, EXACT_BELOW)
    ids = np.arange(1, len(rows) + 1)
    index = VectorIndex(lambda user: (ids, half(rows)))
    found = index.search("alice", rows[3], 3)
    view = index._matrix("alice")
    assert view.file is None and view.blocks[0].dtype == np.float16
    assert found[0] == (4, pytest.approx(1.0, abs=1e-3))
    assert "stay in RAM" in caplog.text


@pytest.mark.skipif(not hasattr(signal, "SIGXFSZ"), reason="needs RLIMIT_FSIZE (POSIX)")
def test_a_row_file_that_cannot_grow_drops_the_user_so_the_next_search_reloads_them(caplog):
    rows = random_units(EXACT_BELOW, 7)
    extra = random_units(3, 8)
    stored = {"ids": np.arange(1, EXACT_BELOW + 1), "rows": rows}  # what the store holds
    index = VectorIndex(lambda user: (stored["ids"], half(stored["rows"])))
    index.count("alice")  # loaded: int8 rows, float16 rows in a file of exactly this size
    new_ids = np.arange(EXACT_BELOW + 1, EXACT_BELOW + 4)
    stored["ids"] = np.concatenate([stored["ids"], new_ids])  # the writer committed them
    stored["rows"] = np.concatenate([rows, extra])
    file_size = EXACT_BELOW * rows.shape[1] * 2
    ignored = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    limits = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_size, limits[1]))
    try:  # no file of this process may grow past the row file's size: a full disk for it
        index.add("alice", new_ids.tolist(), extra)
        found = index.search("alice", extra[1], 1)  # reloaded; the file fails again: float16
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, limits)
        signal.signal(signal.SIGXFSZ, ignored)
    assert found == [(int(new_ids[1]), pytest.approx(1.0, abs=1e-3))]
    assert "reloaded" in caplog.text and "stay in RAM" in caplog.text
