"""Every other endpoint passes through: byte for byte, both ways, streamed, nothing stored.

A client pointed at moim uses one base URL for chat *and* embeddings, files, audio, ... Those
requests reach the fake upstream as the client sent them (method, path, query, headers less
hop-by-hop ones, body bytes), and the fake's answer reaches the client unchanged. Each test
compares with what the fake received, or with the fake's answer to the same request sent
directly.
"""

import http.client
import json
import logging
import socket
import time
from contextlib import closing

import httpx
import pytest

from proxy.config import ModelRoute, ProxyKey
from tests.upstream_api import embedding_of, speech_of

EMBED = b'{"model": "text-embedding-3-small",   "input": ["caf\\u00e9", "ok"], "x": [1.50]}'
JSON = {"content-type": "application/json"}


def assert_openai_error(response, status):
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert isinstance(error["message"], str) and error["message"]
    return error


def direct(upstream, method, path, **kwargs):
    """The fake's own answer to a request, asked without moim."""
    answer = httpx.request(method, upstream.url.removesuffix("/v1") + path, **kwargs)
    upstream.requests.pop()
    return answer


def stored_messages(proxy, user="default"):
    proxy.flush()
    return proxy.layer.stats(user).messages


# -- byte for byte ------------------------------------------------------------------------------


def test_embeddings_reach_the_provider_and_come_back_byte_for_byte(proxy, upstream):
    response = httpx.post(proxy.url + "/embeddings", content=EMBED, headers=JSON)

    [received] = upstream.requests
    assert (received.method, received.path, received.body) == ("POST", "/v1/embeddings", EMBED)
    assert response.status_code == 200
    assert response.content == direct(upstream, "POST", "/v1/embeddings", content=EMBED).content
    assert response.json()["data"][0]["embedding"] == embedding_of("café")
    assert response.headers["content-type"] == "application/json"
    assert response.headers["x-request-id"]


@pytest.mark.parametrize("stream", [False, True])
def test_the_responses_api_reaches_the_provider_as_sent(proxy, upstream, stream):
    """Carried byte for byte while moim has no memory for it; memory off keeps it so after."""
    body = json.dumps(
        {"model": "gpt-4o-mini", "input": "Hello  there", "stream": stream}, indent=1
    ).encode()

    response = httpx.post(
        proxy.url + "/responses", content=body, headers={**JSON, "x-memory-mode": "off"}
    )

    [received] = upstream.requests
    assert (received.path, received.body) == ("/v1/responses", body)
    answer = direct(upstream, "POST", "/v1/responses", content=body, headers=JSON)
    assert response.status_code == answer.status_code
    assert response.headers["content-type"] == answer.headers["content-type"]
    assert stored_messages(proxy) == 0


def test_nothing_of_a_pass_through_request_is_stored(proxy, upstream):
    httpx.post(proxy.url + "/embeddings", content=EMBED, headers=JSON)
    httpx.post(proxy.url + "/completions", json={"model": "gpt-4o-mini", "prompt": "My cat"})

    assert len(upstream.requests) == 2
    assert stored_messages(proxy) == 0


def test_query_string_and_raw_path_are_kept(proxy, upstream):
    httpx.get(proxy.root + "/v1/files/file%2Fodd%20name/content?purpose=batch&a=%20b&a=c")

    [received] = upstream.requests
    assert received.raw_path == "/v1/files/file%2Fodd%20name/content"
    assert received.query == "purpose=batch&a=%20b&a=c"


@pytest.mark.parametrize(
    "path",
    [
        "/v1/../secret",
        "/v1/files/%2e%2e/%2E%2E/admin",
        "/u/alice/v1/./files",
        "/v1/models/../../admin",
        "/%76%31/files",
    ],
)
def test_a_path_that_could_leave_the_base_url_is_refused(proxy, upstream, path):
    host = proxy.root.removeprefix("http://")
    with closing(http.client.HTTPConnection(host, timeout=10)) as connection:
        connection.request("GET", path)  # sent as written: httpx would resolve the dots first
        answer = connection.getresponse()
        error = json.loads(answer.read())["error"]

    assert (answer.status, error["code"]) == (400, "invalid_path")
    assert upstream.requests == []


