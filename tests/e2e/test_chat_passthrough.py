"""moim is transparent: the client gets the provider's answer, the provider gets the client's body.

CONTRACT.md, "Chat": every field the client sends reaches the provider unchanged, moim only
adds its memory block; replies, streamed or not, are the provider's own bytes; and every chat
response carries the `x-memory-*` headers of "What moim says back".
"""

import json
import uuid

import httpx
import openai
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.conftest import serve_app

MEMORY_HEADERS = (
    "x-memory-mode",
    "x-memory-tier",
    "x-memory-fill-ratio",
    "x-memory-tokens-injected",
    "x-memory-chunks-injected",
    "x-memory-facts-injected",
    "x-memory-session-id",
    "x-memory-overhead-ms",
    "x-request-id",
)
BLOCK_START = "=== Memory Context ==="


def ask_upstream_directly(upstream, body):
    """The fake provider's answer to `body` as the first request it sees (ids restart at 1)."""
    upstream.reset()
    return httpx.post(upstream.url + "/chat/completions", json=body)


def stream_raw(url, body, headers=None):
    """The raw body chunks of a streamed POST, as they arrived."""
    with httpx.stream("POST", url, json=body, headers=headers, timeout=10) as response:
        assert response.status_code == 200, response.read()
        return list(response.iter_raw())


def sse_events(data):
    """`data: …` payloads of an SSE body, [DONE] excluded, parsed."""
    lines = [line for line in data.decode().split("\n") if line.startswith("data: ")]
    return [json.loads(line[6:]) for line in lines if line != "data: [DONE]"]


def remember_dog(proxy, client):
    """Store one telling turn and wait until it is indexed, so the next request recalls it."""
    client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": "My dog is called Rex and he loves the beach"}],
    )
    proxy.flush()


# -- replies ----------------------------------------------------------------------------------


def test_non_streaming_reply_is_the_upstreams_bytes(proxy, upstream):
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Hello there"}]}

    relayed = httpx.post(proxy.url + "/chat/completions", json=body)
    direct = ask_upstream_directly(upstream, body)

    assert relayed.status_code == 200
    assert relayed.content == direct.content
    assert relayed.headers["content-type"] == direct.headers["content-type"]


def test_sync_sdk_receives_the_upstreams_completion(proxy, upstream):
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    with proxy.client() as client:
        completion = client.chat.completions.create(model="gpt-4o-mini", messages=messages)
    direct = ask_upstream_directly(upstream, {"model": "gpt-4o-mini", "messages": messages})

    assert completion.to_dict() == direct.json()
    assert completion.id == "chatcmpl-test-1"
    assert completion.created == 1700000000
    assert completion.model == "gpt-4o-mini"
    assert completion.system_fingerprint == "fp_test"
    assert completion.usage.to_dict() == direct.json()["usage"]
    assert completion.choices[0].message.content == "echo: What is the capital of France?"


@pytest.mark.anyio
async def test_async_sdk_receives_the_upstreams_completion(proxy, upstream):
    messages = [{"role": "user", "content": "Name three rivers"}]
    async with proxy.async_client() as client:
        completion = await client.chat.completions.create(model="gpt-4o", messages=messages)
    direct = ask_upstream_directly(upstream, {"model": "gpt-4o", "messages": messages})

    assert completion.to_dict() == direct.json()
    assert completion.choices[0].message.content == "echo: Name three rivers"


def test_streamed_reply_is_the_upstreams_bytes(proxy, upstream):
    body = {
        "model": "gpt-4o-mini",
        "stream": True,
        "messages": [{"role": "user", "content": "Tell me a story about a lighthouse keeper"}],
    }

    relayed = b"".join(stream_raw(proxy.url + "/chat/completions", body))
    direct = ask_upstream_directly(upstream, body)

    assert relayed == direct.content
    assert relayed.endswith(b"data: [DONE]\n\n")


