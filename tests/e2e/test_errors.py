"""Errors look like OpenAI's: the provider's own, relayed as they are, and moim's, in its shape.

CONTRACT.md, "Errors": `{"error": {"message", "type", "param", "code"}}` with a 4xx for bad
input; the provider's own status and body for provider errors. A request moim refuses is
neither forwarded nor stored.
"""

import http.client
import json
import socket
import time
from contextlib import closing
from urllib.parse import urlsplit

import httpx
import openai
import pytest

HELLO = [{"role": "user", "content": "Hello"}]


def assert_openai_error(response, status):
    assert response.status_code == status
    assert response.headers["content-type"].startswith("application/json")
    error = response.json()["error"]
    assert sorted(error) == ["code", "message", "param", "type"]
    assert isinstance(error["message"], str) and error["message"]
    assert isinstance(error["type"], str) and error["type"]
    return error


def assert_nothing_forwarded_or_stored(proxy, upstream):
    proxy.flush()
    assert [r.path for r in upstream.requests] == []
    assert proxy.layer.store.read("SELECT count(*) FROM messages") == [(0,)]


# -- provider errors --------------------------------------------------------------------------

UPSTREAM_ERRORS = [
    (400, openai.BadRequestError),
    (401, openai.AuthenticationError),
    (429, openai.RateLimitError),
    (500, openai.InternalServerError),
]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("status", [s for s, _ in UPSTREAM_ERRORS])
def test_upstream_error_is_relayed_with_its_status_and_body(proxy, upstream, status, stream):
    body = {"model": f"error-{status}", "messages": HELLO, "stream": stream}

    relayed = httpx.post(proxy.url + "/chat/completions", json=body)
    upstream.reset()
    direct = httpx.post(upstream.url + "/chat/completions", json=body)

    assert relayed.status_code == direct.status_code == status
    assert relayed.content == direct.content
    assert relayed.headers.get("retry-after") == ("7" if status == 429 else None)


@pytest.mark.parametrize(("status", "exception"), UPSTREAM_ERRORS)
def test_sdk_raises_the_matching_exception(proxy, upstream, status, exception):
    with proxy.client() as client, pytest.raises(exception) as raised:
        client.chat.completions.create(model=f"error-{status}", messages=HELLO)

    assert raised.value.status_code == status
    assert (
        raised.value.body["code"]
        == {
            400: "invalid_request",
            401: "invalid_api_key",
            429: "rate_limit_exceeded",
            500: "server_error",
        }[status]
    )


def test_upstream_error_turn_is_not_stored(proxy, upstream):
    response = httpx.post(
        proxy.url + "/chat/completions", json={"model": "error-500", "messages": HELLO}
    )
    proxy.flush()

    assert response.status_code == 500
    assert proxy.layer.store.messages("default") == []


def test_upstream_unreachable_is_a_quick_502(make_proxy, upstream):
    proxy = make_proxy(upstream_base_url="http://127.0.0.1:9/v1")

    started = time.monotonic()
    response = httpx.post(
        proxy.url + "/chat/completions",
        json={"model": "gpt-4o-mini", "messages": HELLO},
        timeout=10,
    )
    streamed = httpx.post(
        proxy.url + "/chat/completions",
        json={"model": "gpt-4o-mini", "messages": HELLO, "stream": True},
        timeout=10,
    )
    elapsed = time.monotonic() - started

    assert elapsed < 5
    for reply in (response, streamed):
        error = assert_openai_error(reply, 502)
        assert error["code"] == "upstream_unreachable"
        assert "x-memory-mode" in reply.headers


def test_sdk_sees_an_unreachable_upstream_as_a_server_error(make_proxy, upstream, caplog):
    """The operator's log says where and why, without the URL's credentials: it said only
    `status=502`, so a wrong MOIM_UPSTREAM_BASE_URL was a guess."""
    proxy = make_proxy(upstream_base_url="http://me:s3cret@127.0.0.1:9/v1")

    with proxy.client() as client, pytest.raises(openai.InternalServerError) as raised:
        client.chat.completions.create(model="gpt-4o-mini", messages=HELLO)

    assert raised.value.status_code == 502
    [said] = [r.getMessage() for r in caplog.records if r.name == "proxy.upstream"]
    where, why = said.split(": ConnectError: ")
    assert where == "upstream unreachable: POST http://127.0.0.1:9/v1/chat/completions"
    assert "127.0.0.1:9" in why  # the transport's own words: refused, no such host, …
    assert "s3cret" not in caplog.text


def test_upstream_cut_off_mid_body_is_a_502(proxy, upstream):
    response = httpx.post(
        proxy.url + "/chat/completions", json={"model": "broken", "messages": HELLO}, timeout=10
    )
    proxy.flush()

    error = assert_openai_error(response, 502)
    assert error["code"] == "upstream_broken"
    assert proxy.layer.store.messages("default") == []