@pytest.mark.parametrize("method", ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "HEAD"])
def test_any_method_passes_through(proxy, upstream, method):
    response = httpx.request(method, proxy.url + "/nothing-here", content=b"raw \x00 bytes")

    [received] = upstream.requests
    assert (received.method, received.path, received.body) == (
        method,
        "/v1/nothing-here",
        b"raw \x00 bytes",
    )
    answer = direct(upstream, method, "/v1/nothing-here", content=b"raw \x00 bytes")
    assert (response.status_code, response.content) == (404, answer.content)


def test_a_get_without_a_body_is_sent_without_one(proxy, upstream):
    httpx.get(proxy.url + "/files")

    [received] = upstream.requests
    assert received.body == b""
    assert "transfer-encoding" not in received.headers
    assert "content-length" not in received.headers


def test_the_providers_error_status_and_body_come_back_unchanged(proxy, upstream):
    body = {"model": "text-embedding-3-small"}  # no input: the fake's 400

    response = httpx.post(proxy.url + "/embeddings", json=body)

    assert response.status_code == 400
    assert response.content == direct(upstream, "POST", "/v1/embeddings", json=body).content


# -- headers ------------------------------------------------------------------------------------


def test_client_headers_pass_but_hop_by_hop_and_moims_own(proxy, upstream):
    headers = {
        "openai-beta": "assistants=v2",
        "x-custom": "kept",
        "x-memory-user-id": "alice",
        "x-memory-mode": "off",
        "connection": "keep-alive, x-hop",
        "x-hop": "dropped",
        "keep-alive": "timeout=5",
        "te": "trailers",
        "accept-encoding": "gzip",
        "authorization": "Bearer sk-client",
    }

    httpx.get(proxy.url + "/files", headers=headers)

    [received] = upstream.requests
    assert received.headers["openai-beta"] == "assistants=v2"
    assert received.headers["x-custom"] == "kept"
    assert received.headers["authorization"] == "Bearer sk-client"
    assert received.headers["accept-encoding"] == "identity"
    for name in ("x-memory-user-id", "x-memory-mode", "x-hop", "keep-alive", "te"):
        assert name not in received.headers
    assert received.headers["host"] == upstream.url.split("/")[2]


def test_provider_headers_come_back_and_x_request_id_is_moims(proxy, upstream):
    response = httpx.get(proxy.url + "/models/gpt-4o", headers={"x-request-id": "req-42"})

    assert response.status_code == 200
    assert response.json()["owned_by"] == "test"
    assert response.headers["x-request-id"] == "req-42"
    assert response.headers["content-length"] == str(len(response.content))
    assert len(response.headers.get_list("date")) == 1
    assert len(response.headers.get_list("server")) == 1


def test_with_proxy_keys_the_provider_gets_the_configured_key(make_proxy, upstream):
    proxy = make_proxy(
        keys=(ProxyKey("sk-alice-proxy", user_id="alice"),), upstream_api_key="sk-up"
    )

    response = httpx.post(
        proxy.url + "/moderations",
        json={"input": "hello"},
        headers={"authorization": "Bearer sk-alice-proxy", "x-api-key": "sk-alice-proxy"},
    )

    assert response.status_code == 200
    [received] = upstream.requests
    assert received.headers["authorization"] == "Bearer sk-up"
    assert "x-api-key" not in received.headers
    assert "sk-alice-proxy" not in json.dumps(received.headers)


def test_with_proxy_keys_and_no_provider_key_no_key_is_sent(make_proxy, upstream):
    proxy = make_proxy(keys=(ProxyKey("sk-alice-proxy"),))

    httpx.post(
        proxy.url + "/embeddings",
        content=EMBED,
        headers={"authorization": "Bearer sk-alice-proxy", **JSON},
    )

    [received] = upstream.requests
    assert "authorization" not in received.headers


ACCOUNT_ENDPOINTS = [
    ("GET", "/v1/files"),
    ("DELETE", "/v1/files/file-1"),
    ("GET", "/v1/files/file-1/content"),
    ("POST", "/v1/batches"),
    ("GET", "/v1/fine_tuning/jobs"),
    ("POST", "/v1/vector_stores"),
    ("GET", "/v1/responses/resp_1"),
    ("GET", "/v1/chat/completions"),
    ("GET", "/u/alice/v1/uploads"),
    ("GET", "/v1/%66iles"),
]


