"""A question asking what a fact of the block holds, in other words than the turn it was taken
from ("Which town do we call home?" for "We live in Reading"): among a dozen turns on the
user's flying, the turn is one of many alike and the learned gate withheld every excerpt; the
fact's source turn now comes in with the fact (docs/recall-quality.md, "Twenty-fifth pass").
Through the real proxy, the official SDK and the real embedder."""

import pytest

from tests.e2e.test_recall import block_in, remember_apart, say, sent_messages

pytestmark = pytest.mark.both_backends

TURNS = (
    "I'm cabin crew, long-haul, based at Heathrow, mostly on the 777 fleet, and my sleep is "
    "shot from the time zones.",
    "My partner thinks I should ask for a part-time contract, but I'd lose the seniority for "
    "the good trips. We live in Reading, so Heathrow is an easy drive at least.",
    "I've been taking melatonin, 3 mg when I land, and I'm not sure it does much.",
    "The Johannesburg layover is my favourite, the crew hotel has a decent pool.",
    "Our cat Biscuit gets fed by my sister when we're both away.",
    "I moved onto the A350 fleet, the training finished on Tuesday.",
    "We're planning a big trip for my birthday in September, three weeks in Peru.",
    "The GP suggested I drop the melatonin to 1 mg, an hour before I want to sleep.",
    "The Santiago route is long but the layover is worth it.",
    "I'm pescatarian and worried about pork stock everywhere in Japan.",
    "My roster for next month has four Singapore trips, which is a lot of night flying.",
)


def test_the_turn_a_fact_was_taken_from_comes_with_the_fact(proxy, upstream):
    remember_apart(proxy, "ewa", *TURNS)
    asked = "Which town do we call home?"
    say(proxy, [{"role": "user", "content": asked}], "ewa", X_Memory_Mode="read")
    block = block_in(sent_messages(upstream)) or ""
    assert "home city: Reading" in block
    assert "We live in Reading, so Heathrow is an easy drive" in block