def test_stream_keeps_the_upstreams_chunk_boundaries(proxy, upstream):
    body = {
        "model": "gpt-4o-mini",
        "stream": True,
        "messages": [{"role": "user", "content": "Count slowly"}],
    }
    upstream.script.append({"content": "one two three four five six", "delay": 0.03})

    chunks = stream_raw(proxy.url + "/chat/completions", body)
    upstream.reset()
    upstream.script.append({"content": "one two three four five six"})
    direct = httpx.post(upstream.url + "/chat/completions", json=body).content

    events = [event + b"\n\n" for event in direct.split(b"\n\n") if event]
    assert len(events) == 7  # role, four content pieces, finish, [DONE]
    assert chunks == events


def test_stream_with_include_usage_ends_with_the_usage_chunk(proxy, upstream):
    body = {
        "model": "gpt-4o-mini",
        "stream": True,
        "stream_options": {"include_usage": True},
        "messages": [{"role": "user", "content": "How many tokens is this?"}],
    }

    relayed = b"".join(stream_raw(proxy.url + "/chat/completions", body))
    direct = ask_upstream_directly(upstream, body)

    assert relayed == direct.content
    events = sse_events(relayed)
    assert events[-1]["choices"] == []
    assert events[-1]["usage"] == {"prompt_tokens": 6, "completion_tokens": 8, "total_tokens": 14}
    assert relayed.endswith(b"data: [DONE]\n\n")


def test_sdk_stream_reports_usage_when_asked(proxy, upstream):
    with proxy.client() as client:
        stream = client.chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": "How many tokens is this?"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = list(stream)

    assert chunks[-1].choices == []
    assert chunks[-1].usage.total_tokens == 14
    assert upstream.last_json["stream_options"] == {"include_usage": True}


def test_logprobs_stream_passes_through(proxy, upstream):
    body = {
        "model": "logprobs",
        "stream": True,
        "logprobs": True,
        "messages": [{"role": "user", "content": "Be precise"}],
    }

    relayed = b"".join(stream_raw(proxy.url + "/chat/completions", body))
    direct = ask_upstream_directly(upstream, body)

    assert relayed == direct.content
    with proxy.client() as client:
        stream = client.chat.completions.create(
            model="logprobs", messages=body["messages"], stream=True, logprobs=True
        )
        tokens = [
            t.token
            for c in stream
            if c.choices and c.choices[0].logprobs
            for t in c.choices[0].logprobs.content
        ]
    assert "".join(tokens) == "echo: Be precise"


def test_tool_call_stream_reassembles(proxy, upstream):
    tools = [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            },
        }
    ]
    with proxy.client() as client:
        stream = client.chat.completions.create(
            model="tool-call",
            messages=[{"role": "user", "content": "What's the weather in Paris?"}],
            tools=tools,
            stream=True,
        )
        calls: dict[int, dict[str, str]] = {}
        finish = None
        for chunk in stream:
            choice = chunk.choices[0]
            finish = choice.finish_reason or finish
            for delta in choice.delta.tool_calls or []:
                call = calls.setdefault(delta.index, {"id": "", "name": "", "arguments": ""})
                call["id"] += delta.id or ""
                call["name"] += (delta.function.name or "") if delta.function else ""
                call["arguments"] += (delta.function.arguments or "") if delta.function else ""

    assert calls == {
        0: {"id": "call_test_weather", "name": "get_weather", "arguments": '{"city":"Paris"}'}
    }
    assert finish == "tool_calls"


def test_sync_sdk_stream_yields_the_upstreams_chunks(proxy, upstream):
    messages = [{"role": "user", "content": "Write a haiku about autumn leaves"}]
    with proxy.client() as client:
        stream = client.chat.completions.create(model="gpt-4o-mini", messages=messages, stream=True)
        chunks = [chunk.to_dict() for chunk in stream]
    direct = ask_upstream_directly(
        upstream, {"model": "gpt-4o-mini", "messages": messages, "stream": True}
    )

    assert chunks == sse_events(direct.content)
    assert len(chunks) > 2
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
    assert text == "echo: Write a haiku about autumn leaves"


