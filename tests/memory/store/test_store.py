"""memory/store/store.py on real SQLite: idempotent writes, per-user isolation, export/import.

Vectors come from a deterministic 8-dimension embedder behind the real `Embedder` interface
(STYLE.md point 17 allows one in unit tests), indexed through `memory.ingest.turns.index_pending`.
"""

import numpy as np
import pytest

from memory.ingest.turns import Turn, index_pending, store_turn
from memory.recall.vectors import VectorIndex
from memory.settings import Settings
from memory.store import vector_rebuild
from memory.store.fts import search_terms
from memory.store.store import NewMessage, Stats, Store
from memory.store.transfer import export_messages, import_message
from tests.memory.hash_embedder import HashEmbedder

SAME_TEXT = "My cat Miso sleeps on the radiator every afternoon"


@pytest.fixture
def settings(tmp_path):
    return Settings(db_path=tmp_path / "moim.db")


@pytest.fixture
def store(settings):
    store = Store(settings.db_path)
    store.ensure_vectors(HashEmbedder.name, HashEmbedder.dim)
    return store


def new_message(key, content, role="user", created_at=1_700_000_000.0):
    return NewMessage(
        message_key=key,
        content_hash=key.split("#")[0],
        role=role,
        name=None,
        content=content,
        payload="{}",
        model="gpt-4o-mini",
        tokens=3,
        partial=False,
        created_at=created_at,
    )


def remember(store, settings, user_id, session_id, text, reply="noted"):
    turn = Turn(
        user_id=user_id,
        session_id=session_id,
        model="gpt-4o-mini",
        messages=({"role": "user", "content": text},),
        reply={"role": "assistant", "content": reply},
        created_at=1_700_000_000.0,
    )
    store_turn(store, turn)
    index_pending(store, HashEmbedder(), VectorIndex(store.user_vectors), settings)


@pytest.fixture
def two_users(store, settings):
    """Alice and Bob said exactly the same thing; return {user: set of their chunk ids}."""
    remember(store, settings, "alice", "s-1", SAME_TEXT)
    remember(store, settings, "bob", "s-1", SAME_TEXT)
    return {user: set(store.chunks(user, range(1, 100))) for user in ("alice", "bob")}


def test_add_messages_is_idempotent_by_message_key(store):
    rows = [new_message("h1#1", "hello"), new_message("h2#1", "world")]
    assert store.add_messages("alice", "s-1", rows) == 2
    assert store.add_messages("alice", "s-1", rows) == 0
    assert store.add_messages("alice", "s-1", [*rows, new_message("h1#2", "hello")]) == 1
    assert [m.content for m in store.messages("alice")] == ["hello", "world", "hello"]


def test_same_message_key_in_another_session_is_a_new_message(store):
    assert store.add_messages("alice", "s-1", [new_message("h1#1", "hello")]) == 1
    assert store.add_messages("alice", "s-2", [new_message("h1#1", "hello")]) == 1
    assert [m.session_id for m in store.messages("alice")] == ["s-1", "s-2"]


def test_last_user_text_is_the_sessions_latest_user_message_and_only_the_users(store):
    store.add_messages("alice", "s-1", [new_message("a", "Fix the boiler")])
    store.add_messages("alice", "s-1", [new_message("b", "On it.", role="assistant")])
    store.add_messages("alice", "s-2", [new_message("c", "Plan the trip")])
    store.add_messages("bob", "s-1", [new_message("d", "Bob's own task")])
    assert store.last_user_text("alice", "s-1", 8) == "Fix the "
    assert store.last_user_text("bob", "s-1", 100) == "Bob's own task"
    assert store.last_user_text("carol", "s-1", 100) is None


def test_each_user_has_their_own_chunks(two_users):
    assert len(two_users["alice"]) == 2  # the user's message and the reply
    assert len(two_users["bob"]) == 2
    assert not two_users["alice"] & two_users["bob"]


