"""memory/layer.py: a recall begun before the request is measured gives what a recall does;
the writer reuses the vector of the question recall embedded."""

import threading
from dataclasses import replace

import pytest

from memory import MemoryLayer, RecallRequest, Settings, Turn, count_tokens
from memory.records import Counted
from tests.memory.hash_embedder import HashEmbedder

NOW = 1_700_000_000.0


class RecordingEmbedder(HashEmbedder):
    """Remembers every document text it was asked to embed."""

    def __init__(self):
        self.documents = []

    def embed_documents(self, texts):
        self.documents.extend(texts)
        return super().embed_documents(texts)


def _layer(tmp_path, embedder=None):
    embedder = embedder or HashEmbedder()
    layer = MemoryLayer(Settings(db_path=tmp_path / "moim.db"), lambda _: embedder)
    said = [
        ("s-1", "I keep my red kayak at the marina in Porto", "Noted, the marina."),
        ("s-2", "My carbonara uses guanciale and pecorino", "Sounds good."),
        ("s-3", "The kayak needs a new paddle before May", "I will remind you."),
    ]
    for session_id, asked, reply in said:
        user = {"role": "user", "content": asked}
        answer = {"role": "assistant", "content": reply}
        layer.remember(Turn("ana", session_id, "gpt-4o-mini", (user,), answer, NOW - 3600))
    return layer


def _request(user_id, messages):
    return RecallRequest(user_id, "s-new", "gpt-4o-mini", messages, 40, 128_000)


def test_a_recall_begun_early_gives_the_same_block_and_hits(tmp_path):
    layer = _layer(tmp_path)
    messages = [{"role": "user", "content": "Where do I keep the kayak and what does it need?"}]
    plain = layer.recall(_request("ana", messages), NOW)
    pending = layer.begin_recall("ana", messages, NOW)
    assert pending is not None
    early = layer.recall(_request("ana", messages), NOW, pending)
    assert early.block is not None
    assert early.block == plain.block
    assert [(h.chunk.id, h.score) for h in early.hits] == [
        (h.chunk.id, h.score) for h in plain.hits
    ]


def test_a_recall_begun_for_another_user_is_not_used(tmp_path):
    layer = _layer(tmp_path)
    messages = [{"role": "user", "content": "Where do I keep the kayak and what does it need?"}]
    pending = layer.begin_recall("ana", messages, NOW)
    other = layer.recall(_request("bob", messages), NOW, pending)
    assert (other.block, other.hits) == (None, [])


def test_a_recall_finished_by_its_search_gives_the_same_block_and_hits(tmp_path):
    layer = _layer(tmp_path)
    messages = [{"role": "user", "content": "Where do I keep the kayak and what does it need?"}]
    plain = layer.recall(_request("ana", messages), NOW)
    pending = layer.begin_recall("ana", messages, NOW)
    finished = layer.recall_then(_request("ana", messages), lambda found: found, pending)
    found = finished.result(timeout=60)
    assert found.block is not None
    assert found.block == plain.block
    assert [(h.chunk.id, h.score) for h in found.hits] == [
        (h.chunk.id, h.score) for h in plain.hits
    ]
    assert found.left_out == plain.left_out


def test_recall_then_without_a_search_under_way_recalls_as_recall_does(tmp_path):
    layer = _layer(tmp_path)
    messages = [{"role": "user", "content": "Where do I keep the kayak and what does it need?"}]
    finished = layer.recall_then(_request("ana", messages), lambda found: found.block)
    assert finished.result(timeout=60) == layer.recall(_request("ana", messages)).block
    pending = layer.begin_recall("ana", messages, NOW)
    other = layer.recall_then(_request("bob", messages), lambda found: found.block, pending)
    assert other.result(timeout=60) is None  # ana's search is not bob's


def test_what_recall_then_raises_is_in_its_future(tmp_path):
    layer = _layer(tmp_path)
    messages = [{"role": "user", "content": "Where do I keep the kayak and what does it need?"}]
    pending = layer.begin_recall("ana", messages, NOW)

    def fails(found):
        raise ValueError("placing the block failed")

    finished = layer.recall_then(_request("ana", messages), fails, pending)
    with pytest.raises(ValueError, match="placing the block failed"):
        finished.result(timeout=60)


