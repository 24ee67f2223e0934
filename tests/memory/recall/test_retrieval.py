"""memory/recall/retrieval.py: the recall query, and hybrid retrieval over a real SQLite store.

Vectors come from a deterministic 8-dimension embedder behind the real `Embedder` interface.
"""

from concurrent.futures import Future
from dataclasses import replace

import pytest

from memory.ingest.identity import content_hash
from memory.ingest.turns import Turn, index_pending, store_turn
from memory.recall import widening
from memory.recall.query import build_query, task_query
from memory.recall.retrieval import _read, retrieve
from memory.recall.scoring import Weights, rank
from memory.recall.vectors import VectorIndex
from memory.records import Chunk
from memory.settings import Settings
from memory.store.store import Store
from tests.memory.hash_embedder import HashEmbedder

NOW = 1_700_000_000.0


KAYAK = {"role": "user", "content": "I keep my red kayak at the marina in Porto"}
PASTA = {"role": "user", "content": "My carbonara uses guanciale and pecorino"}
REPLY = {"role": "assistant", "content": "Got it."}


# -- build_query -----------------------------------------------------------------------------


def test_query_is_the_last_user_message_when_it_is_long_enough():
    messages = [
        {"role": "user", "content": "Where is the kayak?"},
        {"role": "assistant", "content": "At the marina."},
        {"role": "user", "content": "  Which marina did I say I keep the kayak at?  "},
    ]
    assert build_query(messages) == "Which marina did I say I keep the kayak at?"


def test_short_last_message_gets_the_preceding_turn_as_context():
    messages = [
        {"role": "user", "content": "Any ideas for dinner?"},
        {"role": "assistant", "content": "How about a carbonara with guanciale?"},
        {"role": "user", "content": "why that?"},
    ]
    assert build_query(messages) == "How about a carbonara with guanciale?\nwhy that?"


def test_preceding_context_is_the_last_300_characters():
    previous = "x" * 500 + " the end"
    messages = [{"role": "assistant", "content": previous}, {"role": "user", "content": "yes"}]
    assert build_query(messages) == previous[-300:] + "\nyes"


def test_a_long_last_message_is_searched_from_its_tail_first():
    pasted = "Minutes of the planning meeting. " * 40  # past what the embedder reads
    text = pasted + "\n\nUnrelated, but what's my router serial?"
    query = build_query([{"role": "user", "content": text}])
    tail = text[-200:]
    assert query.startswith(tail[tail.index(" ") + 1 :] + "\n")  # from a word's start
    assert query.endswith(text.strip())
    short = "What's my router serial? " + "x" * 900
    assert build_query([{"role": "user", "content": short}]) == short.strip()


def test_last_user_message_is_found_before_trailing_tool_turns():
    messages = [
        {"role": "user", "content": "What is the weather like in Porto today?"},
        {"role": "assistant", "content": None, "tool_calls": []},
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
    ]
    assert build_query(messages) == "What is the weather like in Porto today?"


def test_short_first_message_has_no_context_to_add():
    assert build_query([{"role": "user", "content": "hi"}]) == "hi"


def test_no_user_message_gives_an_empty_query():
    assert build_query([{"role": "system", "content": "You are terse."}]) == ""


AGENT_ROUNDS = [
    {"role": "system", "content": "You are an agent."},
    {"role": "assistant", "content": None, "tool_calls": []},
    {"role": "tool", "tool_call_id": "c1", "content": "  3 plumbers found  "},
    {"role": "assistant", "content": None, "tool_calls": []},
]


def test_a_request_with_no_user_message_searches_for_its_sessions_task():
    task = "Find a plumber who can fix the boiler"
    assert task_query(AGENT_ROUNDS, f" {task} ") == task


def test_with_no_stored_task_the_last_thing_said_is_searched():
    assert task_query(AGENT_ROUNDS, None) == "3 plumbers found"
    assert task_query(AGENT_ROUNDS, "  ") == "3 plumbers found"
    assert task_query(AGENT_ROUNDS[:1], None) == ""  # a system prompt is no query


# -- retrieve --------------------------------------------------------------------------------


@pytest.fixture
def settings(tmp_path):
    return Settings(db_path=tmp_path / "moim.db")


