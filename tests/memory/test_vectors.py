"""memory/vectors.py: the in-RAM mirror of each user's vectors."""

import numpy as np

from memory.vectors import VectorIndex

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
