"""memory/store/chunk_heads.py: a large user's chunks but their text, in step with SQLite.

Through `Store.chunk_heads` on real SQLite: what RAM gives is what `Store.chunks` gives but
the text and the hash, a chunk indexed after the load is seen, one forgotten or replaced is
not, and a change of another process is never answered from RAM.
"""

import threading
from dataclasses import replace

import numpy as np
import pytest

from memory.store.chunk_heads import _COMPACT_AT, ChunkHeads, Columns, Head
from memory.store.store import Store
from tests.memory.hash_embedder import HashEmbedder
from tests.memory.store.test_store import new_message, remember


@pytest.fixture
def settings(tmp_path):
    from memory.settings import Settings

    return Settings(db_path=tmp_path / "moim.db")


@pytest.fixture
def store(settings):
    store = Store(settings.db_path)
    store.ensure_vectors(HashEmbedder.name, HashEmbedder.dim)
    return store


def held(store, user_id, ids, present=()):
    """`chunk_heads` once the user's heads are read: (chunks, the ids that came as heads)."""
    store.chunk_heads(user_id, list(ids), present, True)
    assert store.heads.wait(user_id, timeout=10)
    return store.chunk_heads(user_id, list(ids), present, True)


def headless(chunks):
    return {i: replace(c, text="", message_hash="") for i, c in chunks.items()}


def test_heads_are_the_rows_but_their_text_and_hash(store, settings):
    remember(store, settings, "ann", "s1", "I keep bees on the roof")
    remember(store, settings, "ann", "s2", "My sister lives in Lyon", "how nice")
    whole = store.chunks("ann", range(1, 10))
    found, heads = held(store, "ann", range(1, 10))
    assert heads == set(whole) and len(whole) == 4
    assert found == headless(whole)
    assert list(found) == list(whole)  # ascending ids, as `chunks`
    assert {c.turn for c in found.values()} == {1, 2}


def test_a_user_not_asked_for_is_read_whole(store, settings):
    remember(store, settings, "ann", "s1", "I keep bees on the roof")
    found, heads = store.chunk_heads("ann", list(range(1, 10)), (), hold=False)
    assert (found, heads) == (store.chunks("ann", range(1, 10)), set())


def test_a_chunk_whose_message_is_present_comes_whole(store, settings):
    remember(store, settings, "ann", "s1", "I keep bees on the roof")
    whole = store.chunks("ann", range(1, 10))
    bees = next(c for c in whole.values() if c.text.startswith("I keep bees"))
    found, heads = held(store, "ann", range(1, 10), present={bees.message_hash})
    assert found[bees.id] == bees and bees.id not in heads
    assert heads == set(whole) - {bees.id}


def test_a_chunk_indexed_after_the_load_is_seen(store, settings):
    remember(store, settings, "ann", "s1", "I keep bees on the roof")
    held(store, "ann", range(1, 10))
    remember(store, settings, "ann", "s2", "My sister lives in Lyon", "how nice")
    found, heads = store.chunk_heads("ann", list(range(1, 10)), (), True)
    assert heads == set(range(1, 5))  # from RAM, not read again
    assert found == headless(store.chunks("ann", range(1, 10)))


def test_a_forgotten_user_is_not_seen_and_their_freed_ids_show_the_new_chunks(store, settings):
    remember(store, settings, "ann", "s1", "I keep bees on the roof")
    old = held(store, "ann", range(1, 10))[0]
    store.delete_user("ann")
    assert store.chunk_heads("ann", list(old), (), True) == ({}, set())
    remember(store, settings, "ann", "s2", "My sister lives in Lyon", "how nice")
    again, _ = held(store, "ann", list(old))
    assert list(again) == list(old)  # the same ids, given again
    assert again == headless(store.chunks("ann", list(old)))
    assert {c.session_id for c in again.values()} == {"s2"}


def test_a_message_indexed_again_loses_its_old_chunks(store):
    store.add_messages("ann", "s1", [new_message("k1", "first words")])
    (message,) = store.unindexed_messages()
    ids = store.add_chunks(message, ["first", "words"], None, last=False)
    assert set(held(store, "ann", ids)[0]) == set(ids)
    (again,) = store.add_chunks(message, ["first words, whole"], None)  # starts over
    found, _ = store.chunk_heads("ann", ids + [again], (), True)
    assert found == headless(store.chunks("ann", ids + [again]))
    assert len(found) == 1


