"""Drop-in compatibility: what a client of the provider sends and gets, it sends and gets
through moim (a user changes only OPENAI_BASE_URL).

Each test is a case an audit found moim answering differently from the provider, or
forwarding something other than what the client sent: the provider's header lines as it sent
them, a `stream: null` (OpenAI's spec allows null), a request body sent compressed, a query
string, and an answer compressed although moim asked for none.
"""

import gzip
import json
import zlib

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.conftest import serve_app

HELLO = [{"role": "user", "content": "Hello"}]


@pytest.mark.parametrize("stream", [False, True])
def test_a_header_the_provider_sends_twice_reaches_the_client_as_two_lines(proxy, upstream, stream):
    """Two `Set-Cookie` joined into one line with ", " are one cookie, broken at the comma
    in its `Expires` date."""
    cookies = [
        b"__cf_bm=abc; path=/; expires=Thu, 26-Nov-26 04:05:00 GMT; HttpOnly",
        b"_cfuvid=def; path=/; HttpOnly",
    ]
    upstream.reply_headers[:] = [(b"set-cookie", cookie) for cookie in cookies]
    body = {"model": "gpt-4o-mini", "stream": stream, "messages": HELLO}

    with httpx.stream("POST", proxy.url + "/chat/completions", json=body) as response:
        response.read()

    assert response.status_code == 200
    assert [v for n, v in response.headers.raw if n.lower() == b"set-cookie"] == cookies
    assert response.headers["x-memory-mode"] == "auto"


@pytest.mark.parametrize(
    "path, body",
    [
        ("/chat/completions", {"model": "gpt-4o-mini", "messages": HELLO, "stream": None}),
        ("/responses", {"model": "gpt-4o-mini", "input": "Hello", "stream": None}),
    ],
    ids=["chat", "responses"],
)
def test_stream_null_is_a_request_not_streamed_as_openai_takes_it(proxy, upstream, path, body):
    """OpenAI's spec types `stream` as boolean or null; a client may send null for "unset"."""
    raw = json.dumps(body).encode()

    response = httpx.post(
        proxy.url + path, content=raw, headers={"content-type": "application/json"}
    )

    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/json")
    assert upstream.requests[-1].body == raw  # nothing to recall yet: the client's bytes


@pytest.mark.parametrize("path", ["/chat/completions", "/responses"])
def test_a_stream_that_is_neither_a_boolean_nor_null_is_a_400_and_goes_nowhere(
    proxy, upstream, path
):
    body = {"model": "gpt-4o-mini", "messages": HELLO, "input": "Hello", "stream": "yes"}

    response = httpx.post(proxy.url + path, json=body)

    assert response.status_code == 400
    assert response.json()["error"]["param"] == "stream"
    assert upstream.requests == []


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("path", ["/chat/completions", "/responses"])
def test_the_query_string_reaches_the_provider_as_sent(proxy, upstream, path, stream):
    """An Azure client sends `?api-version=…` with every request (the SDK's `default_query`);
    the pass-through kept it, chat and the Responses API dropped it."""
    query = {"api-version": "2024-10-21", "note": "a b/✓"}
    with proxy.client(default_query=query) as client:
        if path == "/responses":
            client.responses.create(model="gpt-4o-mini", input="Hello", stream=stream)
        else:
            client.chat.completions.create(model="gpt-4o-mini", messages=HELLO, stream=stream)

    sent = upstream.requests[-1]
    assert sent.path == "/v1" + path
    assert sent.query == "api-version=2024-10-21&note=a+b%2F%E2%9C%93"


def test_the_query_string_reaches_the_provider_through_the_memory_tool_loop(proxy, upstream):
    body = {"model": "gpt-4o-mini", "messages": HELLO}

    httpx.post(
        proxy.url + "/chat/completions?api-version=preview",
        json=body,
        headers={"x-memory-tools": "on"},
    )

    assert [r.query for r in upstream.requests] == ["api-version=preview"]
    assert upstream.last_json["tools"]  # moim's memory tools: the loop sent it


