"""A question asked at the end of a long message (a pasted email, then the question) is
searched for: recall reads the message's tail first, not only its start."""

import pytest

from tests.e2e.test_recall import block_in, remember_apart, say, sent_messages

pytestmark = pytest.mark.both_backends

EMAIL = (
    "Dear team, following up on the quarterly planning session, I wanted to summarise the "
    "key actions we agreed on for the coming months and who owns each of them. "
) * 20


def test_a_question_after_a_pasted_email_recalls_what_it_asks_for(proxy, upstream):
    remember_apart(proxy, "nina", "My router serial is XK-4471-QZ9, keep it handy.")
    notes = [f"Note {i}: garden shed plans, paint colours and fence panels." for i in range(10)]
    remember_apart(proxy, "nina", *notes)
    question = EMAIL + "\n\nUnrelated, but what's my router serial again?"
    say(proxy, [{"role": "user", "content": question}], "nina", X_Memory_Mode="read")
    assert "XK-4471-QZ9" in (block_in(sent_messages(upstream)) or "")