@pytest.mark.anyio
async def test_async_sdk_stream_yields_the_upstreams_chunks(proxy, upstream):
    messages = [{"role": "user", "content": "Write a limerick about a cat"}]
    async with proxy.async_client() as client:
        stream = await client.chat.completions.create(
            model="gpt-4o-mini", messages=messages, stream=True
        )
        chunks = [chunk.to_dict() async for chunk in stream]
    direct = ask_upstream_directly(
        upstream, {"model": "gpt-4o-mini", "messages": messages, "stream": True}
    )

    assert chunks == sse_events(direct.content)


# -- requests ---------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["auto", "off"])
def test_a_request_of_many_megabytes_reaches_the_provider_whole(proxy, upstream, mode):
    """A body over aiohttp's 1 MiB (here 50,000 tool definitions, ~10 MB) is sent as any other:
    given to aiohttp as bytes it raised its ResourceWarning, a 500 wherever warnings are
    errors (this suite), and was written to the socket in one piece."""
    tools = [
        {"type": "function", "function": {"name": f"tool_{n}", "description": "d" * 100}}
        for n in range(50_000)
    ]
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}], "tools": tools}
    response = httpx.post(
        proxy.url + "/chat/completions",
        json=body,
        headers={"x-memory-user-id": "big", "x-memory-mode": mode},
        timeout=120,
    )
    assert response.status_code == 200, response.text
    assert upstream.last_json["tools"] == tools


def test_every_client_field_reaches_upstream_with_only_the_block_added(proxy, upstream):
    system = "You are a helpful assistant who knows the user's pets."
    fields = {
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "lookup_pet",
                    "description": "Find a pet by name",
                    "parameters": {
                        "type": "object",
                        "properties": {"name": {"type": "string"}},
                        "required": ["name"],
                    },
                },
            }
        ],
        "tool_choice": {"type": "function", "function": {"name": "lookup_pet"}},
        "response_format": {"type": "json_object"},
        "n": 2,
        "logprobs": True,
        "top_logprobs": 3,
        "stream_options": {"include_usage": True},
        "temperature": 0.3,
        "seed": 1234,
        "metadata": {"team": "pets", "ticket": "T-9"},
    }
    messages = [
        {"role": "system", "content": system},
        {"role": "user", "content": "What is my dog called?"},
    ]
    with proxy.client() as client:
        remember_dog(proxy, client)
        stream = client.chat.completions.create(
            model="gpt-4o-mini",
            messages=messages,
            stream=True,
            **fields,
            extra_body={"moim_unknown_field": {"nested": [1, 2.5, None, "ü"]}},
        )
        list(stream)

    received = upstream.last_json
    block = received["messages"].pop(1)  # a system message before the last user message
    assert block["role"] == "system" and block["content"].startswith(BLOCK_START + "\n")
    assert "My dog is called Rex" in block["content"]
    assert block["content"].endswith("=== End Memory ===")
    assert received == {
        "model": "gpt-4o-mini",
        "messages": messages,
        "stream": True,
        **fields,
        "moim_unknown_field": {"nested": [1, 2.5, None, "ü"]},
    }


def test_request_with_nothing_to_recall_is_forwarded_byte_for_byte(proxy, upstream):
    raw = (
        b'{ "messages": [{"role": "user", "content": "caf\\u00e9 \xe2\x98\x95"}],\n'
        b'  "model": "gpt-4o-mini", "temperature": 1.0, "x_custom": [1e3, true] }'
    )

    response = httpx.post(
        proxy.url + "/chat/completions", content=raw, headers={"content-type": "application/json"}
    )

    assert response.status_code == 200
    assert upstream.requests[-1].body == raw


def test_mode_off_forwards_body_unchanged(proxy, upstream):
    raw = (
        b'{"model":"gpt-4o-mini","seed":7,  "messages":[{"role":"user",'
        b'"content":"What is my dog called?"}],"unknown":{"a":null}}'
    )
    with proxy.client() as client:
        remember_dog(proxy, client)
    stored_before = len(proxy.layer.store.messages("default"))

    response = httpx.post(
        proxy.url + "/chat/completions",
        content=raw,
        headers={"content-type": "application/json", "x-memory-mode": "off"},
    )
    proxy.flush()

    assert response.status_code == 200
    assert response.headers["x-memory-mode"] == "off"
    assert upstream.requests[-1].body == raw
    assert len(proxy.layer.store.messages("default")) == stored_before