@pytest.mark.parametrize(("method", "path"), ACCOUNT_ENDPOINTS)
def test_account_endpoints_need_an_admin_key(make_proxy, upstream, method, path):
    keys = (ProxyKey("sk-alice-proxy", user_id="alice"), ProxyKey("sk-unbound-key"))
    proxy = make_proxy(keys=keys, upstream_api_key="sk-up")

    for key in ("sk-alice-proxy", "sk-unbound-key"):
        response = httpx.request(
            method, proxy.root + path, headers={"authorization": f"Bearer {key}"}
        )
        assert_openai_error(response, 403)
        assert response.json()["error"]["code"] in ("account_endpoint_needs_admin", "invalid_path")
    assert upstream.requests == []


def test_an_admin_key_reaches_account_endpoints(make_proxy, upstream):
    proxy = make_proxy(keys=(ProxyKey("sk-admin-proxy", admin=True),), upstream_api_key="sk-up")

    response = httpx.get(proxy.url + "/files", headers={"authorization": "Bearer sk-admin-proxy"})

    assert response.status_code == 200
    [received] = upstream.requests
    assert received.headers["authorization"] == "Bearer sk-up"


def test_account_endpoints_may_be_opened_to_every_key(make_proxy, upstream):
    proxy = make_proxy(
        keys=(ProxyKey("sk-alice-proxy", user_id="alice"),), account_endpoints_for_all_keys=True
    )

    response = httpx.get(proxy.url + "/files", headers={"authorization": "Bearer sk-alice-proxy"})

    assert response.status_code == 200
    assert len(upstream.requests) == 1


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/v1/embeddings"),
        ("POST", "/v1/moderations"),
        ("POST", "/v1/completions"),
        ("POST", "/v1/audio/speech"),
        ("GET", "/v1/models"),
    ],
)
def test_stateless_endpoints_are_open_to_every_key(make_proxy, upstream, method, path):
    proxy = make_proxy(keys=(ProxyKey("sk-alice-proxy", user_id="alice"),))
    body = {"model": "gpt-4o-mini", "input": "hi", "prompt": "hi", "voice": "alloy"}

    response = httpx.request(
        method,
        proxy.root + path,
        json=body if method == "POST" else None,
        headers={"authorization": "Bearer sk-alice-proxy"},
    )

    assert response.status_code == 200, response.text
    assert len(upstream.requests) == 1


@pytest.mark.parametrize(
    ("method", "path"),
    [("POST", "/v1/embeddings"), ("GET", "/v1/files"), ("GET", "/u/alice/v1/audio/x")],
)
def test_with_proxy_keys_a_request_without_one_is_refused(make_proxy, upstream, method, path):
    proxy = make_proxy(keys=(ProxyKey("sk-alice-proxy"),))

    response = httpx.request(method, proxy.root + path, content=EMBED, headers=JSON)

    assert_openai_error(response, 401)
    assert response.headers["x-request-id"]
    assert upstream.requests == []


# -- bodies that are not JSON -------------------------------------------------------------------


def test_multipart_upload_and_binary_download(proxy, upstream):
    content = bytes(range(256)) * 300 + b"\r\n--not-a-boundary\r\n"

    with proxy.client() as client:
        uploaded = client.files.create(file=("data.jsonl", content), purpose="batch")
        listed = client.files.list(purpose="batch")
        downloaded = client.files.content(uploaded.id).read()

    upload = upstream.requests[0]
    assert upload.headers["content-type"].startswith("multipart/form-data; boundary=")
    assert upload.headers["content-length"] == str(len(upload.body))
    assert content in upload.body
    assert (uploaded.filename, uploaded.bytes, uploaded.purpose) == (
        "data.jsonl",
        len(content),
        "batch",
    )
    assert [f.id for f in listed.data] == [uploaded.id]
    assert upstream.requests[1].query == "purpose=batch"
    assert downloaded == content


def test_streamed_upload_without_a_length_is_relayed_as_it_arrives(proxy, upstream):
    parts = [b"first part,", b"\x00\xff second,", b" last"]

    def body():
        yield from parts

    response = httpx.post(proxy.url + "/uploads/up_1/parts", content=body())

    assert response.status_code == 404  # the fake has no such route; what counts is the body
    [received] = upstream.requests
    assert received.body == b"".join(parts)


def test_speech_comes_back_as_the_providers_binary(proxy, upstream):
    with proxy.client() as client:
        audio = client.audio.speech.create(model="tts-1", voice="alloy", input="Grüß Gott")

    assert audio.content == speech_of("Grüß Gott")
    assert audio.response.headers["content-type"] == "audio/mpeg"
    assert upstream.requests[0].path == "/v1/audio/speech"