@pytest.fixture
def store(settings):
    store = Store(settings.db_path)
    store.ensure_vectors(HashEmbedder.name, HashEmbedder.dim)
    for user_id in ("alice", "bob"):
        for session_id, message in (("s-kayak", KAYAK), ("s-pasta", PASTA)):
            turn = Turn(user_id, session_id, "gpt-4o-mini", (message,), REPLY, NOW - 60)
            store_turn(store, turn)
    index_pending(store, HashEmbedder(), VectorIndex(store.user_vectors), settings)
    return store


def recall(store, settings, user_id, query, exclude=()):
    index = VectorIndex(store.user_vectors)
    return retrieve(store, index, HashEmbedder(), settings, user_id, query, exclude, NOW)


def test_retrieve_finds_the_matching_chunk_first(store, settings):
    found = recall(store, settings, "alice", "where is my kayak kept")
    assert found.abstained is False
    assert found.hits[0].chunk.text == KAYAK["content"]
    assert found.hits[0].lexical_rank == 1


def test_retrieve_never_returns_another_users_chunks(store, settings):
    alice_ids = set(store.chunks("alice", range(1, 100)))
    for query in ("kayak marina Porto", "carbonara guanciale", "got it"):
        found = recall(store, settings, "alice", query)
        assert found.hits
        assert {h.chunk.user_id for h in found.hits} == {"alice"}
        assert {h.chunk.id for h in found.hits} <= alice_ids


def test_retrieve_excludes_messages_present_in_the_request(store, settings):
    found = recall(store, settings, "alice", "kayak marina Porto", exclude={content_hash(KAYAK)})
    assert KAYAK["content"] not in [h.chunk.text for h in found.hits]


def test_retrieve_excluding_every_match_abstains(store, settings):
    present = {content_hash(m) for m in (KAYAK, PASTA, REPLY)}
    found = recall(store, settings, "alice", "kayak marina Porto", exclude=present)
    assert (found.hits, found.abstained) == ([], True)


def test_retrieve_with_an_empty_query_abstains(store, settings):
    found = recall(store, settings, "alice", "   ")
    assert (found.hits, found.abstained) == ([], True)


def test_a_request_is_not_dropped_whole_for_a_weak_best_cosine(store, tmp_path):
    """No word of these is stored (no lexical hit) and every cosine is under `min_similarity`:
    a question is dropped whole, a request keeps the turns past the excerpt floor (what bears
    on a request, 'I refuse to use pesticides' for 'What should I do about slugs?', is often
    such a turn)."""
    settings = Settings(db_path=tmp_path / "moim.db", min_similarity=0.99)
    asked = recall(store, settings, "alice", "Which boat did my uncle sell last week?")
    assert (asked.hits, asked.abstained) == ([], True)
    request = recall(store, settings, "alice", "Can you suggest something fun for tonight?")
    assert request.abstained is False
    assert request.hits
    assert {h.chunk.user_id for h in request.hits} == {"alice"}
    assert all(h.similarity is not None and h.similarity >= 0.15 for h in request.hits)


def test_retrieve_for_an_unknown_user_finds_nothing(store, settings):
    found = recall(store, settings, "carol", "kayak marina Porto")
    assert (found.hits, found.abstained) == ([], True)


def test_retrieve_through_sqlite_vec_agrees_on_isolation(store, tmp_path):
    settings = Settings(db_path=tmp_path / "moim.db", vector_search="db")
    found = recall(store, settings, "bob", "kayak marina Porto")
    assert found.hits[0].chunk.text == KAYAK["content"]
    assert {h.chunk.user_id for h in found.hits} == {"bob"}


def test_build_query_never_borrows_the_system_prompt_for_a_short_question():
    messages = [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "When was Jon in Paris?"},
    ]
    assert build_query(messages) == "When was Jon in Paris?"


