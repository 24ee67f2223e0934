"""memory/block/left_out.py through `MemoryLayer.recall`: what recall kept out of the block, and
the step that kept it out; and the scores a hit carries for showing (lexical, fused).

A real SQLite store, with the deterministic 8-dimension embedder behind the real interface.
"""

import time
from dataclasses import replace

import pytest

from memory import Chunk, LeftOut, MemoryLayer, RecallRequest, Settings, TierRule, Turn
from memory.block.left_out import Told
from memory.recall.ranking import fuse
from tests.memory.hash_embedder import HashEmbedder

KAYAK = {"role": "user", "content": "I keep my red kayak at the marina in Porto"}
KAYAK_TOO = {"role": "user", "content": "The kayak paddle is in the marina shed"}
PASTA = {"role": "user", "content": "My carbonara uses guanciale and pecorino"}
DAY = 86_400
QUESTION = {"role": "user", "content": "Where did I say my kayak is kept at the marina?"}


@pytest.fixture
def layer(tmp_path):
    return make_layer(tmp_path)


def make_layer(tmp_path, **settings):
    layer = MemoryLayer(
        Settings(db_path=tmp_path / "moim.db", widen_turns=0, **settings),
        embedder_factory=lambda _: HashEmbedder(),
    )
    now = time.time() - 3600
    for number, message in enumerate((KAYAK, KAYAK_TOO, PASTA)):
        layer.remember(Turn("ann", f"s-{number}", "gpt-4o-mini", (message,), None, now + number))
    return layer


def recall(layer, *messages, budget=None, rules=None):
    if rules is not None:
        layer.settings = replace(layer.settings, tier_rules=rules)
    return layer.recall(RecallRequest("ann", "now", "gpt-4o-mini", messages, 10, 128_000, budget))


def reasons(recollection):
    """(reason, the text of the chunk or the fact's key) for everything left out."""
    found = []
    for item in recollection.left_out:
        if item.fact is not None:
            found.append((item.reason, item.fact.key))
        else:
            found.append((item.reason, (item.hit.chunk if item.hit else item.chunk).text))
    return found


def test_a_hit_in_the_block_carries_its_lexical_and_fused_scores(layer):
    recollection = recall(layer, QUESTION)

    best = recollection.hits[0]
    assert best.chunk.text == KAYAK["content"]
    assert best.lexical_rank is not None and best.lexical_score > 0
    assert best.dense_rank == 1 and best.similarity > 0.5
    assert 0 < best.fused_score <= 1 <= best.fused_score + 0.05  # recency adds up to 0.05
    assert best.score >= best.fused_score
    shown = recollection.block.recalled
    assert [e.chunk_ids for e in shown] and best.chunk.id in {i for e in shown for i in e.chunk_ids}


def test_nothing_is_left_out_when_everything_fits(layer):
    recollection = recall(layer, QUESTION)

    assert [r for r, _ in reasons(recollection)] == ["weak"] * len(recollection.left_out)
    assert recollection.query == QUESTION["content"]


def test_a_message_present_in_the_request_is_left_out_as_present(layer):
    recollection = recall(layer, KAYAK, {"role": "assistant", "content": "ok"}, QUESTION)

    assert ("present", KAYAK["content"]) in reasons(recollection)
    assert KAYAK["content"] not in recollection.block.text


def test_a_hit_whose_words_the_request_holds_is_left_out_as_repeated(layer):
    """KAYAK pasted into the question, markdown added: another hash, the same words."""
    pasted = {"role": "user", "content": f"**{KAYAK['content']}**: where is that marina?"}

    recollection = recall(layer, pasted)

    assert ("repeated", KAYAK["content"]) in reasons(recollection)
    assert "red kayak" not in recollection.block.text


def test_hits_past_the_tiers_excerpts_are_left_out_for_excerpts(layer):
    one_short = (TierRule(below=1, max_excerpts=1, max_chars=60),)

    recollection = recall(layer, QUESTION, rules=one_short)

    assert recollection.block.excerpts == 1
    assert ("excerpts", KAYAK_TOO["content"]) in reasons(recollection)


def test_hits_below_the_pool_are_left_out_for_pool(tmp_path):
    layer = make_layer(tmp_path, hit_pool=1)

    recollection = recall(layer, QUESTION)

    assert ("pool", KAYAK_TOO["content"]) in reasons(recollection)
    assert KAYAK_TOO["content"] not in recollection.block.text


def test_the_request_token_cap_leaves_out_excerpts_then_facts_as_context_budget(layer):
    layer.set_fact("ann", "home_city", "Porto")

    recollection = recall(layer, QUESTION, budget=1)

    assert recollection.block is None
    found = reasons(recollection)
    assert ("context_budget", KAYAK["content"]) in found
    assert ("context_budget", "home_city") in found