def test_server_sent_events_keep_their_bytes_and_chunk_boundaries(proxy, upstream):
    body = {"model": "slow", "prompt": "a story about a lighthouse", "stream": True}

    with httpx.stream("POST", proxy.url + "/completions", json=body) as response:
        chunks = list(response.iter_raw())
    answer = direct(upstream, "POST", "/v1/completions", json=body)

    assert response.headers["content-type"].startswith("text/event-stream")
    assert b"".join(chunks) == answer.content
    assert chunks == [event + b"\n\n" for event in answer.content.split(b"\n\n") if event]
    assert chunks[-1] == b"data: [DONE]\n\n"


def test_sdk_streams_legacy_completions(proxy, upstream):
    with proxy.client() as client:
        stream = client.completions.create(model="gpt-4o-mini", prompt="Say hi", stream=True)
        text = "".join(chunk.choices[0].text for chunk in stream)

    assert text == "echo: Say hi"


def test_a_pass_through_says_memory_did_nothing(proxy, upstream):
    """A legacy completion, an embedding, and moim's own refusal of a pass-through: each says
    `x-memory-mode: off`, as a chat request with memory off does (CONTRACT's headers), and
    nothing is stored."""
    with proxy.client() as client:
        legacy = client.completions.with_raw_response.create(model="gpt-4o-mini", prompt="hi")
        embedded = client.embeddings.with_raw_response.create(model="e", input="hi")
    refused = httpx.post(proxy.url + "/embeddings", content=b"{not json", headers=JSON)

    assert legacy.headers["x-memory-mode"] == "off"
    assert embedded.headers["x-memory-mode"] == "off"
    assert_openai_error(refused, 400)
    assert refused.headers["x-memory-mode"] == "off"
    assert stored_messages(proxy) == 0


# -- limits and bad input -----------------------------------------------------------------------


def test_a_declared_body_over_the_limit_is_refused_before_anything_is_sent(make_proxy, upstream):
    proxy = make_proxy(max_body_bytes=1000)

    response = httpx.post(proxy.url + "/files", content=b"x" * 1001)
    as_json = httpx.post(proxy.url + "/embeddings", json={"input": "x" * 1001})

    assert assert_openai_error(response, 413)["code"] == "payload_too_large"
    assert_openai_error(as_json, 413)
    assert upstream.requests == []


def test_a_streamed_body_over_the_limit_is_cut_and_refused(make_proxy, upstream):
    proxy = make_proxy(max_body_bytes=1000)

    def body():
        for _ in range(20):
            yield b"y" * 100

    response = httpx.post(proxy.url + "/files", content=body())

    assert assert_openai_error(response, 413)["code"] == "payload_too_large"
    assert upstream.requests == []  # the fake never received a whole request


def test_a_client_leaving_mid_upload_is_no_error(proxy, upstream, caplog):
    caplog.set_level(logging.INFO, logger="proxy.passthrough")
    host, port = proxy.root.removeprefix("http://").split(":")
    head = f"POST /v1/files HTTP/1.1\r\nhost: {host}\r\ncontent-length: 100000\r\n\r\n"
    with socket.create_connection((host, int(port))) as client:
        client.sendall(head.encode() + b"z" * 5000)
    deadline = time.monotonic() + 30
    while not any("status=499" in r.getMessage() for r in caplog.records):
        assert time.monotonic() < deadline, [r.getMessage() for r in caplog.records]
        time.sleep(0.01)
    after = httpx.get(proxy.url + "/files")  # the proxy goes on serving

    assert after.status_code == 200
    assert [r.body for r in upstream.requests] == [b""]  # only the GET arrived whole
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]


@pytest.mark.parametrize(
    ("body", "param"),
    [
        (b'{"model": "text-embedding-3-small", "input": ', None),
        (b'{"input": "\\ud800"}', None),
        (b'{"model": 42, "input": "x"}', "model"),
        (b'{"model": " ", "input": "x"}', "model"),
    ],
)
def test_bad_json_is_a_400_and_nothing_is_forwarded(proxy, upstream, body, param):
    response = httpx.post(proxy.url + "/embeddings", content=body, headers=JSON)

    error = assert_openai_error(response, 400)
    assert error["param"] == param
    assert upstream.requests == []
    assert stored_messages(proxy) == 0


