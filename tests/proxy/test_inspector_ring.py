"""proxy/inspector/ring.py: "why this block"'s history is bounded per user and in users, keeps
what the page shows, and records nothing at size 0."""

from memory import Chunk, Excerpt, Hit, LeftOut, MemoryBlock, Recollection, Tier
from memory.block.left_out import Told
from memory.records import Counted
from proxy.exchange import Report
from proxy.identity import Identity, Mode
from proxy.inspector.ring import MAX_LEFT_OUT, TEXT_CHARS, History

TIER = Tier(0, 5, 600)


def chunk(chunk_id, text="text"):
    return Chunk(chunk_id, chunk_id, "ann", "s", "user", None, text, 0.0)


def hit(chunk_id, text="text"):
    return Hit(chunk(chunk_id, text), 0.9, 0.5, 1, 1, 3.2, 0.8)


def recollection(hits=(), left_out=(), shown=()):
    excerpt = Excerpt("user: text", "s", 0.0, 0.5, False, chunk_ids=tuple(shown))
    text = "=== Memory Context ===\n…"
    block = MemoryBlock(text, Counted(12), 1, 0, (), (excerpt,)) if shown else None
    return Recollection(TIER, block, list(hits), query="q", left_out=tuple(left_out))


def record(history, user="ann", request_id="r", found=None):
    """Record a request as recall_step does: its report holds the block placed, if any."""
    who = Identity(user, "s", Mode.AUTO)
    found = found or recollection()
    report = Report(request_id=request_id, fill_ratio=0.25, block=found.block)
    return history.record(who, "gpt-4o-mini", report, found)


def test_a_user_keeps_the_last_size_requests_newest_first():
    history = History(3)
    for number in range(5):
        record(history, request_id=f"r{number}")

    assert [r.request_id for r in history.recent("ann")] == ["r4", "r3", "r2"]
    assert history.find("ann", "r3").fill_ratio == 0.25
    assert history.find("ann", "r0") is None and history.recent("bob") == []


def test_the_least_recently_active_user_is_dropped_past_max_users():
    history = History(2, max_users=2)
    record(history, "ann")
    record(history, "bob")
    record(history, "ann")
    record(history, "cy")

    assert history.recent("bob") == []
    assert len(history.recent("ann")) == 2 and len(history.recent("cy")) == 1


def test_size_zero_records_nothing():
    history = History(0)
    record(history)

    assert history.recent("ann") == []


def test_only_the_shown_hits_are_kept_and_long_texts_are_cut():
    long = "x" * (TEXT_CHARS + 50)
    left = [LeftOut("pool", hit=hit(100 + n, long)) for n in range(MAX_LEFT_OUT + 5)]
    found = recollection([hit(1, long), hit(2)], left, shown=(1,))
    history = History(1)
    record(history, found=found)

    kept = history.recent("ann")[0]
    assert [h.chunk.id for h in kept.hits] == [1]
    assert kept.hits[0].chunk.text == "x" * TEXT_CHARS + "…"
    assert kept.hits[0].lexical_score == 3.2 and kept.hits[0].fused_score == 0.8
    assert len(kept.left_out) == MAX_LEFT_OUT and kept.left_out_total == MAX_LEFT_OUT + 5
    assert kept.left_out[0].hit.chunk.text == "x" * TEXT_CHARS + "…"
    assert (kept.tier, kept.query, kept.mode, kept.block) == (TIER, "q", "auto", found.block)


def test_a_request_is_shown_in_its_place_whether_or_not_it_was_settled():
    history = History(3)
    told = []

    def tell():
        told.append(1)
        return (LeftOut("weak", hit=hit(7)),)

    found = Recollection(TIER, None, [], query="q", left_out=Told(tell))
    settle = record(history, request_id="r1", found=found)
    record(history, request_id="r2")
    assert told == []  # what was left out is not told when the request is recorded
    assert [r.request_id for r in history.recent("ann")] == ["r2", "r1"]
    assert history.find("ann", "r1").left_out == (LeftOut("weak", hit=hit(7)),)
    settle()  # the answer sent after the inspector read it: the record stays as it was made
    assert history.find("ann", "r1").left_out_total == 1 and told == [1]
