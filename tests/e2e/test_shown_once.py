"""Words the model reads already are not recalled again, through the real proxy.

Chat UIs resend an answer trimmed or with its markdown normalised (stored again, as sent), a
reply continued from a prefill is stored in pieces and whole, a user pastes an earlier answer
into a new chat: the block shows such words once, and not at all when the request holds them.
"""

import pytest

from tests.e2e.test_recall import block_in, say, sent_messages

pytestmark = pytest.mark.both_backends

SYSTEM = {"role": "system", "content": "You are a helpful assistant."}
ASK = {"role": "user", "content": "Summarise the plan for the festival."}
PLAN = "**Your plan:**\n\n* Gate code: `GT-5150-MD`\n* Bring ID\n\n"
FERRY = (
    "Here is the itinerary: ferry PX-3390 at 07:40 from Hirtshals, arrive Kristiansand 10:55, "
    "then the coastal road to Mandal."
)


def test_an_answer_resent_reformatted_is_shown_once(proxy, upstream):
    upstream.script[:] = [{"content": PLAN}, {"content": "Enjoy!"}, {"content": "ok"}]
    say(proxy, [SYSTEM, ASK], "fest", x_memory_session_id="fest-1")
    normalised = {
        "role": "assistant",
        "content": "Your plan:\n\n- Gate code: GT-5150-MD\n- Bring ID",
    }
    thanks = {"role": "user", "content": "Thanks!"}
    say(proxy, [SYSTEM, ASK, normalised, thanks], "fest", x_memory_session_id="fest-1")
    proxy.flush()
    stored = [m.content for m in proxy.layer.store.messages("fest")]
    assert PLAN in stored and normalised["content"] in stored  # the log is what was sent

    question = {"role": "user", "content": "What was the gate code for the festival?"}
    say(proxy, [SYSTEM, question], "fest", x_memory_mode="read")
    block = block_in(sent_messages(upstream)) or ""
    assert block.count("GT-5150-MD") == 1


def test_an_answer_pasted_into_a_new_chat_is_not_recalled_beside_it(proxy, upstream):
    upstream.script[:] = [{"content": FERRY}, {"content": "Sure."}]
    ask = {"role": "user", "content": "Plan the crossing to Norway."}
    say(proxy, [SYSTEM, ask], "ferry", x_memory_session_id="ferry-1")
    proxy.flush()
    pasted = {"role": "user", "content": FERRY + "\n\nCan you turn this ferry plan into a list?"}
    say(proxy, [SYSTEM, pasted], "ferry", x_memory_session_id="ferry-2", x_memory_mode="read")
    sent = sent_messages(upstream)
    assert "PX-3390" not in (block_in(sent) or "")
    assert sent[-1] == pasted
