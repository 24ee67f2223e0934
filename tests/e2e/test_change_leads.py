"""A change said after the old value: the block names the new value first.

"We swapped Kanazawa for Hiroshima" names the old city first; the turn leads the block (newest
first), so a reader taking the first value for the current one read Kanazawa. The words past
the old value now lead the block (memory/block/latest.py; docs/recall-quality.md, "Nineteenth
pass"). Through the real proxy, the official SDK and the real embedder.
"""

import pytest

from memory import count_message_tokens
from tests.e2e.test_recall import block_in, remember_apart, say, sent_messages

pytestmark = pytest.mark.both_backends

PLAN = "For our Japan trip in October we'll do three cities: Tokyo, Kyoto and Kanazawa."
OTHER = "My sister Clara teaches violin at the conservatory in Lisbon."
CHANGE = "Small change to the Japan trip: we swapped Kanazawa for Hiroshima, easier by train."


def test_the_new_city_comes_before_the_old_one_in_the_block(proxy, upstream):
    remember_apart(proxy, "kenji", PLAN, OTHER, CHANGE)
    asked = "Which cities are we visiting on our Japan trip?"
    say(proxy, [{"role": "user", "content": asked}], "kenji", X_Memory_Mode="read")
    block = (block_in(sent_messages(upstream)) or "").lower()
    assert CHANGE.lower() in block and PLAN.lower() in block
    assert "…for hiroshima, easier by train." in block
    assert -1 < block.index("hiroshima") < block.index("kanazawa")


# review27: asked at tiers 0, 1 and 2 (a window per model puts the question's fill ratio in
# each), the block keeps the tier's count and size of excerpts with the change leading, and
# x-memory-chunks-injected counts the excerpts the upstream received.
TIERS = {0: (5, 600, 0.30), 1: (3, 400, 0.55), 2: (2, 250, 0.65)}
LONG_CHANGE = CHANGE + " We also went over the ryokan, the rail pass and the luggage." * 6
QUESTION = [  # a long system prompt: the window that sets its tier leaves the block room
    {"role": "system", "content": "Answer briefly and kindly. " * 400},
    {"role": "user", "content": "Which cities are we visiting on our Japan trip?"},
]


def excerpts_of(block):
    """Each excerpt's text in the block: the lines after its `• ` header, unindented."""
    found = []
    for line in block.split("[Relevant past context]", 1)[1].split("\n"):
        if line.startswith("• "):
            found.append([])
        elif found and line.startswith("  "):
            found[-1].append(line[2:])
    return ["\n".join(lines) for lines in found]


def test_at_every_tier_the_led_block_keeps_its_count_and_size(make_proxy, upstream):
    tokens = count_message_tokens(QUESTION, "gpt-4o-mini")
    windows = {f"tier-{t}": round(tokens / fill) for t, (_, _, fill) in TIERS.items()}
    proxy = make_proxy(settings={"context_windows": windows})
    remember_apart(proxy, "kenji", PLAN, OTHER, LONG_CHANGE)
    for tier, (count, size, _) in TIERS.items():
        headers = say(proxy, QUESTION, "kenji", model=f"tier-{tier}", X_Memory_Mode="read")
        assert headers["x-memory-tier"] == str(tier)
        shown = excerpts_of(block_in(sent_messages(upstream)) or "")
        assert 0 < len(shown) <= count and all(len(text) <= size for text in shown)
        assert headers["x-memory-chunks-injected"] == str(len(shown))
        assert shown[0].startswith("user: …for Hiroshima, easier by train.")


# upd29: a change said with no change word leads when the question asks its subject
# (memory/block/asked.py; docs/recall-quality.md, "Twenty-fourth pass").
BASS = "I play bass in a covers band, a 1978 Fender Precision through an Ampeg amp."
SOLD = "Gear news: I sold the Precision and bought a Music Man StingRay."


def test_a_change_with_no_change_word_leads_when_asked_about_its_subject(proxy, upstream):
    remember_apart(proxy, "nils", BASS, OTHER, SOLD)
    asked = "Which bass do I play these days?"
    say(proxy, [{"role": "user", "content": asked}], "nils", X_Memory_Mode="read")
    block = (block_in(sent_messages(upstream)) or "").lower()
    assert SOLD.lower() in block and "fender precision" in block
    assert "…and bought a music man stingray." in block
    assert -1 < block.index("stingray") < block.index("precision")