def test_a_silent_fact_and_one_past_the_facts_cap_are_left_out_with_why(tmp_path):
    layer = make_layer(tmp_path, facts_max_tokens=12)
    layer.set_fact("ann", "note", "a long fact that cannot fit in the cap " * 3)
    layer.set_fact("ann", "name", "Ann")  # newer: first in the block, then the note passes the cap
    event = layer.set_fact("ann", "trip", "Rome", category="episodic_event")
    with layer.store.write() as db:  # last said 31 days ago: past the category's silence limit
        db.execute(
            "UPDATE facts SET updated_at = ? WHERE id = ?", (time.time() - 32 * DAY, event.id)
        )

    recollection = recall(layer, QUESTION)

    assert ("facts_budget", "note") in reasons(recollection)
    assert ("silent", "trip") in reasons(recollection)
    assert recollection.block.fact_ids == (layer.fact_history("ann", "name")[0].id,)


def test_abstention_leaves_every_hit_out_as_abstained(tmp_path):
    layer = make_layer(tmp_path, min_similarity=1.01)

    recollection = recall(layer, {"role": "user", "content": "zebra quantum xylophone?"})

    assert recollection.block is None
    assert recollection.left_out
    assert {r for r, _ in reasons(recollection)} == {"abstained"}


def test_fuse_gives_each_hit_its_bm25_and_its_fused_score():
    chunks = {i: Chunk(i, i, "ann", "s", "user", None, f"text {i}", 0.0) for i in (1, 2)}
    hits = fuse(chunks, [(1, 0.9), (2, 0.5)], [(2, 8.0)], {1: 0.9, 2: 0.5})

    assert [(h.chunk.id, h.lexical_score, h.fused_score) for h in hits] == [
        (2, 8.0, 0.5),  # (BM25 8/8 + cosine scaled 0) / 2
        (1, None, 0.5),
    ]


def test_what_was_left_out_is_told_once_when_first_read():
    chunk = Chunk(1, 1, "ann", "s", "user", None, "text", 0.0)
    told = []

    def tell():
        told.append(1)
        return (LeftOut("weak", chunk=chunk),)

    why = Told(tell)
    assert told == []  # nothing built until read
    assert why == (LeftOut("weak", chunk=chunk),) and len(why) == 1 and why[0].reason == "weak"
    assert list(why) == [LeftOut("weak", chunk=chunk)] and why[:5] == (
        LeftOut("weak", chunk=chunk),
    )
    assert told == [1]


def large(tmp_path):
    """A layer whose users' candidates come without their text (`chunk_heads_from=1`): only
    those that reach the block, and the left-out items read, get it from the store."""
    layer = make_layer(tmp_path, chunk_heads_from=1)
    now = time.time() - 7200
    for n in range(12):
        message = {"role": "user", "content": f"Note {n}: the pasta sauce number {n} needs basil"}
        layer.remember(Turn("ann", f"n-{n}", "gpt-4o-mini", (message,), None, now + n))
    recall(layer, QUESTION)  # the first recall asks for the user's heads
    assert layer.store.heads.wait("ann", timeout=10)
    return layer


# A bare word: recall keeps nothing past the floors; every candidate is left out as "weak".
WEAK = {"role": "user", "content": "kayak"}


def told(items):
    return [
        (i.reason, i.hit.chunk.id if i.hit else None, i.hit.chunk.text if i.hit else "")
        for i in items
    ]


def test_the_first_items_read_alone_are_the_first_of_the_whole_list(tmp_path):
    layer = large(tmp_path)
    alone, whole = recall(layer, WEAK).left_out, recall(layer, WEAK).left_out
    everything = tuple(whole)

    first = alone[:3]  # what the inspector's ring keeps: the first ones and their number

    assert len(everything) > 3 and len(alone) == len(everything)
    assert told(first) == told(everything[:3]) and all(i.hit.chunk.text for i in first)
    assert told(alone) == told(everything)


def test_no_text_is_read_back_for_a_user_forgotten_before_the_rest_was_read(tmp_path):
    layer = large(tmp_path)
    recollection = recall(layer, WEAK)
    first = told(recollection.left_out[:2])
    count = len(recollection.left_out)

    layer.forget("ann")
    after = tuple(recollection.left_out)

    assert len(after) == count and told(after[:2]) == first  # read before the forget: as read
    weak = [i for i in after[2:] if i.reason in ("weak", "abstained")]
    assert weak and not any(i.hit.chunk.text for i in weak)  # nothing comes back from the store
