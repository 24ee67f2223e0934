"""Drop-in compatibility, third round: what the provider's API takes, moim takes too.

Each test is a case an audit found moim answering differently from the provider called
directly: a request that is valid OpenAI input refused, or one that fits the model's context
window pushed over it by the memory block.
"""

import asyncio
import json
import socket
import threading
import time

import httpx
import pytest
import websockets.exceptions
import websockets.sync.client
from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import Route

from memory import count_message_tokens
from proxy.config import ModelRoute
from tests.conftest import serve_app

MODEL = "gpt-4o-mini"
HELLO = {"role": "user", "content": "Hello"}


@pytest.mark.parametrize(
    "reference",
    [{"id": "msg_earlier"}, {"id": "msg_earlier", "type": None}],
    ids=["no-type", "type-null"],
)
def test_an_item_reference_without_a_type_reaches_the_provider(proxy, upstream, reference):
    """OpenAI's `ItemReference` is `{"id": …}` with an optional `type` (openai-python's
    `ResponseInputItemParam`); moim read an item without a type as a message and asked for
    its role."""
    with proxy.client() as client:
        client.responses.create(
            model=MODEL,
            input=[reference, {"role": "user", "content": "And then?"}],
            extra_headers={"X-Memory-User-Id": "alice"},
        )
    proxy.flush()

    assert upstream.last_responses_json["input"][0] == reference
    stored = [(m.role, m.content) for m in proxy.layer.store.messages("alice")]
    assert stored == [("user", "And then?"), ("assistant", "echo: And then?")]


QUICK = {
    "id": "chatcmpl-quick",
    "object": "chat.completion",
    "created": 1700000000,
    "model": "quick",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "Once upon a time."},
            "finish_reason": "stop",
        }
    ],
}


# -- the context window -----------------------------------------------------------------------

WINDOW = 400  # the model's context window, as config.yaml's `context_windows` may set it
FACT = {"key": "home", "value": "a flat above the bakery on Rua das Flores", "category": "home"}


def near_the_edge(make_proxy):
    """A proxy whose model has a small window, for a user with a fact to inject."""
    proxy = make_proxy(settings={"context_windows": {MODEL: WINDOW}})
    headers = {"X-Memory-User-Id": "alice"}
    assert httpx.post(proxy.url + "/memory/facts", json=FACT, headers=headers).status_code == 200
    return proxy


def words(tokens):
    """A user message of about `tokens` tokens (" word" is one token in o200k_base)."""
    return [{"role": "user", "content": "word" + " word" * (tokens - 1)}]


def sent_tokens(upstream):
    return count_message_tokens(upstream.last_json["messages"], MODEL)


@pytest.mark.parametrize(
    ("request_tokens", "fields"),
    [(WINDOW - 20, {}), (WINDOW - 100, {"max_tokens": 90}), (250, {"max_completion_tokens": 140})],
    ids=["history", "max_tokens", "max_completion_tokens"],
)
def test_the_block_never_pushes_a_request_that_fits_over_the_window(
    make_proxy, upstream, request_tokens, fields
):
    """Facts go in at every tier, but only in the room the window has left: a provider
    refuses a request whose messages and reserved reply pass the model's window."""
    proxy = near_the_edge(make_proxy)
    messages = words(request_tokens)
    assert count_message_tokens(messages, MODEL) + fields.get("max_tokens", 0) <= WINDOW

    with proxy.client() as client:
        raw = client.chat.completions.with_raw_response.create(
            model=MODEL, messages=messages, extra_headers={"X-Memory-User-Id": "alice"}, **fields
        )

    reserved = max(fields.values(), default=0)
    assert sent_tokens(upstream) + reserved <= WINDOW
    assert upstream.last_json["messages"] == messages
    assert (raw.headers["x-memory-facts-injected"], raw.headers["x-memory-tokens-injected"]) == (
        "0",
        "0",
    )


def test_with_room_left_the_facts_go_in_near_the_edge(make_proxy, upstream):
    proxy = near_the_edge(make_proxy)
    messages = words(WINDOW - 110)

    with proxy.client() as client:
        raw = client.chat.completions.with_raw_response.create(
            model=MODEL, messages=messages, extra_headers={"X-Memory-User-Id": "alice"}
        )

    assert raw.headers["x-memory-tier"] == "3"
    assert raw.headers["x-memory-facts-injected"] == "1"
    assert FACT["value"] in upstream.last_json["messages"][0]["content"]
    assert sent_tokens(upstream) <= WINDOW