def test_an_unreachable_upstream_is_a_502(make_proxy, upstream):
    proxy = make_proxy(upstream_base_url="http://127.0.0.1:9/v1")

    response = httpx.post(proxy.url + "/embeddings", content=EMBED, headers=JSON, timeout=10)

    assert assert_openai_error(response, 502)["code"] == "upstream_unreachable"
    assert response.headers["x-request-id"]


def test_without_an_upstream_a_request_moim_cannot_route_is_a_404_naming_it(make_proxy, upstream):
    proxy = make_proxy(upstream_base_url=None)

    response = httpx.get(proxy.url + "/files?purpose=batch")

    error = assert_openai_error(response, 404)
    assert error["code"] == "no_upstream"
    assert "GET /v1/files" in error["message"]


# -- moim's own paths ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("POST", "/v1/memory/stats", 405),
        ("PUT", "/v1/memory/facts", 405),
        ("GET", "/v1/memory", 405),
        ("GET", "/v1/memory/nothing", 404),
        ("POST", "/u/alice/v1/memory/stats", 405),
    ],
)
def test_the_memory_api_is_never_passed_through(proxy, upstream, method, path, status):
    response = httpx.request(method, proxy.root + path)

    error = assert_openai_error(response, status)
    assert path in error["message"]
    assert upstream.requests == []


def test_the_memory_api_under_a_path_user(proxy, upstream):
    fact = {"key": "city", "value": "Lisbon", "category": "personal"}

    created = httpx.post(proxy.root + "/u/alice/v1/memory/facts", json=fact)
    alices = httpx.get(proxy.root + "/u/alice/v1/memory/facts").json()["facts"]
    bobs = httpx.get(proxy.root + "/u/bob/v1/memory/facts").json()["facts"]
    stats = httpx.get(proxy.root + "/u/alice/v1/memory/stats").json()

    assert created.status_code == 200
    assert [(f["key"], f["value"]) for f in alices] == [("city", "Lisbon")]
    assert bobs == []
    assert (stats["user_id"], stats["facts"]) == ("alice", 1)
    assert upstream.requests == []


def test_chat_completions_keep_memory_and_other_methods_on_its_path_pass(proxy, upstream):
    listed = httpx.get(proxy.url + "/chat/completions?limit=2")

    [received] = upstream.requests
    assert (received.method, received.path, received.query) == (
        "GET",
        "/v1/chat/completions",
        "limit=2",
    )
    assert listed.status_code == 404  # what the fake says; memory did nothing
    assert listed.headers["x-memory-mode"] == "off"


# -- models ------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/v1/models/gpt-4o", "/models/gpt-4o", "/u/al/v1/models/gpt-4o"])
def test_retrieve_model_passes_through_to_the_upstream(proxy, upstream, path):
    with proxy.client() as client:
        model = client.models.retrieve("gpt-4o")
    response = httpx.get(proxy.root + path)

    assert model.id == "gpt-4o"
    assert response.content == direct(upstream, "GET", "/v1/models/gpt-4o").content
    assert [r.path for r in upstream.requests] == ["/v1/models/gpt-4o"] * 2


def test_retrieve_an_unknown_model_is_the_upstreams_404(proxy, upstream):
    response = httpx.get(proxy.url + "/models/no-such-model")

    assert assert_openai_error(response, 404)["code"] == "model_not_found"


def test_retrieve_a_model_moim_routes_itself(make_proxy, upstream):
    proxy = make_proxy(routes={"smart": ModelRoute(model="anthropic/claude-sonnet-4")})

    alias = httpx.get(proxy.url + "/models/smart").json()
    provider = httpx.get(proxy.url + "/models/anthropic/claude-sonnet-4").json()

    assert alias == {"id": "smart", "object": "model", "created": 0, "owned_by": "moim"}
    assert provider["id"] == "anthropic/claude-sonnet-4"
    assert provider["owned_by"] == "anthropic"
    assert upstream.requests == []


