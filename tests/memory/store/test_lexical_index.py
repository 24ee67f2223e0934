"""memory/store/lexical_index.py and lexical_sync.py: the tantivy index mirrors SQLite.

Real SQLite, real tantivy on temporary files. A "restart" is a new `Store` on the same file
after the old index's uncommitted writes were thrown away, as a crash throws them away.
"""

import shutil

import pytest

from memory.records import Message
from memory.store import lexical_sync
from memory.store.store import NewMessage, Store

NOW = 1_700_000_000.0


def new_store(tmp_path):
    store = Store(tmp_path / "moim.db", lexical_index=True)
    store.ensure_vectors("test/hash-8", 8)
    return store


def add_turn(store, user_id, text):
    """Store one user message, alone in its session, and index it as one chunk (no turn
    before it: no context); return the chunk id."""
    session_id = f"s-{text}"
    key = f"{user_id}-{session_id}-{text}"
    row = NewMessage(key, key, "user", None, text, "{}", None, 5, False, NOW)
    (message_id,) = store.insert_messages(user_id, session_id, [row])
    message = Message(message_id, user_id, session_id, "user", None, text, NOW, False)
    (chunk_id,) = store.add_chunks(message, [text], None)
    return chunk_id


def restart(store):
    """Close the index as a crash would (uncommitted writes lost) and open the store again."""
    store.lexical.close()
    again = Store(store.path, lexical_index=True)
    rebuilt = again.rebuilding is not None
    if again.rebuilding is not None:
        again.rebuilding.join(timeout=60)
    return again, rebuilt


def chunk_ids(store):
    return [row[0] for row in store.read("SELECT id FROM chunks ORDER BY id")]


def test_a_new_store_s_index_is_ready_at_once_with_nothing_to_rebuild(tmp_path):
    store = new_store(tmp_path)
    assert store.rebuilding is None and store.lexical.ready
    store.close()
    again = new_store(tmp_path)  # its generation was recorded: verified, not rebuilt
    assert again.rebuilding is None and again.lexical.ready


def test_a_search_finds_what_fts5_finds_for_its_user_only(tmp_path):
    store = new_store(tmp_path)
    kayak = add_turn(store, "ana", "My red kayak is at the marina")
    add_turn(store, "ana", "Carbonara needs guanciale")
    add_turn(store, "bob", "My kayak is green")
    store.commit_lexical()
    assert store.lexical.ready
    assert [i for i, _ in store.lexical_search("ana", ["kayak", "marina"], 10, 0.7)] == [kayak]
    store.lexical.ready = False  # FTS5 answers
    assert [i for i, _ in store.lexical_search("ana", ["kayak", "marina"], 10, 0.7)] == [kayak]


def test_a_committed_index_is_verified_at_restart_without_a_rebuild(tmp_path):
    store = new_store(tmp_path)
    add_turn(store, "ana", "My red kayak is at the marina")
    store.commit_lexical()
    store, rebuilt = restart(store)
    assert (rebuilt, store.lexical.ready) == (False, True)
    assert store.lexical.held_ids() == chunk_ids(store)


def test_chunks_sqlite_committed_but_the_index_did_not_are_rebuilt_at_restart(tmp_path):
    store = new_store(tmp_path)
    add_turn(store, "ana", "My red kayak is at the marina")
    store.commit_lexical()
    late = add_turn(store, "ana", "The paddle is broken")  # the crash comes before the commit
    store, rebuilt = restart(store)
    assert rebuilt
    assert store.lexical.held_ids() == chunk_ids(store)
    assert [i for i, _ in store.lexical_search("ana", ["paddle"], 10, 0.7)] == [late]