def test_chunks_of_another_user_are_absent(store, two_users):
    assert store.chunks("alice", sorted(two_users["bob"])) == {}
    found = store.chunks("alice", sorted(two_users["alice"] | two_users["bob"]))
    assert set(found) == two_users["alice"]
    assert {c.user_id for c in found.values()} == {"alice"}


def test_lexical_search_returns_only_the_users_chunks(store, two_users):
    found = [i for i, _ in store.lexical_search("alice", search_terms("Miso radiator"), 10, 0.7)]
    # her message, then the reply "noted", by the end of her message before it (its context)
    assert set(found) == two_users["alice"]
    assert [store.chunks("alice", [i])[i].text for i in found] == [SAME_TEXT, "noted"]


def test_dense_search_returns_only_the_users_chunks(store, two_users):
    found = store.dense_search("alice", HashEmbedder().embed_query(SAME_TEXT), 10)
    assert {chunk_id for chunk_id, _ in found} == two_users["alice"]
    assert max(similarity for _, similarity in found) == pytest.approx(1.0, abs=1e-5)


def test_user_vectors_hold_only_the_users_vectors(store, two_users):
    ids, matrix = store.user_vectors("bob")
    assert set(ids.tolist()) == two_users["bob"]
    assert matrix.shape[1] == 8 and len(matrix) >= 2  # spare rows are room to append
    assert matrix.dtype == np.float32


def test_messages_stats_and_export_are_per_user(store, two_users):
    assert {m.user_id for m in store.messages("alice")} == {"alice"}
    assert len(store.messages("alice")) == 2
    assert store.stats("alice") == Stats("alice", messages=2, chunks=2, facts=0, sessions=1)
    exported = list(export_messages(store, "alice"))
    assert [item["id"] for item in exported] == [m.id for m in store.messages("alice")]
    assert not {item["id"] for item in exported} & {m.id for m in store.messages("bob")}


def test_unknown_user_sees_nothing(store, two_users):
    assert store.messages("carol") == []
    assert store.stats("carol") == Stats("carol", 0, 0, 0, 0)
    assert store.lexical_search("carol", search_terms("Miso"), 10, 0.7) == []
    assert store.dense_search("carol", HashEmbedder().embed_query(SAME_TEXT), 10) == []
    assert list(export_messages(store, "carol")) == []


def test_delete_user_removes_only_that_user(store, two_users):
    assert store.delete_user("alice") == 2
    assert store.stats("alice") == Stats("alice", 0, 0, 0, 0)
    assert store.user_vectors("alice")[0].tolist() == []
    assert store.lexical_search("alice", search_terms("Miso"), 10, 0.7) == []
    assert store.stats("bob") == Stats("bob", messages=2, chunks=2, facts=0, sessions=1)
    assert set(store.user_vectors("bob")[0].tolist()) == two_users["bob"]
    assert {i for i, _ in store.lexical_search("bob", search_terms("Miso"), 10, 0.7)} == two_users[
        "bob"
    ]


def test_ensure_vectors_with_the_same_model_changes_nothing(store, two_users):
    assert store.ensure_vectors(HashEmbedder.name, HashEmbedder.dim) is False
    assert store.count_unindexed() == 0
    assert store.stats("alice").chunks == 2


def test_ensure_vectors_with_another_model_keeps_chunks_and_starts_a_vector_rebuild(
    store, two_users
):
    assert store.ensure_vectors("test/another-model", 16) is True

    assert store.count_unindexed() == 0
    assert store.stats("alice").chunks == 2
    assert store.user_vectors("alice")[0].tolist() == []  # the old model's are gone
    rebuild = vector_rebuild.state(store)
    assert (rebuild.old_model, rebuild.new_model) == ("test/hash-8 (8)", "test/another-model (16)")
    assert (rebuild.total, rebuild.done, rebuild.end) == (4, 0, 4)
    assert dict(store.read("SELECT key, value FROM meta WHERE key LIKE 'embedding_%'")) == {
        "embedding_model": "test/another-model",
        "embedding_dim": "16",
    }


