"""A plan called off and replaced in one sentence (memory/facts/replaced.py): the replacement
is captured as the current value of the cancelled thing, even though the sentence names the
old plan first. Phrasings written for this test; near misses (an event replaced by a pastime,
a hypothetical, a question, someone else's report, a cancellation with no replacement) must
capture nothing."""

import pytest

from memory.facts.capture import capture_facts
from memory.facts.rules import apply_captures
from memory.store import fact_rows
from memory.store.store import Store

NOW = 1_715_558_400.0

REPLACED = [
    (
        "The Lisbon conference was called off, so we're going with a workshop in Porto instead.",
        "current:conference",
        "a workshop in Porto",
    ),
    (
        "Our Cornwall cottage booking fell through last week and we've booked a lodge near "
        "Keswick instead.",
        "current:booking",
        "a lodge near Keswick",
    ),
    (
        "Annoyingly the whole cruise got cancelled, so we've booked two weeks in Crete for "
        "August instead.",
        "current:cruise",
        "two weeks in Crete",
    ),
    (
        "the nursery place isn't happening, the waiting list is huge, so the twins are starting "
        "with a nanny called Rosa instead",
        "current:place",
        "a nanny called Rosa",
    ),
    (
        "My Tuesday pottery class is off this term, so I'm taking a life drawing course instead.",
        "current:class",
        "a life drawing course",
    ),
]


@pytest.mark.parametrize(("text", "key", "value"), REPLACED)
def test_the_replacement_of_a_called_off_plan_is_the_current_value(text, key, value):
    got = {(c.key, c.value) for c in capture_facts(text) if c.op == "set"}
    assert (key, value) in got


NEAR_MISSES = [
    # an event replaced by something done once: no arrangement
    "The concert got cancelled so we watched a film at home instead.",
    "The meeting was cancelled, I ended up reading all afternoon instead.",
    # a hypothetical, a question, someone else's report
    "If the trip is off we'd be going to Wales instead.",
    "Was the match cancelled, and are you playing tennis instead?",
    "My friend said the gig was off and they were playing at the Roundhouse instead.",
    # a cancellation with no replacement, a replacement with no cancellation
    "The original plan fell through because of the rain, but it all worked out.",
    "We're booking a cabin in Wales instead of a hotel.",
    # no thing a key can hold: a name or a word with no meaning of its own ends it
    "The trip to Lisbon was called off, so we're doing a week in Porto instead.",
    "The Kew one fell through, so we're doing the Wisley one instead.",
    # an outing, not an arrangement that stands
    "The Smiths' barbecue was called off, so we're eating at Jo's instead.",
]


@pytest.mark.parametrize("text", NEAR_MISSES)
def test_a_cancellation_that_states_no_current_plan_captures_nothing(text):
    assert capture_facts(text) == []


def test_a_later_replacement_of_the_same_plan_supersedes_the_first(tmp_path):
    store = Store(tmp_path / "moim.db")
    said = [
        "The Lisbon conference was called off, so we're going with a workshop in Porto instead.",
        "Ugh, the Porto conference is off too, so we're doing an online summit instead.",
    ]
    for n, text in enumerate(said):
        apply_captures(store, "ann", capture_facts(text), None, NOW + n)
    history = fact_rows.fact_history(store, "ann", "current:conference")
    assert [(f.value, f.status) for f in history] == [
        ("a workshop in Porto", "superseded"),
        ("an online summit", "active"),
    ]