COMPRESSIONS = {
    "gzip": gzip.compress,
    "deflate": zlib.compress,  # HTTP's "deflate" is zlib's format
}


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("coding", sorted(COMPRESSIONS))
def test_a_compressed_chat_body_is_read_and_goes_on_as_json(proxy, upstream, coding, stream):
    """A client (or a proxy before moim) may send its body with `Content-Encoding: gzip`: it
    was a 400 "not valid JSON: can't decode byte 0x8b"."""
    body = {"model": "gpt-4o-mini", "stream": stream, "messages": HELLO}
    raw = json.dumps(body).encode()
    headers = {"content-type": "application/json", "content-encoding": coding}

    response = httpx.post(
        proxy.url + "/chat/completions", content=COMPRESSIONS[coding](raw), headers=headers
    )

    assert response.status_code == 200, response.text
    kind = "text/event-stream" if stream else "application/json"
    assert response.headers["content-type"].startswith(kind)
    assert "echo: He" in response.text
    sent = upstream.requests[-1]
    assert sent.body == raw
    assert "content-encoding" not in sent.headers


def test_an_encoding_moim_cannot_read_is_a_415_and_goes_nowhere(proxy, upstream):
    body = json.dumps({"model": "gpt-4o-mini", "messages": HELLO}).encode()
    headers = {"content-type": "application/json", "content-encoding": "br"}

    response = httpx.post(proxy.url + "/chat/completions", content=body, headers=headers)

    assert response.status_code == 415
    assert response.json()["error"]["code"] == "unsupported_content_encoding"
    assert upstream.requests == []


def test_a_body_that_is_not_what_its_encoding_says_is_a_400(proxy, upstream):
    body = json.dumps({"model": "gpt-4o-mini", "messages": HELLO}).encode()
    headers = {"content-type": "application/json", "content-encoding": "gzip"}

    response = httpx.post(proxy.url + "/chat/completions", content=body, headers=headers)

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_content_encoding"
    assert upstream.requests == []


def test_the_body_limit_applies_to_what_a_compressed_body_inflates_to(make_proxy, upstream):
    proxy = make_proxy(max_body_bytes=64 * 1024)
    text = "a" * (256 * 1024)  # compresses to well under the limit
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": text}]}
    headers = {"content-type": "application/json", "content-encoding": "gzip"}

    response = httpx.post(
        proxy.url + "/chat/completions",
        content=gzip.compress(json.dumps(body).encode()),
        headers=headers,
    )

    assert response.status_code == 413
    assert response.json()["error"]["code"] == "payload_too_large"
    assert upstream.requests == []


def test_a_compressed_pass_through_body_is_routed_and_relayed_as_it_came(proxy, upstream):
    """The pass-through reads a compressed JSON body to route it by its model, and sends the
    provider the client's bytes and their Content-Encoding."""
    raw = gzip.compress(json.dumps({"model": "text-embedding-3-small", "input": "hi"}).encode())
    headers = {"content-type": "application/json", "content-encoding": "gzip"}

    response = httpx.post(proxy.url + "/embeddings", content=raw, headers=headers)

    sent = upstream.requests[-1]
    assert (sent.path, sent.body, sent.headers["content-encoding"]) == (
        "/v1/embeddings",
        raw,
        "gzip",
    )
    assert response.status_code == upstream_status(upstream, raw, headers)


def upstream_status(upstream, raw, headers):
    """The status the provider itself gives the same request."""
    return httpx.post(upstream.url + "/embeddings", content=raw, headers=headers).status_code


def _completion_events():
    def chunk(delta, finish=None):
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        event = {"id": "c-1", "object": "chat.completion.chunk", "created": 1, "model": "m"}
        return f"data: {json.dumps({**event, 'choices': [choice]})}\n\n".encode()

    parts = [chunk({"role": "assistant", "content": ""}), chunk({"content": "Squeezed"})]
    return b"".join([*parts, chunk({}, "stop"), b"data: [DONE]\n\n"])


async def _compressing(request: Request) -> Response:
    """A provider that compresses its answer although asked for `identity`."""
    await request.body()
    return Response(
        gzip.compress(_completion_events()),
        media_type="text/event-stream",
        headers={"content-encoding": "gzip"},
    )


@pytest.fixture(scope="module")
def compressing():
    app = Starlette(routes=[Route("/v1/chat/completions", _compressing, methods=["POST"])])
    with serve_app(app) as root:
        yield root + "/v1"


@pytest.mark.parametrize("tools", ["off", "on"])
def test_a_stream_the_provider_compressed_anyway_reaches_the_client_readable(
    make_proxy, compressing, tools
):
    """Its Content-Encoding is not relayed, so its bytes must not be either: the client got
    gzip bytes it took for events, and moim stored no reply."""
    proxy = make_proxy(upstream_base_url=compressing)
    body = {"model": "gpt-4o-mini", "stream": True, "messages": HELLO}
    headers = {"x-memory-user-id": "squeeze", "x-memory-tools": tools}

    response = httpx.post(proxy.url + "/chat/completions", json=body, headers=headers)

    assert response.status_code == 200
    assert "content-encoding" not in response.headers
    assert response.content == _completion_events()
    proxy.flush()
    stored = [m.content for m in proxy.layer.store.messages("squeeze")]
    assert stored == ["Hello", "Squeezed"]


