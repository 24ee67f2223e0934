"""A provider's reply larger than `server.max_body_bytes` reaches the client whole, byte for
byte, but moim holds no more of it than that bound to store: a huge or endless body (a broken
provider, a local model looping with no `max_tokens`) was gathered whole in RAM, then
journaled, stored and indexed whole. So on every route that reads a body: the memory-tool
loop's rounds, litellm's replies, a background reply's polls, and a provider's error bodies.

The official openai SDK talks to moim, moim to the fake upstream.
"""

import threading

import anyio.to_thread
import httpx
import pytest
from starlette.applications import Starlette
from starlette.responses import StreamingResponse
from starlette.routing import Route

from proxy.config import ModelRoute
from tests.conftest import serve_app

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


def _ask(proxy, model=MODEL):
    with proxy.client() as client:
        reply = client.chat.completions.create(
            model=model,
            messages=[{"role": "user", "content": "Say loop many times"}],
            extra_headers={"X-Memory-User-Id": "lo"},
        )
    return reply.choices[0].message.content


@pytest.mark.parametrize("route", ["memory-tools", "litellm"])
def test_a_reply_past_the_bound_is_not_stored_on_any_route(make_proxy, upstream, route):
    # The memory-tool loop read each non-streamed round whole; litellm's reply was stored whole.
    if route == "litellm":
        via = ModelRoute(model="openai/gpt-4o-mini", api_base=upstream.url, api_key="sk-up")
        proxy = make_proxy(max_body_bytes=BOUND, routes={"via-litellm": via})
        model = "via-litellm"
    else:
        proxy = make_proxy(max_body_bytes=BOUND, memory_tools=True)
        model = MODEL
    upstream.script = [{"content": LONG}]
    assert _ask(proxy, model) == LONG
    stored = _stored(proxy, "lo")
    assert [(item["role"], item["content"]) for item in stored] == [("user", "Say loop many times")]


def test_a_background_reply_past_the_bound_is_polled_whole_and_not_stored(make_proxy, upstream):
    # A poll's JSON body was gathered whole (PolledReply), then stored.
    proxy = make_proxy(max_body_bytes=BOUND)
    upstream.script = [{"content": LONG}]
    with proxy.client() as client:
        queued = client.responses.create(
            model=MODEL, input="Say loop", background=True, extra_headers={"X-Memory-User-Id": "lo"}
        )
        polled = [client.responses.retrieve(queued.id) for _ in range(3)]
    assert [p.status for p in polled] == ["in_progress", "completed", "completed"]
    assert polled[-1].output_text == LONG
    stored = _stored(proxy, "lo")
    assert [(item["role"], item["content"]) for item in stored] == [("user", "Say loop")]


class _HeldError:
    """A provider whose 500 error body is past the bound and ends only once the test has read
    its first part through moim: read whole before answering, it never ends."""

    HEAD = b'{"error": {"message": "' + b"x" * (2 * BOUND)
    TAIL = b'", "type": "server_error", "param": null, "code": "server_error"}}'

    def __init__(self):
        self.read = threading.Event()

    async def answer(self, request):
        async def body():
            yield self.HEAD
            await anyio.to_thread.run_sync(self.read.wait)
            yield self.TAIL

        return StreamingResponse(body(), status_code=500, media_type="application/json")


@pytest.mark.parametrize("memory_tools", [False, True], ids=["bytes", "memory-tools"])
def test_an_error_body_past_the_bound_is_relayed_as_it_comes(make_proxy, memory_tools):
    provider = _HeldError()
    app = Starlette(routes=[Route("/v1/chat/completions", provider.answer, methods=["POST"])])
    with serve_app(app) as root:
        proxy = make_proxy(
            upstream_base_url=root + "/v1", max_body_bytes=BOUND, memory_tools=memory_tools
        )
        body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}
        received = b""
        try:
            with httpx.stream(
                "POST", proxy.url + "/chat/completions", json=body, timeout=20
            ) as answer:
                assert answer.status_code == 500
                for piece in answer.iter_raw():
                    received += piece
                    if len(received) >= len(provider.HEAD):
                        provider.read.set()
        finally:
            provider.read.set()
    assert received == provider.HEAD + provider.TAIL