# -- malformed requests -----------------------------------------------------------------------


def _body(**fields):
    return json.dumps(fields).encode()


MALFORMED = [
    ("invalid_json", b'{"model": "gpt-4o-mini", "messages": [', {}, None),
    ("json_array", b'[{"model": "gpt-4o-mini", "messages": []}]', {}, None),
    ("not_utf8", b'{"model": "gpt-4o-mini", "messages": "\xff\xfe"}', {}, None),
    ("missing_model", _body(messages=HELLO), {}, "model"),
    ("model_not_a_string", _body(model=4, messages=HELLO), {}, "model"),
    ("missing_messages", _body(model="gpt-4o-mini"), {}, "messages"),
    ("empty_messages", _body(model="gpt-4o-mini", messages=[]), {}, "messages"),
    ("messages_not_a_list", _body(model="gpt-4o-mini", messages="Hello"), {}, "messages"),
    ("message_not_an_object", _body(model="gpt-4o-mini", messages=["Hello"]), {}, "messages[0]"),
    (
        "message_without_role",
        _body(model="gpt-4o-mini", messages=[{"content": "Hello"}]),
        {},
        "messages[0]",
    ),
    (
        "content_wrong_type",
        _body(model="gpt-4o-mini", messages=[{"role": "user", "content": 42}]),
        {},
        "messages[0].content",
    ),
    (
        "stream_not_a_boolean",
        _body(model="gpt-4o-mini", messages=HELLO, stream="yes"),
        {},
        "stream",
    ),
    (
        "user_id_too_long",
        _body(model="gpt-4o-mini", messages=HELLO),
        {"x-memory-user-id": "bob" * 100},
        "X-Memory-User-Id",
    ),
    (
        "body_user_too_long",
        _body(model="gpt-4o-mini", messages=HELLO, user="bob" * 100),
        {},
        "user",
    ),
    (
        "body_user_not_a_string",
        _body(model="gpt-4o-mini", messages=HELLO, user=42),
        {},
        "user",
    ),
    (
        "invalid_session_id",
        _body(model="gpt-4o-mini", messages=HELLO),
        {"x-memory-session-id": "chat#1?"},
        "X-Memory-Session-Id",
    ),
    (
        "budget_not_an_integer",
        _body(model="gpt-4o-mini", messages=HELLO),
        {"x-memory-context-budget": "lots"},
        "X-Memory-Context-Budget",
    ),
    (
        "budget_negative",
        _body(model="gpt-4o-mini", messages=HELLO),
        {"x-memory-context-budget": "-5"},
        "X-Memory-Context-Budget",
    ),
]


@pytest.mark.parametrize(
    ("raw", "headers", "param"),
    [case[1:] for case in MALFORMED],
    ids=[case[0] for case in MALFORMED],
)
def test_malformed_request_is_a_400_and_goes_nowhere(proxy, upstream, raw, headers, param):
    response = httpx.post(
        proxy.url + "/chat/completions",
        content=raw,
        headers={"content-type": "application/json", **headers},
    )

    error = assert_openai_error(response, 400)
    assert error["type"] == "invalid_request_error"
    assert error["param"] == param
    assert_nothing_forwarded_or_stored(proxy, upstream)


def test_a_path_user_over_256_characters_is_a_400(proxy, upstream):
    response = httpx.post(
        proxy.root + f"/u/{'bob' * 100}/v1/chat/completions",
        json={"model": "gpt-4o-mini", "messages": HELLO},
    )

    assert assert_openai_error(response, 400)["param"] == "user_id"
    assert_nothing_forwarded_or_stored(proxy, upstream)


def test_sdk_raises_bad_request_for_a_malformed_request(proxy, upstream):
    with proxy.client() as client, pytest.raises(openai.BadRequestError) as raised:
        client.chat.completions.create(model="gpt-4o-mini", messages=[])

    assert raised.value.body["param"] == "messages"
    assert upstream.requests == []


def test_body_over_the_limit_is_a_413(make_proxy, upstream):
    proxy = make_proxy(max_body_bytes=1000)
    body = _body(model="gpt-4o-mini", messages=[{"role": "user", "content": "x" * 2000}])

    declared = httpx.post(
        proxy.url + "/chat/completions", content=body, headers={"content-type": "application/json"}
    )
    chunked = httpx.post(
        proxy.url + "/chat/completions",
        content=(body[i : i + 300] for i in range(0, len(body), 300)),
        headers={"content-type": "application/json"},
    )

    for response in (declared, chunked):
        error = assert_openai_error(response, 413)
        assert error["code"] == "payload_too_large"
    assert_nothing_forwarded_or_stored(proxy, upstream)