def test_memory_disabled_forwards_body_unchanged_and_stores_nothing(make_proxy, upstream):
    proxy = make_proxy(memory_enabled=False)
    raw = (
        b'{"model": "gpt-4o-mini", "messages": [{"role": "system", "content": "Be brief"},'
        b' {"role": "user", "content": "My dog is called Rex"}], "stream": true}'
    )

    for _ in range(2):
        with httpx.stream(
            "POST", proxy.url + "/chat/completions", content=raw, headers={"x-memory-mode": "auto"}
        ) as response:
            assert response.status_code == 200
            assert response.headers["x-memory-mode"] == "off"
            response.read()
        assert upstream.requests[-1].body == raw
    proxy.flush()

    assert proxy.layer.store.messages("default") == []
    assert proxy.layer.stats("default").messages == 0


# -- routes -----------------------------------------------------------------------------------


def test_chat_completions_without_v1_prefix(proxy, upstream):
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "No prefix here"}]}

    response = httpx.post(proxy.root + "/chat/completions", json=body)
    proxy.flush()

    assert response.status_code == 200
    assert response.json()["choices"][0]["message"]["content"] == "echo: No prefix here"
    assert [m.content for m in proxy.layer.store.messages("default")] == [
        "No prefix here",
        "echo: No prefix here",
    ]


def test_path_user_is_the_memory_namespace(proxy, upstream):
    with openai.OpenAI(
        base_url=proxy.root + "/u/alice/v1", api_key="sk-client", max_retries=0
    ) as client:
        completion = client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "I live in Lisbon"}]
        )
    proxy.flush()

    assert completion.choices[0].message.content == "echo: I live in Lisbon"
    stored = proxy.layer.store.messages("alice")
    assert [(m.user_id, m.role, m.content) for m in stored] == [
        ("alice", "user", "I live in Lisbon"),
        ("alice", "assistant", "echo: I live in Lisbon"),
    ]
    assert proxy.layer.store.messages("default") == []


def test_path_user_without_v1_prefix(proxy, upstream):
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Hi from bob"}]}

    response = httpx.post(proxy.root + "/u/bob/chat/completions", json=body)
    proxy.flush()

    assert response.status_code == 200
    assert [m.content for m in proxy.layer.store.messages("bob")] == [
        "Hi from bob",
        "echo: Hi from bob",
    ]


@pytest.mark.parametrize("path", ["/v1/models", "/models", "/u/alice/v1/models"])
def test_models_relays_the_upstreams_list(proxy, upstream, path):
    direct = httpx.get(upstream.url + "/models")

    response = httpx.get(proxy.root + path, headers={"authorization": "Bearer sk-client"})

    assert response.status_code == 200
    assert response.json() == direct.json()
    assert upstream.requests[-1].headers["authorization"] == "Bearer sk-client"


def test_sdk_lists_models(proxy, upstream):
    with proxy.client() as client:
        ids = [model.id for model in client.models.list()]

    assert ids == ["gpt-4o-mini", "gpt-4o", "tool-call", "slow", "broken", "logprobs"]


# -- headers ----------------------------------------------------------------------------------


def _assert_memory_headers(headers, mode):
    missing = [name for name in MEMORY_HEADERS if name not in headers]
    assert missing == []
    assert headers["x-memory-mode"] == mode
    assert headers["x-request-id"]
    assert int(headers["x-memory-tier"]) in (0, 1, 2, 3)
    assert 0.0 <= float(headers["x-memory-fill-ratio"])
    for name in ("tokens", "chunks", "facts"):
        assert int(headers[f"x-memory-{name}-injected"]) >= 0
    assert float(headers["x-memory-overhead-ms"]) >= 0.0