def test_a_speakers_name_in_the_query_is_kept_out_of_the_keyword_search(settings):
    store = Store(settings.db_path)
    store.ensure_vectors(HashEmbedder.name, HashEmbedder.dim)
    greetings = [
        {"role": "assistant", "name": "Bo", "content": "Hey Ana, good to see you!"},
        {"role": "assistant", "name": "Bo", "content": "Ana! Long time, Ana."},
    ]
    sailboat = {"role": "user", "name": "Ana", "content": "I restored an old sailboat"}
    for number, message in enumerate([*greetings, sailboat]):
        turn = Turn("ana", f"s-{number}", "gpt-4o-mini", (message,), None, NOW - 60)
        store_turn(store, turn)
    index_pending(store, HashEmbedder(), VectorIndex(store.user_vectors), settings)
    found = recall(store, settings, "ana", "What did Ana restore?")
    lexical = {h.chunk.text: h.lexical_rank for h in found.hits}
    assert lexical[sailboat["content"]] == 1
    assert all(lexical.get(g["content"]) is None for g in greetings)
    assert found.hits[0].chunk.text == sailboat["content"]

    # With two candidates a retriever, the greeting only the first search (names included)
    # found is no candidate: every hit comes from the dense or the name-less lexical search.
    narrow = replace(settings, candidates=2)
    found = retrieve(
        store,
        VectorIndex(store.user_vectors),
        HashEmbedder(),
        narrow,
        "ana",
        "What did Ana restore?",
        (),
        NOW,
    )
    assert found.hits[0].chunk.text == sailboat["content"]
    assert all(h.dense_rank or h.lexical_rank for h in found.hits)


def test_a_vocabulary_read_not_yet_started_is_not_waited_for():
    pending, done = Future(), Future()
    done.set_result("words")
    assert _read(pending) is None and pending.cancelled()  # expansions reads it instead
    assert _read(done) == "words" and _read(None) is None


# -- the floor past the gate -----------------------------------------------------------------


def past_the_gate(settings, dense, lexical):
    """The ids `past_the_gate` keeps of the chunks found so (id, cosine), and the floor's."""
    similarities = dict(dense) | dict(lexical)
    chunks = {
        i: Chunk(i, i, "u", "s", "user", None, f"turn {i}", NOW, f"h{i}", i) for i in similarities
    }
    weights = Weights(min_similarity=settings.min_similarity)
    ranked = rank(chunks, dense, [(i, 1.0) for i, _ in lexical], similarities, NOW, "", [], weights)
    kept = widening.past_the_gate(settings, ranked, ranked.kept)
    return {h.chunk.id for h in kept}, {h.chunk.id for h in ranked.kept}


def test_past_the_gate_a_dense_only_turn_needs_only_the_excerpt_floor(settings):
    dense = [(1, 0.6), (2, 0.3), (3, 0.2), (4, 0.1)]
    kept, floored = past_the_gate(settings, dense, [(5, 0.4)])
    assert floored == {1, 5}  # min_similarity 0.35
    assert kept == {1, 2, 3, 5}  # excerpt_min_similarity 0.15


def test_past_the_gate_a_keyword_match_still_needs_the_lexical_floor(settings):
    lower = replace(settings, excerpt_min_similarity=0.0)
    kept, floored = past_the_gate(lower, [(1, 0.6), (2, 0.05)], [(5, 0.1)])
    assert floored == {1}
    assert kept == {1}  # never below min_lexical_similarity (0.15), dense-only or matched


def test_an_excerpt_floor_at_the_similarity_floor_keeps_what_the_floor_kept(settings):
    off = replace(settings, excerpt_min_similarity=settings.min_similarity)
    kept, floored = past_the_gate(off, [(1, 0.6), (2, 0.3)], [(5, 0.4)])
    assert kept == floored == {1, 5}


def test_a_turn_that_says_nothing_is_stored_but_never_a_hit(settings):
    """'Thanks, sounds good!' is stored and indexed like any turn, and matches a question that
    shares its words, but as an excerpt it tells nothing: recall keeps it out of its hits."""
    store = Store(settings.db_path)
    store.ensure_vectors(HashEmbedder.name, HashEmbedder.dim)
    said = [
        {"role": "user", "content": "Thanks, sounds good!"},
        {"role": "user", "content": "The good news is the kayak club sounds keen on Porto"},
    ]
    for n, message in enumerate(said):
        store_turn(store, Turn("alice", f"s{n}", "gpt-4o-mini", (message,), None, NOW - 60 + n))
    index_pending(store, HashEmbedder(), VectorIndex(store.user_vectors), settings)
    assert [m.content for m in store.messages("alice")] == [m["content"] for m in said]
    found = recall(store, settings, "alice", "thanks, sounds good: what news of the kayak club?")
    assert [h.chunk.text for h in found.hits] == [said[1]["content"]]
    assert said[0]["content"] in [h.chunk.text for h in found.ranked]
