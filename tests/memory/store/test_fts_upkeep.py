"""memory/store/fts_upkeep.py: the FTS index is merged step by step, only when due; it yields."""

import pytest

from memory.ingest.turns import index_pending
from memory.recall.vectors import VectorIndex
from memory.settings import Settings
from memory.store import fts_upkeep
from memory.store.fts import search_terms
from memory.store.store import Store
from tests.memory.hash_embedder import HashEmbedder
from tests.memory.store.test_store import new_message

WORDS = "radiator miso budget kitchen lisbon tulips camping violin harbour quartz".split()


@pytest.fixture
def store(tmp_path):
    store = Store(tmp_path / "m.db")
    store.ensure_vectors(HashEmbedder.name, HashEmbedder.dim)
    return store


def fill(store, tmp_path, n, start=0, rare_words=0):
    """n one-chunk messages, indexed in batches of 4: each batch adds FTS5 segments.
    `rare_words` words used by one message only make the index larger (more pages)."""
    settings = Settings(db_path=tmp_path / "m.db")
    for i in range(start, start + n, 4):
        rows = [
            new_message(
                f"m{j}",
                f"{WORDS[j % 10]} {WORDS[(j * 3) % 10]} note {j} "
                + " ".join(f"rare{j}x{k}" for k in range(rare_words)),
            )
            for j in range(i, min(i + 4, start + n))
        ]
        store.add_messages("ann", "s-1", rows)
        index_pending(store, HashEmbedder(), VectorIndex(store.user_vectors), settings, 4)


def merge_is_noop(store):
    with store.write() as db:
        before = db.total_changes
        db.execute("INSERT INTO chunks_fts (chunks_fts, rank) VALUES ('merge', -200)")
        return db.total_changes - before < 2


def test_not_due_below_the_growth_threshold(store, tmp_path):
    fill(store, tmp_path, 8)
    assert not fts_upkeep.tidy_due(store, min_new=10)
    changes = store.connection().total_changes
    assert fts_upkeep.tidy(store, lambda: False, min_new=10) is False
    assert store.connection().total_changes == changes  # nothing written


def test_a_due_index_is_merged_whole_and_searches_the_same(store, tmp_path):
    fill(store, tmp_path, 80)
    query = search_terms("radiator budget violin")
    before = store.lexical_search("ann", query, 20, 0.7)
    assert fts_upkeep.tidy_due(store, min_new=10)

    assert fts_upkeep.tidy(store, lambda: False, min_new=10) is True

    assert merge_is_noop(store)
    assert store.lexical_search("ann", query, 20, 0.7) == before
    assert not fts_upkeep.tidy_due(store, min_new=10)  # until it grows again
    fill(store, tmp_path, 12, start=80)
    assert fts_upkeep.tidy_due(store, min_new=10)


def test_a_merge_yields_when_asked_and_the_next_call_finishes_it(store, tmp_path, monkeypatch):
    fill(store, tmp_path, 400, rare_words=20)
    monkeypatch.setattr(fts_upkeep, "STEP_PAGES", 1)  # many small steps
    asked = []

    def stop_after_one_step():
        asked.append(1)
        return len(asked) > 1

    assert fts_upkeep.tidy(store, stop_after_one_step, min_new=10) is False
    assert not merge_is_noop(store)
    # no longer "due" by growth alone would not matter: a started merge is finished
    assert fts_upkeep.tidy(store, lambda: False, min_new=10**9) is True
    assert merge_is_noop(store)
