"""memory/ingest/turns.py with the tantivy index: under a backlog the writer's passes commit
the lexical index every few passes, and nothing stays held back once the backlog is gone.

Real SQLite, real tantivy on temporary files, the hash embedder.
"""

from memory import MemoryLayer
from memory.ingest.turns import Turn, index_pending, store_turn
from memory.recall.vectors import VectorIndex
from memory.settings import Settings
from memory.store.store import HELD_PASSES, Store
from tests.memory.hash_embedder import HashEmbedder

WORDS = ["kayak", "marina", "guanciale", "lantern", "orchard", "violin", "glacier", "saffron"]


def backlog_store(tmp_path):
    """A store with one stored, unindexed user message a word of WORDS, each its own turn."""
    settings = Settings(db_path=tmp_path / "moim.db")
    store = Store(settings.db_path, lexical_index=True)
    store.ensure_vectors(HashEmbedder.name, HashEmbedder.dim)
    for word in WORDS:
        said = ({"role": "user", "content": f"The {word} story"},)
        store_turn(store, Turn("alice", f"s-{word}", "gpt-4o-mini", said, None, 1.7e9))
    return store, settings


def one_pass(store, settings):
    """One writer pass of one message (as a backlog of many turns would be worked)."""
    return index_pending(store, HashEmbedder(), VectorIndex(store.user_vectors), settings, 1)


def found(store):
    """The WORDS whose chunk the lexical index finds for alice (as of its last commit)."""
    assert store.lexical.ready
    return [w for w in WORDS if store.lexical_search("alice", [w], 5, 0.7)]


def test_a_backlog_commits_every_few_passes_and_everything_once_it_is_worked_off(tmp_path):
    store, settings = backlog_store(tmp_path)
    committed = []
    while one_pass(store, settings):
        committed.append(store.lexical.count())
    # Each pass left a message behind: the index commits once every HELD_PASSES passes.
    assert committed == [(i + 1) // HELD_PASSES * HELD_PASSES for i in range(len(WORDS))]
    assert store.lexical.count() == len(WORDS)  # the call that found nothing committed
    assert found(store) == WORDS


def test_the_pass_that_empties_the_backlog_commits_at_once(tmp_path):
    store, settings = backlog_store(tmp_path)
    one_pass(store, settings)
    assert store.lexical.count() == 0 and found(store) == []  # held back: more follows
    index_pending(store, HashEmbedder(), VectorIndex(store.user_vectors), settings)
    assert store.lexical.count() == len(WORDS)


def test_passes_held_back_are_committed_when_the_store_closes_not_rebuilt(tmp_path):
    store, settings = backlog_store(tmp_path)
    one_pass(store, settings)
    one_pass(store, settings)
    store.close()
    again = Store(settings.db_path, lexical_index=True)
    assert again.rebuilding is None and again.lexical.ready  # verified against SQLite
    assert again.lexical.count() == 2


def test_a_flush_finds_by_their_words_the_passes_a_backlog_held_back(tmp_path):
    """`MemoryLayer.make_searchable`, which `Writer.flush` ends with: a backlog's passes held
    their lexical commits back, and a flush returns with every chunk indexed so far found by
    its words, while later turns still wait."""
    store, settings = backlog_store(tmp_path)
    store.close()
    layer = MemoryLayer(settings, embedder_factory=lambda _: HashEmbedder())
    layer.index_pending(batch=1, passes=2)  # two passes of a backlog: both held back
    assert layer.store.count_unindexed() == len(WORDS) - 2
    assert found(layer.store) == []
    layer.make_searchable()
    assert found(layer.store) == WORDS[:2]
    layer.close()