def test_body_under_the_limit_goes_through(make_proxy, upstream):
    proxy = make_proxy(max_body_bytes=1000)

    response = httpx.post(
        proxy.url + "/chat/completions", json={"model": "gpt-4o-mini", "messages": HELLO}
    )

    assert response.status_code == 200


def _import_line(text):
    item = {
        "session_id": "s1",
        "message_key": "k1",
        "content_hash": "h1",
        "role": "user",
        "content": text,
        "created_at": 1_700_000_000,
    }
    return (json.dumps(item) + "\n").encode()


@pytest.mark.parametrize(
    ("path", "content"),
    [
        ("/v1/memory/facts", _body(key="city", value="P" * 2000, category="personal")),
        ("/v1/memory/import", _import_line("x" * 2000)),
    ],
    ids=["facts", "import"],
)
def test_memory_api_body_over_the_limit_is_a_413(make_proxy, upstream, path, content):
    proxy = make_proxy(max_body_bytes=1000)

    declared = httpx.post(proxy.root + path, content=content)
    chunked = httpx.post(
        proxy.root + path, content=(content[i : i + 300] for i in range(0, len(content), 300))
    )

    for response in (declared, chunked):
        error = assert_openai_error(response, 413)
        assert error["code"] == "payload_too_large"
    assert_nothing_forwarded_or_stored(proxy, upstream)
    assert proxy.layer.store.read("SELECT count(*) FROM facts") == [(0,)]


def test_memory_api_body_under_the_limit_goes_through(make_proxy, upstream):
    proxy = make_proxy(max_body_bytes=1000)

    fact = httpx.post(
        proxy.root + "/v1/memory/facts",
        json={"key": "city", "value": "Paris", "category": "personal"},
    )
    imported = httpx.post(proxy.root + "/v1/memory/import", content=_import_line("hello"))

    assert fact.status_code == 200 and fact.json()["value"] == "Paris"
    assert imported.status_code == 200 and imported.json()["imported"] == 1


def test_more_messages_than_the_limit_is_a_400_and_goes_nowhere(make_proxy, upstream):
    proxy = make_proxy(max_messages=3)
    messages = [{"role": "user", "content": f"message {i}"} for i in range(4)]

    refused = httpx.post(
        proxy.url + "/chat/completions", json={"model": "gpt-4o-mini", "messages": messages}
    )

    error = assert_openai_error(refused, 400)
    assert (error["type"], error["param"]) == ("invalid_request_error", "messages")
    assert_nothing_forwarded_or_stored(proxy, upstream)
    accepted = httpx.post(
        proxy.url + "/chat/completions", json={"model": "gpt-4o-mini", "messages": messages[:3]}
    )
    assert accepted.status_code == 200
    assert len(upstream.requests) == 1


def test_headers_over_the_limit_are_a_431_for_every_endpoint(proxy, upstream):
    big = {"x-padding": "p" * 20_000}  # over the default 16 KiB, under uvicorn's own limit

    chat_response = httpx.post(
        proxy.url + "/chat/completions",
        headers=big,
        json={"model": "gpt-4o-mini", "messages": HELLO},
    )
    search = httpx.get(proxy.url + "/memory/search", params={"q": "x"}, headers=big)

    for response in (chat_response, search):
        error = assert_openai_error(response, 431)
        assert error["code"] == "headers_too_large"
        assert len(response.headers["x-request-id"]) == 32
    assert chat_response.headers["x-request-id"] != search.headers["x-request-id"]
    assert_nothing_forwarded_or_stored(proxy, upstream)


def test_a_431_echoes_the_clients_request_id_unless_that_is_what_is_too_large(proxy, upstream):
    body = {"model": "gpt-4o-mini", "messages": HELLO}
    padded = httpx.post(
        proxy.url + "/chat/completions",
        json=body,
        headers={"x-padding": "p" * 20_000, "x-request-id": "req-431"},
    )
    huge_id = httpx.post(
        proxy.url + "/chat/completions", json=body, headers={"x-request-id": "r" * 20_000}
    )

    assert_openai_error(padded, 431)
    assert padded.headers["x-request-id"] == "req-431"
    assert_openai_error(huge_id, 431)
    assert len(huge_id.headers["x-request-id"]) == 32
    assert upstream.requests == []