def test_memory_headers_on_a_reply(proxy, upstream):
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Hello"}]}

    response = httpx.post(proxy.url + "/chat/completions", json=body)

    assert response.status_code == 200
    _assert_memory_headers(response.headers, "auto")
    assert response.headers["x-memory-session-id"].startswith("s-")


def test_memory_headers_on_a_stream(proxy, upstream):
    body = {
        "model": "gpt-4o-mini",
        "stream": True,
        "messages": [{"role": "user", "content": "Hello"}],
    }

    with httpx.stream(
        "POST", proxy.url + "/chat/completions", json=body, headers={"x-memory-mode": "read"}
    ) as response:
        response.read()

    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    _assert_memory_headers(response.headers, "read")


def test_memory_headers_on_a_moim_error(proxy, upstream):
    response = httpx.post(
        proxy.url + "/chat/completions", content=b"{not json", headers={"x-request-id": "req-123"}
    )

    assert response.status_code == 400
    assert [name for name in MEMORY_HEADERS if name not in response.headers] == []
    assert response.headers["x-request-id"] == "req-123"


def test_memory_headers_on_an_upstream_error(proxy, upstream):
    body = {"model": "error-429", "messages": [{"role": "user", "content": "Hello"}]}

    response = httpx.post(proxy.url + "/chat/completions", json=body)

    assert response.status_code == 429
    _assert_memory_headers(response.headers, "auto")


@pytest.mark.parametrize("mode", ["auto", "read", "write", "off"])
@pytest.mark.parametrize(("model", "status"), [("gpt-4o-mini", 200), ("error-400", 400)])
@pytest.mark.parametrize("stream", [False, True])
def test_memory_headers_in_every_mode_streamed_or_not_and_on_provider_errors(
    proxy, upstream, mode, model, status, stream
):
    body = {"model": model, "stream": stream, "messages": [{"role": "user", "content": "Hi"}]}

    with httpx.stream(
        "POST", proxy.url + "/chat/completions", json=body, headers={"x-memory-mode": mode}
    ) as response:
        response.read()

    assert response.status_code == status
    _assert_memory_headers(response.headers, mode)


@pytest.mark.parametrize("stream", [False, True])
def test_the_providers_headers_reach_the_client_as_its_bytes(proxy, upstream, stream):
    """A header value that is not ASCII (UTF-8 from the provider) is relayed as it was sent:
    decoded by httpx and encoded again as latin-1 it was mangled, or, past latin-1, the
    response could not be made at all."""
    upstream.reply_headers[:] = [
        (b"x-note", "café ✓".encode()),
        (b"x-ratelimit-remaining-requests", b"499"),
    ]
    body = {
        "model": "gpt-4o-mini",
        "stream": stream,
        "messages": [{"role": "user", "content": "Hi"}],
    }

    with httpx.stream("POST", proxy.url + "/chat/completions", json=body) as response:
        response.read()

    assert response.status_code == 200
    assert dict(response.headers.raw)[b"x-note"] == "café ✓".encode()
    assert response.headers["x-ratelimit-remaining-requests"] == "499"
    assert response.headers["x-memory-mode"] == "auto"


def test_a_cookie_the_provider_sets_for_one_user_goes_to_no_later_request(proxy, upstream):
    """One upstream client serves every user: it must not keep a provider's cookie and send it
    with another user's request. The client that got the answer still sees the Set-Cookie."""
    upstream.reply_headers[:] = [(b"set-cookie", b"affinity=alice-node-7; Path=/")]
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Hi"}]}

    first = httpx.post(
        proxy.url + "/chat/completions", json=body, headers={"x-memory-user-id": "alice"}
    )
    upstream.reply_headers.clear()
    httpx.post(proxy.url + "/chat/completions", json=body, headers={"x-memory-user-id": "bob"})

    assert first.headers["set-cookie"] == "affinity=alice-node-7; Path=/"
    assert [r.headers.get("cookie") for r in upstream.requests] == [None, None]