def test_a_blocks_tokens_are_the_count_of_its_text_with_or_without_a_budget(tmp_path):
    layer = _layer(tmp_path)
    messages = [{"role": "user", "content": "Where do I keep the kayak and what does it need?"}]
    pending = layer.begin_recall("ana", messages, NOW)
    finished = layer.recall_then(_request("ana", messages), lambda found: found.block, pending)
    block = finished.result(timeout=60)  # counted when read, or by the thread that searched
    assert block is not None
    assert block.tokens == count_tokens(block.text, "gpt-4o-mini")
    budget = replace(_request("ana", messages), token_budget=block.tokens)
    assert layer.recall(budget, NOW).block == block  # counted at once: the cap is met
    tight = layer.recall(replace(budget, token_budget=block.tokens - 1), NOW).block
    assert tight is None or tight.tokens == count_tokens(tight.text, "gpt-4o-mini") < block.tokens


def test_a_count_is_made_once_when_first_read():
    calls = []
    counted = Counted(lambda: calls.append(1) or 7)
    assert calls == []
    assert (counted.value, counted.value, calls) == (7, 7, [1])
    assert counted == Counted(7) and hash(counted) == hash(Counted(7))


def test_a_read_while_another_thread_counts_waits_for_that_count():
    """The event loop reads a block's tokens for the headers while the thread that recalled
    may still be counting them: it gets that count, and the text is not counted twice."""
    counters, again, got = [], threading.Event(), []
    second = threading.Thread(target=lambda: got.append(counted.value))

    def count() -> int:
        counters.append(threading.current_thread())
        if len(counters) == 1:  # the first count: another thread reads meanwhile
            second.start()
            again.wait(timeout=0.2)  # set only if that thread counts too
        else:
            again.set()
        return 7

    counted = Counted(count)
    assert counted.value == 7
    second.join(timeout=60)
    assert got == [7] and counters == [threading.current_thread()]


ASKED = {
    "role": "user",
    "content": "Where do I keep the red kayak these days, and what does it still need "
    "before the trip up the coast in May?",
}
REPLY = {"role": "assistant", "content": "At the marina; a paddle."}


def test_the_writer_stores_the_vector_recall_embedded_for_the_question(tmp_path):
    embedder = RecordingEmbedder()
    layer = _layer(tmp_path, embedder)
    layer.recall(_request("ana", [ASKED]), NOW)
    embedder.documents.clear()

    layer.remember(Turn("ana", "s-new", "gpt-4o-mini", (ASKED,), REPLY, NOW))

    assert embedder.documents == [f"user: {ASKED['content'][-200:]}\n{REPLY['content']}"]
    found = layer.search("ana", ASKED["content"], 1)  # its vector is the question's
    assert found[0].chunk.text == ASKED["content"]
    assert found[0].similarity == pytest.approx(1.0, abs=1e-6)


def test_a_forgotten_user_leaves_no_question_vector_behind(tmp_path):
    embedder = RecordingEmbedder()
    layer = _layer(tmp_path, embedder)
    layer.recall(_request("ana", [ASKED]), NOW)
    layer.forget("ana")
    embedder.documents.clear()

    layer.remember(Turn("ana", "s-new", "gpt-4o-mini", (ASKED,), REPLY, NOW))

    assert embedder.documents[0] == ASKED["content"]  # embedded again: nothing was held


def test_a_forgotten_user_leaves_no_text_or_word_in_the_module_caches(tmp_path):
    # The block's turns held flat, texts counted in tokens, messages hashed as they are
    # stored, words stemmed for the lexical index: held by text, for every user at once.
    from memory.block import excerpts, tokens
    from memory.ingest import identity
    from memory.store import fts

    caches = (excerpts._flat_held, tokens._count_short, identity._recent_hash, fts._stem)
    layer = _layer(tmp_path)
    asked = [{"role": "user", "content": "Where do I keep the kayak and what does it need?"}]
    assert layer.recall(_request("ana", asked), NOW).block is not None
    assert all(cache.cache_info().currsize > 0 for cache in caches)

    layer.forget("ana")

    assert [cache.cache_info().currsize for cache in caches] == [0, 0, 0, 0]


def test_recall_holds_only_the_question_vector_the_writer_will_take(tmp_path):
    # A short question is embedded by the writer after the turn before it, so its vector
    # would never be taken: held, it sat in RAM with its words (~40 kB) until pushed out.
    layer = _layer(tmp_path)
    layer.recall(_request("ana", [{"role": "user", "content": "Where is my kayak?"}]), NOW)
    assert len(layer._questions) == 0
    layer.recall(_request("ana", [ASKED]), NOW)
    assert len(layer._questions) == 1