def test_ensure_vectors_after_a_layout_change_marks_messages_for_reindexing(store, two_users):
    with store.write() as db:
        db.execute("UPDATE meta SET value = 'old' WHERE key = 'vector_layout'")

    assert store.ensure_vectors("test/another-model", 8) is True
    assert store.count_unindexed() == 4
    assert store.stats("alice").chunks == 0
    assert store.user_vectors("alice")[0].tolist() == []
    assert vector_rebuild.state(store) is None


def test_ensure_vectors_on_an_empty_store_needs_no_reindex(settings):
    store = Store(settings.db_path)
    assert store.ensure_vectors("test/one", 8) is False
    assert store.ensure_vectors("test/two", 4) is False


def test_import_keeps_ids_when_free(store, two_users, tmp_path):
    exported = list(export_messages(store, "alice"))
    fresh = Store(tmp_path / "fresh.db")
    assert [import_message(fresh, "alice", item) for item in exported] == [True, True]
    assert list(export_messages(fresh, "alice")) == exported


def test_import_takes_a_new_id_when_the_old_one_is_taken(store, two_users):
    exported = list(export_messages(store, "alice"))
    for item in exported:  # alice's ids are taken, by alice
        assert import_message(store, "dave", item)
    restored = list(export_messages(store, "dave"))
    assert [m["content"] for m in restored] == [m["content"] for m in exported]
    assert not {m["id"] for m in restored} & {m["id"] for m in exported}
    assert list(export_messages(store, "alice")) == exported


def test_import_of_an_already_stored_message_adds_nothing(store, two_users):
    exported = list(export_messages(store, "alice"))
    assert [import_message(store, "alice", item) for item in exported] == [False, False]
    assert len(store.messages("alice")) == 2


def test_chunks_come_back_exactly_as_stored(store, settings):
    # Chunks are read as one packed JSON row: text and time must survive it unchanged.
    text = 'Quotes "x", a tab\there, a backslash \\ and 🙂 — ünïcode\nnew line'
    created_at = 1_700_000_000.123456789  # more digits than JSON's 15
    store.add_messages("carol", "s-1", [new_message("m1", text, created_at=created_at)])
    index_pending(store, HashEmbedder(), VectorIndex(store.user_vectors), settings)
    (chunk,) = store.chunks("carol", range(1, 100)).values()
    assert (chunk.text, chunk.created_at, chunk.user_id) == (text, created_at, "carol")
    assert (chunk.session_id, chunk.role, chunk.name, chunk.turn) == ("s-1", "user", None, 1)


def test_chunks_know_their_turn_in_the_session(store, settings):
    remember(store, settings, "erin", "s-1", "first question", reply="first answer")
    remember(store, settings, "erin", "s-2", "elsewhere")
    remember(store, settings, "erin", "s-1", "second question", reply="second answer")
    turns = {c.text: (c.session_id, c.turn) for c in store.chunks("erin", range(1, 100)).values()}
    assert turns == {
        "first question": ("s-1", 1),
        "first answer": ("s-1", 2),
        "elsewhere": ("s-2", 1),
        "noted": ("s-2", 2),
        "second question": ("s-1", 3),
        "second answer": ("s-1", 4),
    }


def test_lexical_search_ranks_best_bm25_first(store, settings):
    for n, text in enumerate(["radiator", "radiator radiator miso", "miso soup", "tea"]):
        store.add_messages("dave", f"s-{n}", [new_message(f"m{n}", text)])  # no context
    index_pending(store, HashEmbedder(), VectorIndex(store.user_vectors), settings)
    found = store.lexical_search("dave", search_terms("miso radiator"), 10, 0.7)
    texts = [store.chunks("dave", [i])[i].text for i, _ in found]
    assert texts[0] == "radiator radiator miso"  # both terms
    scores = [score for _, score in found]
    assert scores == sorted(scores, reverse=True) and scores[-1] > 0  # higher is better
    assert set(texts) == {"radiator", "radiator radiator miso", "miso soup"}


