"""One conversation's turns filling the tier: a newer conversation's turn still gets an excerpt.

Asked about the present at tier 2 (two excerpts), the first conversation's turns match the
question best and would take both; the newer conversation's turn, which says what changed,
opens the second instead (memory/block/order.py; docs/recall-quality.md, "Twenty-third pass").
Through the real proxy, the official SDK and the real embedder.
"""

import pytest

from memory import count_message_tokens
from tests.e2e.test_change_leads import excerpts_of
from tests.e2e.test_recall import block_in, say, sent_messages

pytestmark = pytest.mark.both_backends

FIRST = (
    "Hi, I'm Chiara. I'm a keeper at Delamere Wildlife Park in Cheshire, on the red panda and "
    "small mammals section, which is the best job in the world apart from the pay and the 7:30 "
    "starts. I live in a flat in Northwich with my partner Beth and our two cats."
)
REPLY = "That sounds like a lovely job. What are the red pandas like?"
SECOND = "The animals I work with at the park are red pandas mostly, Kiri is our oldest at twelve."
NEWER = "Big news: I've moved over to the elephant team, started Monday, permanent."
QUESTION = [
    {"role": "system", "content": "Answer briefly and kindly. " * 400},
    {"role": "user", "content": "Which animals do I work with at the park?"},
]


def test_a_newer_conversations_turn_is_shown_beside_the_first_ones(make_proxy, upstream):
    tokens = count_message_tokens(QUESTION, "gpt-4o-mini")
    proxy = make_proxy(settings={"context_windows": {"tier-2": round(tokens / 0.65)}})
    first = [
        {"role": "user", "content": FIRST},
        {"role": "assistant", "content": REPLY},
        {"role": "user", "content": SECOND},
    ]
    say(proxy, first, "chiara")
    say(proxy, [{"role": "user", "content": NEWER}], "chiara")
    proxy.flush()
    headers = say(proxy, QUESTION, "chiara", model="tier-2", X_Memory_Mode="read")
    assert headers["x-memory-tier"] == "2"
    shown = excerpts_of(block_in(sent_messages(upstream)) or "")
    assert len(shown) == 2
    assert any(NEWER in text for text in shown)  # without the rule: two of the first one
    assert any(SECOND in text for text in shown)  # its best turn keeps its place