def test_moims_own_model_answers_say_memory_did_nothing_as_a_pass_through_does(
    make_proxy, upstream
):
    """With an upstream, `GET /v1/models` is relayed and says `x-memory-mode: off`; moim's own
    answers on those routes (a model it routes, the list without an upstream) said nothing."""
    keys = (ProxyKey("sk-alice-proxy"),)
    routes = {"smart": ModelRoute(model="anthropic/claude-sonnet-4")}
    proxy = make_proxy(upstream_base_url=None, routes=routes, keys=keys)
    key = {"authorization": "Bearer sk-alice-proxy", "x-request-id": "req-7"}

    listed = httpx.get(proxy.url + "/models", headers=key)
    retrieved = httpx.get(proxy.url + "/models/smart", headers=key)
    refused = httpx.get(proxy.url + "/models/smart")  # no proxy key: 401, said the same way

    assert [m["id"] for m in listed.json()["data"]] == ["smart"]
    assert retrieved.json()["id"] == "smart"
    assert_openai_error(refused, 401)
    for answer in (listed, retrieved, refused):
        assert answer.headers["x-memory-mode"] == "off"
        assert answer.headers["x-request-id"]
    assert listed.headers["x-request-id"] == retrieved.headers["x-request-id"] == "req-7"
    assert upstream.requests == []


# -- routes through a config alias or litellm ---------------------------------------------------


def test_a_config_alias_goes_to_its_base_url_with_the_model_renamed(make_proxy, upstream):
    route = ModelRoute(
        model="text-embedding-3-large",
        api_base=upstream.url,
        api_key="sk-route",
        openai_compatible=True,
    )
    proxy = make_proxy(upstream_base_url="http://127.0.0.1:9/v1", routes={"embed": route})

    response = httpx.post(proxy.url + "/embeddings", json={"model": "embed", "input": "hi"})

    assert response.status_code == 200
    [received] = upstream.requests
    assert received.json == {"model": "text-embedding-3-large", "input": "hi"}
    assert received.headers["authorization"] == "Bearer sk-route"


@pytest.fixture
def via_litellm(make_proxy, upstream):
    """A proxy whose model `embed` goes through litellm's `openai/` provider to the fake."""
    route = ModelRoute(
        model="openai/text-embedding-3-small", api_base=upstream.url, api_key="sk-up"
    )
    return make_proxy(routes={"embed": route})


def test_embeddings_through_litellm(via_litellm, upstream):
    with via_litellm.client() as client:
        result = client.embeddings.create(model="embed", input=["hello", "world"])
        as_floats = client.embeddings.create(
            model="embed", input="hello", encoding_format="float", dimensions=4
        )

    assert [item.embedding for item in result.data] == [
        embedding_of("hello"),
        embedding_of("world"),
    ]
    assert as_floats.data[0].embedding == embedding_of("hello", 4)
    first, second = upstream.requests
    assert first.json == {"model": "text-embedding-3-small", "input": ["hello", "world"]}
    assert first.headers["authorization"] == "Bearer sk-up"
    assert second.json["dimensions"] == 4
    assert stored_messages(via_litellm) == 0


@pytest.mark.parametrize("field", ["api_base", "base_url", "api_key", "extra_headers", "timeout"])
def test_litellm_embeddings_refuse_routing_and_credentials_from_the_body(
    via_litellm, upstream, field
):
    body = {"model": "embed", "input": "hi", field: "http://127.0.0.1:1/v1"}

    response = httpx.post(via_litellm.url + "/embeddings", json=body)

    error = assert_openai_error(response, 400)
    assert (error["param"], error["code"]) == (field, "unsupported_parameter")
    assert upstream.requests == []


def test_litellm_embeddings_refuse_a_model_name_that_is_an_address(via_litellm, upstream):
    body = {"model": "openai/http://127.0.0.1:1/v1", "input": "hi"}

    response = httpx.post(via_litellm.url + "/embeddings", json=body)

    assert assert_openai_error(response, 400)["code"] == "invalid_model"
    assert upstream.requests == []


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"model": "embed"}, "input"),
        ({"model": "embed", "input": "x", "encoding_format": "hex"}, "encoding_format"),
    ],
)
def test_litellm_embeddings_refuse_bad_input(via_litellm, upstream, body, param):
    response = httpx.post(via_litellm.url + "/embeddings", json=body)

    assert assert_openai_error(response, 400)["param"] == param
    assert upstream.requests == []


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/completions", {"model": "embed", "prompt": "hi"}),
        ("/u/alice/v1/moderations", {"model": "anthropic/claude-sonnet-4", "input": "hi"}),
    ],
)
def test_what_litellm_cannot_translate_is_a_400_naming_the_path(via_litellm, upstream, path, body):
    response = httpx.post(via_litellm.root + path, json=body)

    error = assert_openai_error(response, 400)
    assert error["code"] == "unsupported_endpoint"
    assert f"POST {path}" in error["message"]
    assert upstream.requests == []
