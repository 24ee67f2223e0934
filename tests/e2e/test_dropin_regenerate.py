"""A client that regenerates its last answer, through the official SDK and the real proxy.

It sends the same history again and gets a new reply: both replies are stored, and the one it
replaced is not recalled into the conversation, neither while it asks again nor after, as a
turn its window dropped would be.
"""

import httpx
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


def test_why_this_block_says_a_replaced_reply_was_left_out_as_replaced(proxy, upstream):
    """The inspector said it was left out for lack of room in the tier's excerpts. (Once the
    regenerated turn is stored the replaced reply is set aside and found no more:
    tests/e2e/test_dropin_edits.py.)"""
    upstream.script[:] = [{"content": text} for text in (FIRST, SECOND)]
    with proxy.client() as client:
        chat(client, [SYSTEM, ASK])
        proxy.flush()
        client.chat.completions.create(  # regenerate
            model="gpt-4o-mini",
            messages=[SYSTEM, ASK],
            extra_headers={"x-request-id": "req-after"},
        )

    page = httpx.get(proxy.root + "/ui/users/default/why", params={"request": "req-after"})

    assert page.status_code == 200
    left_out = page.text[page.text.index("Left out") :]
    row = left_out[: left_out.index(FIRST)].rsplit("<tr", 1)[1]
    assert "<strong>replaced</strong>" in row and "a reply the client regenerated" in row
