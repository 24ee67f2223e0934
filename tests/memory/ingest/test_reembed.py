"""memory/ingest/reembed.py and memory/store/vector_rebuild.py: a change of embedding model.

The layer is used directly (no writer), so each re-embedding step runs when the test says.
Embedders are deterministic bags of hashed words behind the real `Embedder` interface, of two
widths: a store built with one, then opened with the other, must never compare the two.
"""

import hashlib
import re
from dataclasses import replace

import numpy as np
import pytest

from memory import MemoryLayer, Settings, Turn
from memory.store import vector_rebuild
from tests.memory.hash_embedder import HashEmbedder

pytestmark = pytest.mark.both_backends


class WideHashEmbedder:
    """The same idea in 16 dimensions, under another name: another model."""

    name = "test/hash-16"
    dim = 16

    def embed_documents(self, texts):
        return np.array([self.embed_query(t) for t in texts], dtype=np.float32).reshape(-1, 16)

    def embed_query(self, text, owner=""):
        vector = np.full(16, 0.01, dtype=np.float32)
        for word in re.findall(r"\w+", text.lower()):
            vector[hashlib.blake2b(word.encode(), digest_size=1).digest()[0] % 16] += 1.0
        return vector / np.linalg.norm(vector)


TURNS = {
    "ana": [
        ("My sister Ingrid keeps bees in Uppsala", "Lovely, how many hives?"),
        ("Four hives, and the honey is dark", "Dark honey is often heather."),
    ],
    "bob": [
        ("I repaired the bicycle chain today", "Well done."),
        ("The gears still slip on steep hills", "The derailleur may need tuning."),
    ],
}


@pytest.fixture
def settings(tmp_path, store_backend, request):
    settings = Settings(db_path=tmp_path / "moim.db", index_slice_chunks=1)
    if store_backend == "postgres":
        settings = replace(settings, db_url=request.getfixturevalue("pg_database")())
    return settings


def open_layer(settings, embedder):
    return MemoryLayer(settings, embedder_factory=lambda _: embedder)


def remember_all(layer):
    for user_id, turns in TURNS.items():
        for number, (said, reply) in enumerate(turns):
            layer.remember(
                Turn(
                    user_id=user_id,
                    session_id=f"{user_id}-s",
                    model="gpt-4o-mini",
                    messages=({"role": "user", "content": said},),
                    reply={"role": "assistant", "content": reply},
                    created_at=1_700_000_000.0 + number,
                )
            )


def similarities(layer, user_id, query):
    return [hit.similarity for hit in layer.search(user_id, query)]


@pytest.fixture
def switched(settings):
    """A store indexed with the 8-dimension model, opened with the 16-dimension one."""
    first = open_layer(settings, HashEmbedder())
    remember_all(first)
    first.close()
    layer = open_layer(settings, WideHashEmbedder())
    _ = layer.embedder  # loading it compares it with the store's
    yield layer
    layer.close()


def test_a_new_model_keeps_the_chunks_and_rebuilds_only_the_vectors(switched):
    rebuild = switched.vector_rebuild()

    assert (rebuild.old_model, rebuild.new_model) == ("test/hash-8 (8)", "test/hash-16 (16)")
    assert (rebuild.done, rebuild.total) == (0, 8)
    assert switched.index_frontier()[1] is None  # no message to index again
    assert switched.stats("ana").chunks == 4


def test_until_a_users_vectors_are_rebuilt_their_recall_is_by_keywords_alone(switched):
    hits = switched.search("ana", "Where does Ingrid keep the bees?")

    assert "Ingrid keeps bees" in hits[0].chunk.text
    assert [h.similarity for h in hits] == [None] * len(hits)  # no cosine of two models


def test_users_become_ready_one_after_another(switched):
    while not switched.rebuilds.ready("ana"):
        assert switched.rebuild_vectors() == 1

    assert not switched.rebuilds.ready("bob")
    assert None not in similarities(switched, "ana", "Where does Ingrid keep the bees?")
    assert set(similarities(switched, "bob", "Why do the bicycle gears slip?")) == {None}
    assert switched.vector_rebuild().done == 4


def test_a_finished_rebuild_equals_an_index_built_with_the_new_model(switched, tmp_path):
    while switched.rebuild_vectors():
        pass
    fresh_settings = replace(switched.settings, db_path=tmp_path / "fresh.db")
    if switched.settings.db_url:
        fresh_settings = replace(fresh_settings, db_url=None, vector_search="ram")
    fresh = open_layer(fresh_settings, WideHashEmbedder())
    remember_all(fresh)

    assert switched.vector_rebuild() is None
    for user_id in TURNS:
        ids, rebuilt = switched.store.user_vectors(user_id)
        fresh_ids, made = fresh.store.user_vectors(user_id)
        assert rebuilt.shape[1] == 16
        np.testing.assert_allclose(rebuilt[: len(ids)], made[: len(fresh_ids)], atol=1e-6)
    assert None not in similarities(switched, "bob", "Why do the bicycle gears slip?")


def test_a_forgotten_user_is_skipped_and_the_rebuild_ends(switched):
    switched.forget("ana")

    while switched.rebuild_vectors():
        pass

    assert switched.vector_rebuild() is None
    assert switched.store.user_vectors("ana")[0].tolist() == []
    assert len(switched.store.user_vectors("bob")[0]) == 4


def test_reindex_ends_a_rebuild_under_way(switched):
    switched.rebuild_vectors()

    switched.reindex()

    assert switched.vector_rebuild() is None
    assert None not in similarities(switched, "bob", "Why do the bicycle gears slip?")


def test_a_step_that_finds_the_cursor_moved_stores_nothing(switched):
    store = switched.store
    stale = vector_rebuild.state(store)
    chunks = vector_rebuild.pending(store, stale, 1)
    assert switched.rebuild_vectors() == 1  # another step (a replica's) moved it first

    assert vector_rebuild.save(store, stale, chunks, np.ones((1, 16), np.float32)) is None
    assert vector_rebuild.state(store).done == 1
    stored = store.vectors(chunks[0].user_id, [chunks[0].id])[chunks[0].id]
    assert not np.allclose(stored, 1.0)


class OpenAISizedEmbedder(WideHashEmbedder):
    """The same bag of words in 1536 dimensions (text-embedding-3-small's width)."""

    name = "test/hash-1536"
    dim = 1536

    def embed_documents(self, texts):
        return np.array([self.embed_query(t) for t in texts], dtype=np.float32).reshape(-1, 1536)

    def embed_query(self, text, owner=""):
        vector = np.full(1536, 0.01, dtype=np.float32)
        for word in re.findall(r"\w+", text.lower()):
            digest = hashlib.blake2b(word.encode(), digest_size=2).digest()
            vector[int.from_bytes(digest, "little") % 1536] += 1.0
        return vector / np.linalg.norm(vector)


def test_the_vectors_can_widen_to_1536_dimensions(settings):
    first = open_layer(settings, WideHashEmbedder())
    remember_all(first)
    first.close()
    layer = open_layer(settings, OpenAISizedEmbedder())
    try:
        _ = layer.embedder
        while layer.rebuild_vectors():
            pass

        ids, vectors = layer.store.user_vectors("ana")
        assert len(ids) == 4 and vectors.shape[1] == 1536
        hits = layer.search("ana", "Where does Ingrid keep the bees?")
        assert "Ingrid keeps bees" in hits[0].chunk.text and hits[0].similarity > 0.3
    finally:
        layer.close()