def test_a_responses_request_keeps_its_max_output_tokens_free_of_the_block(make_proxy, upstream):
    proxy = near_the_edge(make_proxy)

    with proxy.client() as client:
        raw = client.responses.with_raw_response.create(
            model=MODEL,
            input="word" + " word" * 250,
            max_output_tokens=140,
            extra_headers={"X-Memory-User-Id": "alice"},
        )

    assert raw.headers["x-memory-facts-injected"] == "0"
    assert upstream.last_responses_json["input"] == "word" + " word" * 250


# -- a client that leaves before the answer ---------------------------------------------------


class HeldUpstream:
    """A provider that answers nothing until its client leaves (or `HOLD` seconds pass), and
    notes that it saw its client leave; it answers model `quick` at once."""

    HOLD = 30.0

    def __init__(self):
        self.arrived = threading.Event()
        self.left = threading.Event()

    async def hold(self, request):
        if json.loads(await request.body())["model"] == "quick":
            return Response(QUICK_REPLY, media_type="application/json")
        self.arrived.set()
        deadline = time.monotonic() + self.HOLD
        while time.monotonic() < deadline:
            if await request.is_disconnected():
                self.left.set()
                return Response(status_code=499)
            await asyncio.sleep(0.02)
        return Response(b'{"error": "held too long"}', status_code=500)

    def app(self):
        paths = ("/v1/chat/completions", "/v1/responses")
        return Starlette(routes=[Route(p, self.hold, methods=["POST"]) for p in paths])


QUICK_REPLY = json.dumps(QUICK).encode()


def send_and_leave(url, path, body, arrived, headers=()):
    """POST `body` to moim as a raw HTTP/1.1 request (with `headers` too: (name, value)
    pairs); close the connection once the provider has the request, before any byte of the
    answer."""
    host, port = url.removeprefix("http://").split(":")
    content = json.dumps(body).encode()
    more = "".join(f"{name}: {value}\r\n" for name, value in headers)
    head = (
        f"POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        f"X-Memory-User-Id: alice\r\n{more}Content-Length: {len(content)}\r\n\r\n"
    )
    with socket.create_connection((host, int(port))) as connection:
        connection.sendall(head.encode() + content)
        assert arrived.wait(10)


STORY = "Tell me a long story"


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": STORY}]}),
        (
            "/v1/chat/completions",
            {"messages": [{"role": "user", "content": STORY}], "stream": True},
        ),
        ("/v1/responses", {"input": STORY}),
        (
            "/v1/chat/completions",
            {"model": "via-litellm", "messages": [{"role": "user", "content": STORY}]},
        ),
    ],
    ids=["chat", "chat-stream-head", "responses", "litellm"],
)
def test_a_client_that_leaves_before_the_answer_ends_the_providers_call(make_proxy, path, body):
    """Called directly, a client's closed connection ends the call at the provider; moim
    waited on for the whole answer, up to `read_timeout`. What the client said is stored, as
    when it leaves a stream before its first event; the next request is answered."""
    held = HeldUpstream()
    with serve_app(held.app()) as root:
        route = ModelRoute(model="openai/held", api_base=root + "/v1", api_key="sk-up")
        proxy = make_proxy(upstream_base_url=root + "/v1", routes={"via-litellm": route})

        send_and_leave(proxy.root, path, {"model": MODEL, **body}, held.arrived)

        assert held.left.wait(10)
        proxy.flush()
        stored = [(m.role, m.content, m.partial) for m in proxy.layer.store.messages("alice")]
        assert stored == [("user", STORY, False)]  # no reply: none was heard
        with proxy.client() as client:
            reply = client.chat.completions.create(model="quick", messages=[HELLO])
        assert reply.choices[0].message.content == "Once upon a time."


# -- WebSockets --------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/v1/realtime?model=gpt-realtime", "/u/alice/v1/realtime"])
def test_a_websocket_handshake_is_refused_saying_why(proxy, path):
    """moim proxies HTTP only (README); the Realtime API's handshake got a bare 403."""
    url = proxy.root.replace("http://", "ws://") + path
    with pytest.raises(websockets.exceptions.InvalidStatus) as refused:
        with websockets.sync.client.connect(url, open_timeout=10):
            pass

    response = refused.value.response
    assert response.status_code == 400
    error = json.loads(response.body)["error"]
    assert (error["type"], error["code"]) == ("invalid_request_error", "websockets_unsupported")
    assert "WebSockets" in error["message"]
