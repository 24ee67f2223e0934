"""A provider's reply larger than `server.max_body_bytes` reaches the client whole, byte for
byte, but moim holds no more of it than that bound to store: a huge or endless body (a broken
provider, a local model looping with no `max_tokens`) was gathered whole in RAM, then
journaled, stored and indexed whole.

The official openai SDK talks to moim, moim to the fake upstream.
"""

import httpx
import pytest

MODEL = "gpt-4o-mini"
BOUND = 4096
LONG = "loop " * 4000  # 20,000 characters: its JSON body is past the bound


def _stored(proxy, user):
    proxy.flush()
    response = httpx.get(
        proxy.root + "/v1/memory/export", headers={"X-Memory-User-Id": user}, timeout=30
    )
    assert response.status_code == 200, response.text
    return [httpx.Response(200, content=line).json() for line in response.text.splitlines()]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_a_reply_past_the_bound_reaches_the_client_whole_and_is_not_held_whole(
    make_proxy, upstream, stream
):
    proxy = make_proxy(max_body_bytes=BOUND)
    upstream.script = [{"content": LONG}]
    question = [{"role": "user", "content": "Say loop many times"}]
    with proxy.client() as client:
        if stream:
            chunks = client.chat.completions.create(
                model=MODEL,
                messages=question,
                stream=True,
                extra_headers={"X-Memory-User-Id": "lo"},
            )
            said = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        else:
            reply = client.chat.completions.create(
                model=MODEL, messages=question, extra_headers={"X-Memory-User-Id": "lo"}
            )
            said = reply.choices[0].message.content
    assert said == LONG

    stored = _stored(proxy, "lo")
    assert stored[0]["role"] == "user" and stored[0]["content"] == "Say loop many times"
    replies = [item for item in stored if item["role"] == "assistant"]
    # what was gathered before the bound, marked partial; nothing of a JSON body's
    assert all(item["partial"] and len(item["content"]) < len(LONG) for item in replies)
    assert len(replies) == (1 if stream else 0)


def test_a_reply_within_the_bound_is_stored_whole(make_proxy, upstream):
    proxy = make_proxy(max_body_bytes=BOUND)
    upstream.script = [{"content": "loop " * 100}]
    with proxy.client() as client:
        client.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": "Say loop"}],
            extra_headers={"X-Memory-User-Id": "lo"},
        )
    stored = _stored(proxy, "lo")
    assert [(item["role"], item["partial"]) for item in stored] == [
        ("user", False),
        ("assistant", False),
    ]
    assert stored[1]["content"] == "loop " * 100