def test_another_processs_change_is_never_answered_from_ram(store, settings):
    remember(store, settings, "ann", "s1", "I keep bees on the roof")
    held(store, "ann", range(1, 10))
    other = Store(settings.db_path)  # e.g. `moim memory forget` beside the server
    other.delete_user("ann")
    assert store.chunk_heads("ann", list(range(1, 10)), (), True) == ({}, set())
    other.add_messages("ann", "s2", [new_message("k2", "a new life")])
    (message,) = other.unindexed_messages()
    other.add_chunks(message, ["a new life"], np.ones((1, HashEmbedder.dim), dtype=np.float32))
    found, heads = store.chunk_heads("ann", list(range(1, 10)), (), True)
    assert [c.text for c in found.values()] == ["a new life"] and heads == set()


def head(chunk_id, session="s1"):
    return Head(chunk_id, chunk_id, session, "user", None, 1.0 + chunk_id, f"h{chunk_id}", 1)


def test_a_change_told_while_the_heads_are_read_is_replayed_over_them():
    reading, go = threading.Event(), threading.Event()

    def reader(user_id):  # read at generation 5, while generation 6 is committed
        reading.set()
        go.wait(10)
        return 5, Columns.of([head(1), head(2)])

    heads = ChunkHeads(reader)
    assert heads.get("ann", [1], 5, ()) is None  # not held: read in the background
    reading.wait(10)
    heads.changed(5, "ann", added=[head(2)])  # in what was read already
    heads.changed(6, "ann", deleted=[1], added=[head(3)])
    go.set()
    assert heads.wait("ann", timeout=10)
    found, whole = heads.get("ann", [1, 2, 3], 6, ())
    assert (sorted(found), whole) == ([2, 3], [])


def test_a_generation_missed_while_reading_keeps_nothing():
    reading, go = threading.Event(), threading.Event()

    def reader(user_id):
        reading.set()
        go.wait(10)
        return 5, Columns.of([head(1)])

    heads = ChunkHeads(reader)
    heads.get("ann", [1], 5, ())
    reading.wait(10)
    heads.changed(7, "bob")  # 6 was never told: another process's
    go.set()
    assert not heads.wait("ann", timeout=10)


def test_a_generation_missed_drops_the_users_heads():
    heads = ChunkHeads(lambda user_id: (5, Columns.of([head(1)])))
    heads.get("ann", [1], 5, ())
    assert heads.wait("ann", timeout=10)
    heads.changed(6, "bob")  # another user's change: followed
    assert heads.get("ann", [1], 6, ()) is not None
    heads.changed(8, "bob")  # 7 missed
    assert heads.get("ann", [1], 8, ()) is None
    assert not heads.wait("ann", timeout=0)


def test_heads_behind_the_database_are_not_served_then_dropped():
    heads = ChunkHeads(lambda user_id: (5, Columns.of([head(1)])))
    heads.get("ann", [1], 5, ())
    heads.wait("ann", timeout=10)
    assert [heads.get("ann", [1], 6, ()) for _ in range(3)] == [None] * 3
    assert not heads.wait("ann", timeout=0)  # dropped: read again at the next get


def test_many_rows_added_and_deleted_are_folded_into_the_columns():
    heads = ChunkHeads(lambda user_id: (1, Columns.of([head(i) for i in range(1, 101)])))
    heads.get("ann", [1], 1, ())
    heads.wait("ann", timeout=10)
    added = [head(i, "s2") for i in range(101, 101 + _COMPACT_AT)]
    heads.changed(2, "ann", deleted=list(range(1, 51)), added=added)
    found, _ = heads.get("ann", list(range(1, 101 + _COMPACT_AT)), 2, ())
    assert sorted(found) == list(range(51, 101 + _COMPACT_AT))
    assert found[200].session_id == "s2" and found[60].session_id == "s1"
    assert found[200].created_at == 201.0 and found[200].turn == 1