def test_a_provider_s_redirect_goes_back_to_the_client_and_is_not_followed(make_proxy):
    """Followed, a 307 would send the conversation, its memory block and the provider key to
    whatever host the provider (or whoever answers in its name) names."""
    elsewhere: list[str] = []

    async def record(request: Request) -> Response:
        elsewhere.append(request.url.path)
        return Response("{}", media_type="application/json")

    async def redirect(request: Request) -> Response:
        return Response(status_code=307, headers={"location": there + "/v1/chat/completions"})

    other = Starlette(routes=[Route("/{path:path}", record, methods=["POST", "GET"])])
    provider = Starlette(routes=[Route("/{path:path}", redirect, methods=["POST", "GET"])])
    with serve_app(other) as there, serve_app(provider) as root:
        proxy = make_proxy(upstream_base_url=root + "/v1", upstream_api_key="sk-provider")
        body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Hi"}]}
        for stream in (False, True):
            answer = httpx.post(proxy.url + "/chat/completions", json={**body, "stream": stream})
            assert answer.status_code == 307
            assert answer.headers["location"] == there + "/v1/chat/completions"
        assert httpx.get(proxy.url + "/models").status_code == 307  # the pass-through
        proxy.flush()
        # the answer is wherever the client follows to, never through moim: no turn, as for
        # an error (a message stored with no reply was left behind by each redirect)
        assert proxy.layer.store.messages("default") == []

    assert elsewhere == []


def test_sdk_exposes_the_memory_headers(proxy, upstream):
    with proxy.client() as client:
        raw = client.chat.completions.with_raw_response.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": "Hello"}],
            extra_headers={"X-Memory-Mode": "write", "X-Request-Id": "abc-1"},
        )

    _assert_memory_headers(raw.headers, "write")
    assert raw.headers["x-request-id"] == "abc-1"
    assert raw.parse().choices[0].message.content == "echo: Hello"


def test_a_request_without_an_id_gets_a_fresh_uuid4_one(proxy, upstream):
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Hello"}]}

    ids = [
        httpx.post(proxy.url + "/chat/completions", json=body).headers["x-request-id"] for _ in "ab"
    ]
    given = httpx.post(proxy.url + "/chat/completions", json=body, headers={"x-request-id": "r-1"})

    assert ids[0] != ids[1]
    for request_id in ids:  # uuid4().hex's form: 32 hex digits, version 4, RFC 4122 variant
        parsed = uuid.UUID(hex=request_id)
        assert (parsed.hex, parsed.version, parsed.variant) == (request_id, 4, uuid.RFC_4122)
    assert given.headers["x-request-id"] == "r-1"


@pytest.mark.parametrize("first, then", [("off", "auto"), ("auto", "off")])
def test_of_a_header_sent_twice_the_first_counts(proxy, upstream, first, then):
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Hello"}]}
    headers = [
        ("content-type", "application/json"),
        ("x-memory-mode", first),
        ("X-Memory-Session-Id", f"chat-{first}"),
        ("x-memory-mode", then),
        ("x-memory-session-id", f"chat-{then}"),
    ]

    response = httpx.post(
        proxy.url + "/chat/completions", content=json.dumps(body), headers=headers
    )

    assert response.status_code == 200
    assert response.headers["x-memory-mode"] == first
    assert response.headers["x-memory-session-id"] == f"chat-{first}"


# -- provider key -----------------------------------------------------------------------------


def test_authorization_passes_through_to_upstream(proxy, upstream):
    with proxy.client(api_key="sk-user-own-key") as client:
        client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "Hello"}]
        )
        with client.chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": "Hi"}],
            stream=True,
        ) as stream:
            list(stream)

    chats = [r for r in upstream.requests if r.path == "/v1/chat/completions"]
    assert [r.headers["authorization"] for r in chats] == ["Bearer sk-user-own-key"] * 2


def test_no_authorization_reaches_upstream_when_the_client_sends_none(proxy, upstream):
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Hello"}]}

    response = httpx.post(proxy.url + "/chat/completions", json=body)

    assert response.status_code == 200
    assert "authorization" not in upstream.requests[-1].headers