def test_the_model_list_is_the_providers_answer_as_the_sdk_asks_it(proxy, upstream):
    """The organization and project name whose models are listed (a project's fine-tuned
    models); the provider's headers and query come and go as for any other endpoint."""
    upstream.reply_headers[:] = []
    with proxy.client(organization="org-1", project="proj-1") as client:
        raw = client.models.with_raw_response.list(extra_query={"limit": "2"})

    sent = upstream.requests[-1]
    assert (sent.path, sent.query) == ("/v1/models", "limit=2")
    assert (sent.headers["openai-organization"], sent.headers["openai-project"]) == (
        "org-1",
        "proj-1",
    )
    assert raw.headers["x-request-id"]
    assert raw.http_response.content == httpx.get(upstream.url + "/models").content


@pytest.mark.parametrize("path", ["/chat/completions", "/responses"])
@pytest.mark.parametrize("name", ["user-agent", "openai-organization", "authorization"])
def test_a_client_header_that_is_not_ascii_reaches_the_provider_as_its_bytes(
    proxy, upstream, path, name
):
    """An app's name in its User-Agent ("Café"), sent as UTF-8: it was a bare 500 (httpx
    encodes a str header as ASCII); the pass-through already relayed the bytes."""
    body = {"model": "gpt-4o-mini", "messages": HELLO, "input": "Hello"}
    value = "Café ✓ app/1.0".encode()

    response = httpx.post(
        proxy.url + path,
        content=json.dumps(body),
        headers=[("content-type", "application/json"), (name, value)],
    )

    assert response.status_code == 200, response.text
    sent = upstream.requests[-1]
    assert sent.headers[name].encode("latin-1") == value


@pytest.mark.parametrize("path", ["/chat/completions", "/responses"])
@pytest.mark.parametrize("stream", [False, True])
def test_a_gateways_headers_reach_the_provider_and_moims_own_do_not(proxy, upstream, path, stream):
    """A client in front of a gateway (Helicone, Portkey, Azure, OpenRouter) sends headers the
    gateway needs: they reach it on chat and the Responses API as on any other endpoint. The
    client's connection's headers, moim's `x-memory-*`, the body's and the credentials moim
    chooses do not."""
    body = {"model": "gpt-4o-mini", "stream": stream, "messages": HELLO, "input": "Hello"}
    sent_headers = {
        "Helicone-Auth": "Bearer sk-helicone-1",
        "x-portkey-config": "pc-abc",
        "api-key": "azure-key-1",
        "HTTP-Referer": "https://app.example",
        "Connection": "keep-alive, x-hop",
        "x-hop": "only-for-this-connection",
        "x-memory-user-id": "alice",
        "x-api-key": "sk-proxy-or-not",
    }

    with httpx.stream("POST", proxy.url + path, json=body, headers=sent_headers) as response:
        response.read()

    assert response.status_code == 200, response.text
    received = upstream.requests[-1].headers
    assert received["helicone-auth"] == "Bearer sk-helicone-1"
    assert received["x-portkey-config"] == "pc-abc"
    assert received["api-key"] == "azure-key-1"
    assert received["http-referer"] == "https://app.example"
    for name in ("x-hop", "x-memory-user-id", "x-api-key"):
        assert name not in received
    assert received["content-type"] == "application/json"
    assert received["accept-encoding"] == "identity"


@pytest.mark.parametrize("stream", [False, True])
def test_the_providers_request_id_reaches_the_client_beside_moims(proxy, upstream, stream):
    """`x-request-id` is moim's (CONTRACT); the provider's, which its support asks for, comes
    as `x-upstream-request-id` instead of being dropped."""
    upstream.reply_headers[:] = [(b"x-request-id", b"req_provider_123")]
    body = {"model": "gpt-4o-mini", "stream": stream, "messages": HELLO}

    with httpx.stream(
        "POST", proxy.url + "/chat/completions", json=body, headers={"x-request-id": "mine-1"}
    ) as response:
        response.read()

    assert response.status_code == 200
    assert response.headers.get_list("x-request-id") == ["mine-1"]
    assert response.headers["x-upstream-request-id"] == "req_provider_123"
