"""memory/store/chunk_rows.py: chunk rows held in RAM are never served after they change.

Through `Store.chunks` on real SQLite. SQLite gives a freed id to the next chunk when the
freed ones were the highest, so a cache that missed a deletion would show the old row under
the new chunk's id: each test deletes, writes again, and reads the same ids.
"""

import numpy as np
import pytest

from memory.records import Chunk
from memory.store.chunk_rows import ChunkRows
from memory.store.store import Store
from tests.memory.hash_embedder import HashEmbedder
from tests.memory.store.test_store import new_message, remember


@pytest.fixture
def store(settings):
    store = Store(settings.db_path)
    store.ensure_vectors(HashEmbedder.name, HashEmbedder.dim)
    return store


@pytest.fixture
def settings(tmp_path):
    from memory.settings import Settings

    return Settings(db_path=tmp_path / "moim.db")


def texts(found):
    return [chunk.text for chunk in found.values()]


def test_rows_read_again_are_served_from_ram(store, settings):
    remember(store, settings, "ann", "s1", "I keep bees on the roof")
    first = store.chunks("ann", range(1, 10))
    assert texts(first) == ["I keep bees on the roof", "noted"]
    assert len(store.rows) == 2
    assert store.chunks("ann", range(1, 10)) == first


def test_a_forgotten_users_freed_ids_show_the_new_chunks(store, settings):
    remember(store, settings, "ann", "s1", "I keep bees on the roof")
    old = store.chunks("ann", range(1, 10))
    store.delete_user("ann")
    assert store.chunks("ann", list(old)) == {}
    remember(store, settings, "ann", "s2", "My sister lives in Lyon", "how nice")
    again = store.chunks("ann", list(old))
    assert list(again) == list(old)  # the same ids, given again
    assert texts(again) == ["My sister lives in Lyon", "how nice"]


def test_forgetting_one_user_keeps_the_others_rows_right(store, settings):
    remember(store, settings, "ann", "s1", "I keep bees on the roof")
    remember(store, settings, "bob", "s1", "I play the cello")
    bobs = store.chunks("bob", range(1, 10))
    store.delete_user("ann")
    assert store.chunks("ann", range(1, 10)) == {}
    assert store.chunks("bob", range(1, 10)) == bobs


def test_a_reset_index_is_never_answered_from_ram(store, settings):
    remember(store, settings, "ann", "s1", "I keep bees on the roof")
    assert len(store.chunks("ann", range(1, 10))) == 2
    store.reset_index()
    assert store.chunks("ann", range(1, 10)) == {}


def test_a_message_indexed_again_shows_its_new_chunks(store):
    store.add_messages("ann", "s1", [new_message("k1", "first words")])
    (message,) = store.unindexed_messages()
    (chunk_id,) = store.add_chunks(message, ["first words, a slice"], None, last=False)
    assert texts(store.chunks("ann", [chunk_id])) == ["first words, a slice"]
    # indexing starts the message over (start 0): its chunks are replaced
    (again,) = store.add_chunks(message, ["first words, whole"], None)
    assert again == chunk_id
    assert texts(store.chunks("ann", [chunk_id])) == ["first words, whole"]


def test_another_process_forgetting_a_user_is_seen(store, settings):
    remember(store, settings, "ann", "s1", "I keep bees on the roof")
    assert len(store.chunks("ann", range(1, 10))) == 2
    other = Store(settings.db_path)  # e.g. `moim memory forget` beside the server
    other.delete_user("ann")
    assert store.chunks("ann", range(1, 10)) == {}
    other.add_messages("ann", "s2", [new_message("k2", "a new life")])
    (message,) = other.unindexed_messages()
    other.add_chunks(message, ["a new life"], np.ones((1, HashEmbedder.dim), dtype=np.float32))
    assert texts(store.chunks("ann", range(1, 10))) == ["a new life"]


def test_rows_held_for_one_user_are_never_another_users(store, settings):
    remember(store, settings, "ann", "s1", "I keep bees on the roof")
    anns = store.chunks("ann", range(1, 10))
    assert store.chunks("bob", list(anns)) == {}


def chunk(chunk_id, user_id="ann", text="words"):
    return Chunk(chunk_id, chunk_id, user_id, "s1", "user", None, text, 1.0)


def test_rows_read_before_a_change_are_not_kept():
    rows = ChunkRows(10)
    found, missing, ticket = rows.get("ann", [1, 2], generation=5)
    assert (found, missing) == ({}, [1, 2])
    rows.changed(6, "ann", deleted=[2])  # committed while the rows were being read
    rows.put("ann", {1: chunk(1), 2: chunk(2)}, ticket)
    assert rows.get("ann", [1, 2], generation=6)[0] == {}


def test_a_read_that_saw_an_older_generation_is_not_served_nor_kept():
    rows = ChunkRows(10)
    _, _, ticket = rows.get("ann", [1], generation=5)
    rows.put("ann", {1: chunk(1)}, ticket)
    found, missing, stale = rows.get("ann", [1], generation=4)
    assert (found, missing) == ({}, [1])
    rows.put("ann", {1: chunk(1, text="older")}, stale)
    assert rows.get("ann", [1], generation=5)[0] == {1: chunk(1)}


def test_a_generation_the_cache_was_not_told_of_drops_every_row():
    rows = ChunkRows(10)
    _, _, ticket = rows.get("ann", [1], generation=5)
    rows.put("ann", {1: chunk(1)}, ticket)
    assert rows.get("ann", [1], generation=7)[0] == {}
    assert len(rows) == 0


def test_at_most_size_rows_are_held_least_recently_used_out_first():
    rows = ChunkRows(2)
    _, _, ticket = rows.get("ann", [1, 2, 3], generation=1)
    rows.put("ann", {1: chunk(1), 2: chunk(2)}, ticket)
    rows.get("ann", [1], generation=1)  # 1 is used again: 2 is now the oldest
    rows.put("ann", {3: chunk(3)}, ticket)
    assert sorted(rows.get("ann", [1, 2, 3], generation=1)[0]) == [1, 3]
