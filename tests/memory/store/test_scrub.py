"""memory/store/scrub.py: after a forget and a scrub, no byte of the user's words is left in
the database file, its WAL or the tantivy index, and the other users' memory is untouched."""

from pathlib import Path

import pytest

from memory.ingest.turns import index_pending
from memory.recall.vectors import VectorIndex
from memory.settings import Settings
from memory.store import lexical_sync, scrub
from memory.store.fts import fts_stems, owner_token
from memory.store.store import Store
from tests.memory.hash_embedder import HashEmbedder
from tests.memory.store.test_store import new_message

WORD = "zanzibarquokka"  # Porter leaves it as it is: the indexed term holds these bytes


@pytest.fixture
def store(tmp_path):
    store = Store(tmp_path / "m.db", lexical_index=True)
    lexical_sync.check(store)
    store.ensure_vectors(HashEmbedder.name, HashEmbedder.dim)
    yield store
    store.close()


def fill(store, user, text, n=24):
    """n messages of `user`, indexed 4 at a time (several FTS5 and tantivy segments)."""
    settings = Settings(db_path=Path(store.path))
    for i in range(0, n, 4):
        rows = [new_message(f"{user}-{j}", f"{text} note {j}") for j in range(i, i + 4)]
        store.add_messages(user, "s-1", rows)
        index_pending(store, HashEmbedder(), VectorIndex(store.user_vectors), settings, 4)


def files_holding(store, word):
    """The files beside the store (database, WAL, lexical index) whose bytes hold `word`."""
    root = Path(store.path).parent
    return [f.name for f in root.rglob("*") if f.is_file() and word.encode() in f.read_bytes()]


def test_a_forgotten_users_words_leave_every_file(store):
    fill(store, "ann", "radiator miso budget")
    fill(store, "zed", f"my {WORD} sleeps in the garden shed")
    assert files_holding(store, WORD)  # the message log, the FTS5 index, the WAL
    assert store.lexical.terms_of(owner_token("zed"))

    store.delete_user("zed")
    assert scrub.due(store)
    assert scrub.scrub(store, lambda: False, wait=True)

    assert files_holding(store, WORD) == []
    assert files_holding(store, owner_token("zed")) == []  # no term of theirs in FTS5
    assert store.lexical.terms_of(owner_token("zed")) == []  # nor in tantivy's dictionaries
    assert not Path(store.path + "-wal").exists() or Path(store.path + "-wal").stat().st_size == 0
    assert not scrub.due(store)
    # ann's memory is whole: both lexical indexes still find her words
    assert store.lexical.terms_of(owner_token("ann"))
    stems = fts_stems("ann", ["radiator"])
    assert (
        store.read("SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH ?", (stems[0],))[0][0]
        == 24
    )


def test_a_forget_in_an_index_already_merged_whole_is_erased_too(store):
    fill(store, "zed", f"my {WORD} sleeps in the garden shed")
    fill(store, "ann", "radiator miso budget")
    with store.write() as db:  # one segment: the delete only adds tombstones to it
        db.execute("INSERT INTO chunks_fts (chunks_fts) VALUES ('optimize')")

    store.delete_user("zed")
    scrub.scrub(store, lambda: False, wait=True)

    assert files_holding(store, WORD) == []
    assert files_holding(store, owner_token("zed")) == []


def test_a_scrub_told_to_stop_is_finished_by_the_next(store):
    fill(store, "zed", f"my {WORD} sleeps in the garden shed")
    store.delete_user("zed")

    assert not scrub.scrub(store, lambda: True)  # a turn arrived: yield at once
    assert scrub.due(store)
    assert scrub.scrub(store, lambda: False, wait=True)
    assert files_holding(store, WORD) == []


def test_nothing_is_done_without_a_forget(store):
    fill(store, "ann", "radiator miso budget")
    assert not scrub.due(store)
    assert scrub.scrub(store, lambda: False, wait=True)


def test_vacuum_erases_what_was_freed_before_secure_delete_was_on(store):
    store.connection().execute("PRAGMA secure_delete = OFF")  # as an older moim wrote
    fill(store, "zed", f"my {WORD} sleeps in the garden shed")
    fill(store, "ann", "radiator miso budget")
    store.delete_user("zed")
    store.connection().execute("PRAGMA secure_delete = ON")
    scrub.scrub(store, lambda: False, wait=True)
    assert files_holding(store, WORD) == ["m.db"]  # the cells and pages freed back then

    scrub.vacuum(store)

    assert files_holding(store, WORD) == []
    assert store.read("SELECT count(*) FROM chunks WHERE user_id = 'ann'")[0][0] == 24