def test_another_users_words_do_not_change_a_users_ranking(store, settings):
    def ranking():
        found = store.lexical_search("ann", search_terms("miso radiator"), 10, 0.7)
        return [store.chunks("ann", [i])[i].text for i, _ in found]

    for n, text in enumerate(["miso soup", "miso broth", "radiator repair"]):
        store.add_messages("ann", f"s-{n}", [new_message(f"a{n}", text)])  # no context
    index_pending(store, HashEmbedder(), VectorIndex(store.user_vectors), settings)
    alone = ranking()
    assert alone[0] == "radiator repair"  # her rarer word: BM25 weighs it higher

    # Bob says "radiator" fifty times: counted over everyone, it would become the common
    # word and her miso chunks would move ahead.
    store.add_messages("bob", "s-1", [new_message(f"b{n}", "radiator") for n in range(50)])
    index_pending(store, HashEmbedder(), VectorIndex(store.user_vectors), settings)

    assert ranking() == alone


def test_a_reply_is_found_by_the_turn_it_answers_below_the_turn_itself(store, settings):
    said = [
        ("user", "Did you go camping in the mountains?"),
        ("assistant", "Yes, last May!"),
        ("user", "Lovely."),
        ("user", "Camping again soon?"),
    ]
    store.add_messages(
        "ann", "s-1", [new_message(f"m{n}", text, role) for n, (role, text) in enumerate(said)]
    )
    index_pending(store, HashEmbedder(), VectorIndex(store.user_vectors), settings)

    def texts(weight):
        found = store.lexical_search("ann", search_terms("camping trip"), 10, weight)
        return [store.chunks("ann", [i])[i].text for i, _ in found]

    # "Yes, last May!" by its question's end; "Lovely." follows a turn without the word
    assert texts(0.7)[-1] == "Yes, last May!"
    assert set(texts(0.7)) == {said[0][1], said[1][1], said[3][1]}


def test_neighbours_of_several_messages_come_in_one_read_each_in_its_session(store):
    said = [new_message(f"k{i}", f"turn {i}", ("user", "assistant")[i % 2]) for i in range(1, 8)]
    store.add_messages("fay", "s-1", said)
    store.add_messages("fay", "s-2", [new_message("other", "elsewhere")])
    store.add_messages("gus", "s-1", [new_message("gus", "not fay's")])
    ids = {m.content: m.id for m in store.messages("fay")} | {"gus": store.messages("gus")[0].id}

    def contents(found):
        return {anchor: [m.content for m in messages] for anchor, messages in found.items()}

    found = store.neighbours("fay", [ids["turn 2"], ids["turn 6"], ids["elsewhere"]], 1)
    assert contents(found) == {
        ids["turn 2"]: ["turn 1", "turn 2", "turn 3"],
        ids["turn 6"]: ["turn 5", "turn 6", "turn 7"],
        ids["elsewhere"]: ["elsewhere"],
    }
    # turns present in the request are left out, but never the message itself
    hidden = {"k3", "k6"}
    assert contents(store.neighbours("fay", [ids["turn 2"], ids["turn 6"]], 2, hidden)) == {
        ids["turn 2"]: ["turn 1", "turn 2", "turn 4"],
        ids["turn 6"]: ["turn 4", "turn 5", "turn 6", "turn 7"],
    }
    assert store.neighbours("fay", [ids["gus"]], 1) == {}  # another user's message
    assert store.neighbours("fay", [], 1) == {}
    # the sessions given by the caller (a recalled chunk's): the same turns, read as fay's only
    anchors = [ids["turn 2"], ids["turn 6"], ids["elsewhere"]]
    sessions = {ids["turn 2"]: "s-1", ids["turn 6"]: "s-1", ids["elsewhere"]: "s-2"}
    assert store.neighbours("fay", anchors, 1, (), sessions) == found
    assert store.neighbours("fay", [ids["gus"]], 1, (), {ids["gus"]: "s-1"}) == {}
    assert store.neighbours("fay", [ids["turn 2"]], 1, (), {ids["turn 2"]: "s-2"}) == {}