def test_a_change_by_another_process_is_noticed_and_rebuilt(tmp_path):
    store = new_store(tmp_path)
    add_turn(store, "ana", "My red kayak is at the marina")
    store.commit_lexical()
    other = Store(tmp_path / "moim.db")  # e.g. `moim memory import` without the index
    other.ensure_vectors("test/hash-8", 8)
    outside = add_turn(other, "ana", "The paddle is broken")
    add_turn(store, "ana", "Carbonara needs guanciale")
    store.commit_lexical()  # the generation jumped by two: rebuild
    store.rebuilding.join(timeout=60)
    assert store.lexical.held_ids() == chunk_ids(store)
    assert [i for i, _ in store.lexical_search("ana", ["paddle"], 10, 0.7)] == [outside]


def test_forgetting_a_user_and_a_reset_reach_the_index(tmp_path):
    store = new_store(tmp_path)
    add_turn(store, "ana", "My red kayak is at the marina")
    bob = add_turn(store, "bob", "My kayak is green")
    store.commit_lexical()
    store.delete_user("ana")
    assert store.lexical.held_ids() == [bob]
    store.reset_index()
    assert store.lexical.held_ids() == []
    store, rebuilt = restart(store)
    assert (rebuilt, store.lexical.held_ids()) == (False, [])


def test_an_index_rebuilt_from_sqlite_holds_the_turn_before_as_context(tmp_path):
    store = new_store(tmp_path)
    key = "ana-s-1-question"
    question = NewMessage(key, key, "user", None, "Did you go camping?", "{}", None, 5, False, NOW)
    key = "ana-s-1-answer"
    answer = NewMessage(key, key, "assistant", None, "Yes, last May!", "{}", None, 5, False, NOW)
    ids = store.insert_messages("ana", "s-1", [question, answer])
    reply = Message(ids[1], "ana", "s-1", "assistant", None, "Yes, last May!", NOW, False)
    (chunk,) = store.add_chunks(reply, ["Yes, last May!"], None, "Did you go camping?")
    store.lexical.close()  # never committed: the restart rebuilds from SQLite
    store, rebuilt = restart_closed(tmp_path)
    assert rebuilt
    assert [i for i, _ in store.lexical_search("ana", ["camping"], 10, 0.7)] == [chunk]


def restart_closed(tmp_path):
    again = new_store(tmp_path)
    rebuilt = again.rebuilding is not None
    if again.rebuilding is not None:
        again.rebuilding.join(timeout=60)
    return again, rebuilt


def test_an_index_whose_files_were_removed_closes_without_raising(tmp_path, caplog):
    # Its directory removed under a running moim: a rebuild's clear fails (the writer's
    # rollback), and the close at the stop raised too; after a failed rollback, a tantivy
    # panic, which no handler expects (a traceback at every stop).
    store = new_store(tmp_path)
    add_turn(store, "ana", "kayak")
    store.commit_lexical()
    shutil.rmtree(store.lexical.directory)
    add_turn(store, "ana", "marina")
    with pytest.raises(ValueError):
        store.lexical.clear()

    store.lexical.close()

    assert store.lexical.closed
    assert "not rolled back" in caplog.text


def test_a_rebuild_that_fails_is_said_and_leaves_keyword_search_to_fts5_until_retried(
    tmp_path, caplog, monkeypatch
):
    # The index's directory removed under a running moim: the rebuild the next commit starts
    # fails; it raised out of its thread (a traceback, an unhandled thread exception). Then
    # FTS5 answered until the next start, and nothing said so (`/health` said ok).
    store = new_store(tmp_path)
    add_turn(store, "ana", "kayak")
    store.commit_lexical()
    shutil.rmtree(store.lexical.directory)

    lexical_sync.start_rebuild(store).join(timeout=60)

    assert "lexical index not rebuilt" in caplog.text
    assert not store.lexical.ready
    assert [hit for hit, _ in store.lexical_search("ana", ["kayak"], 10, 0.7)] != []
    assert store.lexical_problem.startswith("lexical index unavailable (")

    monkeypatch.setattr(lexical_sync, "REOPEN_EVERY", 0.0)
    assert store.lexical_health() is not None  # asking tries again, in the background
    assert store.wait_for_lexical_index(timeout=60)
    assert store.lexical_health() is None
    assert store.lexical.count() == 1  # rebuilt from SQLite, in a new directory
    store.close()