@pytest.mark.parametrize("parser", ["h11", "httptools"])
def test_header_limit_counts_all_headers_together(make_proxy, upstream, parser):
    proxy = make_proxy(max_header_bytes=2048, http_parser=parser)
    many = {f"x-extra-{i}": "v" * 100 for i in range(30)}  # each small, ~3.5 KB in all

    refused = httpx.post(
        proxy.url + "/chat/completions",
        headers=many,
        json={"model": "gpt-4o-mini", "messages": HELLO},
    )
    accepted = httpx.post(
        proxy.url + "/chat/completions",
        headers=dict(list(many.items())[:5]),
        json={"model": "gpt-4o-mini", "messages": HELLO},
    )

    assert_openai_error(refused, 431)
    assert accepted.status_code == 200
    assert len(upstream.requests) == 1


@pytest.mark.parametrize("parser", ["h11", "httptools"])
def test_a_head_that_grows_past_the_parsers_limit_is_refused_and_closed(make_proxy, parser):
    """A head that never ends cannot grow without bound: past four times
    `server.max_header_bytes` (`parser_limit`) the parser refuses it, as h11 does, with a
    400, and closes the connection, whether or not the client goes on sending."""
    proxy = make_proxy(max_header_bytes=2048, http_parser=parser)
    address = urlsplit(proxy.root)
    head = b"POST /v1/chat/completions HTTP/1.1\r\nhost: localhost\r\nx-pad: " + b"a" * 9000

    with closing(socket.create_connection((address.hostname, address.port), timeout=10)) as sock:
        sock.sendall(head)
        response = http.client.HTTPResponse(sock)
        response.begin()
        assert response.status == 400
        assert response.read() == b"Invalid HTTP request received."
        assert sock.recv(1) == b""  # closed


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/nothing-here"),
        ("POST", "/v2/completions"),
        ("GET", "/u/alice/nothing-here"),
    ],
)
def test_unknown_route_is_a_404_in_openais_shape(proxy, upstream, method, path):
    """Outside `/v1/` (which passes through: tests/e2e/test_passthrough.py) moim answers."""
    response = httpx.request(method, proxy.root + path)

    error = assert_openai_error(response, 404)
    assert error["type"] == "not_found_error"
    assert upstream.requests == []


# -- models -----------------------------------------------------------------------------------


def test_models_relays_the_upstreams_error(make_proxy, upstream):
    proxy = make_proxy(upstream_base_url=upstream.url + "/missing")
    direct = httpx.get(upstream.url + "/missing/models")

    response = httpx.get(proxy.url + "/models")

    assert direct.status_code == 404
    assert response.status_code == 404
    assert response.content == direct.content


def test_models_with_upstream_unreachable_is_a_502(make_proxy, upstream):
    proxy = make_proxy(upstream_base_url="http://127.0.0.1:9/v1")

    response = httpx.get(proxy.url + "/models", timeout=10)

    error = assert_openai_error(response, 502)
    assert error["code"] == "upstream_unreachable"


def test_every_chat_request_is_counted_by_status_refusals_too(proxy, upstream):
    """moim_chat_requests_total counted in the handler: refusals before it (a 431) were
    missing, as were crashes (tests/proxy/test_request_metrics.py)."""
    body = {"model": "gpt-4o-mini", "messages": HELLO}
    statuses = [
        httpx.post(proxy.url + "/chat/completions", json=body).status_code,
        httpx.post(proxy.root + "/u/ana/v1/chat/completions", content=b"{").status_code,
        httpx.post(
            proxy.url + "/chat/completions", json=body, headers={"x-padding": "p" * 20_000}
        ).status_code,
        httpx.post(proxy.root + "/chat/completions", json=body | {"stream": 1}).status_code,
    ]
    assert statuses == [200, 400, 431, 400]

    metrics = httpx.get(proxy.root + "/metrics").text.splitlines()
    assert [line for line in metrics if line.startswith("moim_chat_requests_total")] == [
        'moim_chat_requests_total{status="200"} 1.0',
        'moim_chat_requests_total{status="400"} 2.0',
        'moim_chat_requests_total{status="431"} 1.0',
    ]


# -- moim's own failures ----------------------------------------------------------------------


def test_a_failure_moim_did_not_foresee_is_a_500_in_openais_shape(proxy, monkeypatch):
    """A bug on the request path answers like a provider's server error, which the SDK reads
    (`InternalServerError`, `code`), not Starlette's plain text."""

    def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr("proxy.pipeline.identify", broken)

    response = httpx.post(proxy.url + "/chat/completions", json={"model": "m", "messages": HELLO})
    error = assert_openai_error(response, 500)
    assert error["type"] == "server_error" and error["code"] == "internal_error"
    assert "a bug" not in response.text  # the traceback stays in the log

    client = openai.OpenAI(base_url=proxy.url, api_key="sk-test", max_retries=0)
    with pytest.raises(openai.InternalServerError) as raised:
        client.chat.completions.create(model="m", messages=HELLO)
    assert raised.value.code == "internal_error"
