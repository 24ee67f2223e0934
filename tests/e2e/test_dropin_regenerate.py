"""A client that regenerates its last answer, through the official SDK and the real proxy.

It sends the same history again and gets a new reply: both replies are stored, and the one it
replaced is not recalled into the conversation, neither while it asks again nor after, as a
turn its window dropped would be.
"""

import pytest

from tests.e2e.test_recall import block_in

pytestmark = pytest.mark.both_backends

SYSTEM = {"role": "system", "content": "You are a food guide."}
ASK = {"role": "user", "content": "Where should I have dinner in Lisbon tonight near the river?"}
FIRST = "Try the Trattoria Gusto on Rua Augusta, their carbonara is famous."
SECOND = "Try Taberna Sal on Rua da Prata, their grilled sardines are superb."
FOLLOW = {"role": "user", "content": "Which dinner place near Rua Augusta, the carbonara one?"}


def chat(client, messages):
    reply = client.chat.completions.create(model="gpt-4o-mini", messages=messages)
    return reply.choices[0].message.model_dump(exclude_none=True)


def test_a_replaced_reply_is_stored_but_not_recalled(proxy, upstream):
    upstream.script[:] = [{"content": text} for text in (FIRST, SECOND, SECOND, "Noted.")]
    with proxy.client() as client:
        chat(client, [SYSTEM, ASK])
        proxy.flush()
        chat(client, [SYSTEM, ASK])  # regenerate
        asked_again = block_in(upstream.last_json["messages"]) or ""
        proxy.flush()
        chat(client, [SYSTEM, ASK])  # and once more: the same reply, nothing new
        again = block_in(upstream.last_json["messages"]) or ""
        second = {"role": "assistant", "content": SECOND}
        chat(client, [SYSTEM, ASK, second, FOLLOW])
        after = block_in(upstream.last_json["messages"]) or ""
    proxy.flush()

    stored = [m.content for m in proxy.layer.store.messages("default")]
    assert stored == [SYSTEM["content"], ASK["content"], FIRST, SECOND, FOLLOW["content"], "Noted."]
    assert FIRST not in asked_again and FIRST not in again and SECOND not in again
    assert FIRST not in after
