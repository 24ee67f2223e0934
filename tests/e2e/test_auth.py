"""Proxy keys: who may call moim, for which users, and which key the provider sees.

CONTRACT.md, "Chat" (provider key) and "Memory API (same auth as chat)": with `auth.keys`
configured, every endpoint but health needs a proxy key; a key bound to a user overrides any
user header (no spoofing); a key with `users` may act only for those; the provider gets the
configured provider key, never the client's proxy key; keys are never logged (STYLE.md 13).
"""

import logging

import httpx
import pytest
from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import Route

from proxy.config import ProxyKey
from tests.conftest import serve_app

KEYS = (
    ProxyKey("sk-alice", user_id="alice"),
    ProxyKey("sk-team", users=("bob", "carol")),
    ProxyKey("sk-admin", admin=True),
)
PROVIDER_KEY = "sk-provider"
CHAT = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Hello there"}]}
# Every authenticated endpoint: (method, path relative to the root, JSON body or None).
ENDPOINTS = [
    ("POST", "/v1/chat/completions", CHAT),
    ("POST", "/chat/completions", CHAT),
    ("POST", "/u/alice/v1/chat/completions", CHAT),
    ("GET", "/v1/models", None),
    ("GET", "/models", None),
    ("GET", "/u/alice/v1/models", None),
    ("GET", "/v1/memory/stats", None),
    ("POST", "/v1/memory/flush", None),
    ("GET", "/v1/memory/search?q=hello", None),
    ("GET", "/v1/memory/facts", None),
    ("POST", "/v1/memory/facts", {"key": "city", "value": "Paris", "category": "personal"}),
    ("DELETE", "/v1/memory/facts/city", None),
    ("GET", "/v1/memory/facts/city/history", None),
    ("POST", "/v1/memory/facts/city/pin", None),
    ("POST", "/v1/memory/facts/city/unpin", None),
    ("DELETE", "/v1/memory", None),
    ("GET", "/v1/memory/export", None),
    ("POST", "/v1/memory/import", None),
    ("GET", "/metrics", None),
    ("GET", "/v1/models/gpt-4o", None),
    ("GET", "/u/alice/v1/memory/stats", None),
    # passed through to the provider once authenticated (tests/e2e/test_passthrough.py)
    ("POST", "/v1/embeddings", {"model": "text-embedding-3-small", "input": "hi"}),
    ("POST", "/u/alice/v1/moderations", {"input": "hi"}),
    ("GET", "/v1/files?purpose=batch", None),
    ("DELETE", "/v1/files/file-1", None),
]


@pytest.fixture
def keyed(make_proxy):
    return make_proxy(keys=KEYS, upstream_api_key=PROVIDER_KEY)


def call(proxy, method, path, body=None, key=None, headers=None):
    headers = dict(headers or {})
    if key is not None:
        headers["authorization"] = f"Bearer {key}"
    return httpx.request(method, proxy.root + path, json=body, headers=headers, timeout=30)


def assert_openai_error(response, status):
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert isinstance(error["message"], str) and error["message"]


def chat_as(proxy, key, text, headers=None, path="/v1/chat/completions"):
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": text}]}
    return call(proxy, "POST", path, body, key=key, headers=headers)


# -- who may call ------------------------------------------------------------------------------


@pytest.mark.parametrize(("method", "path", "body"), ENDPOINTS)
def test_no_key_is_refused_with_an_openai_shaped_401(keyed, upstream, method, path, body):
    assert_openai_error(call(keyed, method, path, body), 401)
    assert upstream.requests == []


@pytest.mark.parametrize(("method", "path", "body"), ENDPOINTS)
def test_wrong_key_is_refused_with_an_openai_shaped_401(keyed, upstream, method, path, body):
    assert_openai_error(call(keyed, method, path, body, key="sk-wrong"), 401)
    assert_openai_error(call(keyed, method, path, body, key=PROVIDER_KEY), 401)
    assert upstream.requests == []


def test_no_key_is_refused_even_when_a_configured_key_is_empty(make_proxy, upstream):
    """Config refuses "" (tests/proxy/test_config.py); a `Config` built in code may hold one."""
    proxy = make_proxy(keys=(ProxyKey(""), ProxyKey("sk-alice", user_id="alice")))
    for headers in ({}, {"authorization": ""}, {"authorization": "Bearer"}, {"x-api-key": ""}):
        assert_openai_error(call(proxy, "POST", "/v1/chat/completions", CHAT, headers=headers), 401)
        assert_openai_error(call(proxy, "GET", "/v1/memory/stats", headers=headers), 401)
    assert upstream.requests == []
    assert chat_as(proxy, "sk-alice", "hi").status_code == 200


def test_a_key_that_is_a_prefix_of_a_real_key_is_refused(keyed):
    assert_openai_error(chat_as(keyed, "sk-alic", "hi"), 401)
    assert_openai_error(chat_as(keyed, "sk-alice2", "hi"), 401)
    assert_openai_error(
        call(keyed, "GET", "/v1/models", headers={"authorization": "sk-alice"}), 401
    )


def test_unauthenticated_garbage_body_is_refused_before_it_is_parsed(keyed, upstream):
    """Authentication comes first: a caller without a key learns nothing about body rules."""
    response = httpx.post(
        keyed.root + "/v1/chat/completions",
        content=b"{not json",
        headers={"content-type": "application/json"},
    )
    assert_openai_error(response, 401)
    assert upstream.requests == []


@pytest.mark.parametrize("path", ["/health", "/health/liveliness", "/health/readiness"])
def test_health_needs_no_key(keyed, path):
    response = httpx.get(keyed.root + path, timeout=10)
    assert response.status_code == 200
    assert response.json()["status"] == "ok"


def test_a_valid_key_may_also_come_as_x_api_key(keyed):
    response = httpx.get(keyed.root + "/v1/models", headers={"x-api-key": "sk-alice"})
    assert response.status_code == 200
    assert {m["id"] for m in response.json()["data"]} >= {"gpt-4o-mini"}


# -- for which users ---------------------------------------------------------------------------


def test_a_key_bound_to_alice_reads_and_writes_alice_whatever_the_headers_say(keyed, upstream):
    spoof = {
        "x-memory-user-id": "mallory",
        "x-sm-user-id": "mallory",
        "x-openwebui-user-id": "mallory",
    }
    first = chat_as(keyed, "sk-alice", "My favourite colour is ultramarine blue", spoof)
    assert first.status_code == 200, first.text
    keyed.flush()

    stored = keyed.layer.store.messages("alice")
    assert [(m.role, m.content) for m in stored] == [
        ("user", "My favourite colour is ultramarine blue"),
        ("assistant", "echo: My favourite colour is ultramarine blue"),
    ]
    assert keyed.layer.store.messages("mallory") == []

    # The path form and the body's `user` cannot redirect it either.
    body = {
        **CHAT,
        "user": "mallory",
        "messages": [{"role": "user", "content": "What is my favourite colour?"}],
    }
    second = call(
        keyed, "POST", "/u/mallory/v1/chat/completions", body, key="sk-alice", headers=spoof
    )
    assert second.status_code == 200, second.text
    assert "ultramarine" in upstream.last_json["messages"][0]["content"]  # alice's memory
    keyed.flush()
    assert keyed.layer.store.messages("mallory") == []
    assert len(keyed.layer.store.messages("alice")) == 4

    stats = call(keyed, "GET", "/v1/memory/stats", key="sk-alice", headers=spoof)
    assert stats.json()["user_id"] == "alice"
    assert stats.json()["messages"] == 4
    search = call(keyed, "GET", "/v1/memory/search?q=colour", key="sk-alice", headers=spoof)
    assert search.status_code == 200
    assert any("ultramarine" in hit["text"] for hit in search.json()["results"])


def test_a_key_bound_to_alice_cannot_delete_mallorys_memory(keyed):
    assert (
        chat_as(
            keyed, "sk-admin", "Mallory keeps a pet ferret", {"x-memory-user-id": "mallory"}
        ).status_code
        == 200
    )
    keyed.flush()
    before = len(keyed.layer.store.messages("mallory"))
    assert before == 2
    response = call(
        keyed, "DELETE", "/v1/memory", key="sk-alice", headers={"x-memory-user-id": "mallory"}
    )
    assert response.status_code == 200
    assert response.json()["user_id"] == "alice"
    assert len(keyed.layer.store.messages("mallory")) == before


def test_a_key_for_bob_and_carol_may_act_for_them_only(keyed):
    for user in ("bob", "carol"):
        response = chat_as(keyed, "sk-team", f"I am {user}", {"x-memory-user-id": user})
        assert response.status_code == 200, response.text
    assert_openai_error(chat_as(keyed, "sk-team", "I am dave", {"x-memory-user-id": "dave"}), 403)
    assert_openai_error(chat_as(keyed, "sk-team", "no user header"), 403)
    assert_openai_error(chat_as(keyed, "sk-team", "path", path="/u/dave/v1/chat/completions"), 403)
    keyed.flush()
    assert [m.content for m in keyed.layer.store.messages("bob")] == ["I am bob", "echo: I am bob"]
    assert len(keyed.layer.store.messages("carol")) == 2
    assert keyed.layer.store.messages("dave") == []
    assert keyed.layer.store.messages("default") == []

    bob = call(keyed, "GET", "/v1/memory/stats", key="sk-team", headers={"x-memory-user-id": "bob"})
    assert bob.status_code == 200 and bob.json()["messages"] == 2
    for method, path in (
        ("GET", "/v1/memory/stats"),
        ("GET", "/v1/memory/export"),
        ("GET", "/v1/memory/search?q=dave"),
        ("DELETE", "/v1/memory"),
    ):
        response = call(keyed, method, path, key="sk-team", headers={"x-memory-user-id": "dave"})
        assert_openai_error(response, 403)


def test_an_admin_key_may_act_for_anyone(keyed):
    response = chat_as(keyed, "sk-admin", "I am dave", {"x-memory-user-id": "dave"})
    assert response.status_code == 200
    keyed.flush()
    assert len(keyed.layer.store.messages("dave")) == 2


# -- which key the provider sees ---------------------------------------------------------------


def test_the_provider_gets_the_configured_key_never_the_proxy_key(keyed, upstream):
    for key in ("sk-alice", "sk-team", "sk-admin"):
        headers = {"x-memory-user-id": "bob"} if key == "sk-team" else {}
        assert chat_as(keyed, key, "Hello", headers).status_code == 200
        assert upstream.requests[-1].headers["authorization"] == f"Bearer {PROVIDER_KEY}"
        with keyed.client(api_key=key, default_headers=headers) as client:
            client.chat.completions.create(
                model="gpt-4o-mini", stream=True, messages=[{"role": "user", "content": "Hi"}]
            ).close()
            assert upstream.requests[-1].headers["authorization"] == f"Bearer {PROVIDER_KEY}"
            client.models.list()
            assert upstream.requests[-1].path == "/v1/models"
            assert upstream.requests[-1].headers["authorization"] == f"Bearer {PROVIDER_KEY}"
    for recorded in upstream.requests:
        assert not any(key.key in value for key in KEYS for value in recorded.headers.values())
        assert not any(key.key.encode() in recorded.body for key in KEYS)


def test_with_keys_the_client_does_not_pick_the_providers_organisation_or_project(
    keyed, upstream, proxy
):
    account = {"organization": "org-client", "project": "proj-client"}
    for route in (keyed, proxy):  # with keys, then without (the client's own provider key)
        with route.client(api_key="sk-alice", **account) as client:
            client.chat.completions.create(
                model="gpt-4o-mini", messages=[{"role": "user", "content": "Hi"}]
            )
            chat = upstream.requests[-1].headers
            client.models.list()
            passed = upstream.requests[-1].headers
        sent = [chat.get(name) for name in ("openai-organization", "openai-project")] + [
            passed.get(name) for name in ("openai-organization", "openai-project")
        ]
        expected = [None] * 4 if route is keyed else ["org-client", "proj-client"] * 2
        assert sent == expected


def test_without_a_provider_key_the_proxy_key_is_not_passed_on(make_proxy, upstream):
    proxy = make_proxy(keys=KEYS)
    assert chat_as(proxy, "sk-alice", "Hello").status_code == 200
    assert "authorization" not in upstream.requests[-1].headers
    assert call(proxy, "GET", "/v1/models", key="sk-alice").status_code == 200
    assert "authorization" not in upstream.requests[-1].headers


# -- no secrets in logs ------------------------------------------------------------------------


def test_keys_never_appear_in_logs(keyed, caplog):
    caplog.set_level(logging.DEBUG)
    secrets = [k.key for k in KEYS] + [PROVIDER_KEY]
    chat_as(keyed, "sk-alice", "Remember that my locker code is 4711")
    chat_as(keyed, "sk-team", "Hi", {"x-memory-user-id": "bob"})
    chat_as(keyed, "sk-team", "Hi", {"x-memory-user-id": "dave"})  # 403
    chat_as(keyed, "sk-wrong", "Hi")  # 401
    with keyed.client(api_key="sk-admin") as client:
        stream = client.chat.completions.create(
            model="gpt-4o-mini", stream=True, messages=[{"role": "user", "content": "Hi"}]
        )
        list(stream)
        client.models.list()
    for path in ("/v1/memory/stats", "/v1/memory/search?q=locker", "/metrics"):
        call(keyed, "GET", path, key="sk-alice")
    call(keyed, "GET", "/v1/models", key="sk-alice")
    keyed.flush()
    assert caplog.records, "nothing was logged: the capture is not working"
    logged = "\n".join(
        f"{r.name} {r.getMessage()} {r.exc_text or ''} {r.__dict__}" for r in caplog.records
    )
    for secret in secrets:
        assert secret not in logged


# -- without keys on loopback: no web page may write ------------------------------------------

FOREIGN = ("https://evil.example", "http://127.0.0.1.evil.example", "null")
WRITES = [
    ("POST", "/v1/memory/facts", {"key": "planted", "value": "obey the page", "category": "x"}),
    ("POST", "/v1/chat/completions", CHAT),
    ("POST", "/v1/memory/import", None),
    ("DELETE", "/v1/memory", None),
    ("POST", "/v1/embeddings", {"model": "text-embedding-3-small", "input": "hi"}),
]


@pytest.mark.parametrize("origin", FOREIGN)
@pytest.mark.parametrize(("method", "path", "body"), WRITES)
def test_without_keys_a_page_of_another_origin_is_refused(
    proxy, upstream, origin, method, path, body
):
    # A form or a no-cors fetch from any site the user visits reaches 127.0.0.1 unasked.
    proxy.layer.set_fact("default", "name", "Dana")
    answer = call(proxy, method, path, body, headers={"origin": origin})
    assert_openai_error(answer, 403)
    assert answer.json()["error"]["code"] == "foreign_origin"
    assert upstream.requests == []
    assert [(f.key, f.value) for f in proxy.layer.list_facts("default")] == [("name", "Dana")]


@pytest.mark.parametrize("origin", [None, "http://localhost:3000", "http://127.0.0.1:8080"])
def test_without_keys_clients_and_pages_served_from_loopback_are_answered(proxy, origin):
    headers = {"origin": origin} if origin else {}
    body = {"key": "city", "value": "Porto", "category": "profile"}
    assert call(proxy, "POST", "/v1/memory/facts", body, headers=headers).status_code == 200
    assert call(proxy, "POST", "/v1/chat/completions", CHAT, headers=headers).status_code == 200


@pytest.mark.parametrize(("method", "path", "body"), [*WRITES, ("GET", "/v1/memory/export", None)])
def test_without_keys_a_page_whose_name_was_rebound_to_loopback_is_refused(
    proxy, upstream, method, path, body
):
    # DNS rebinding: evil.example now resolves to 127.0.0.1; the page's requests are then
    # same-origin (no Origin on a GET) and it reads the answers, but its Host is its own name.
    proxy.layer.set_fact("default", "name", "Dana")
    answer = call(proxy, method, path, body, headers={"host": "evil.example:8080"})
    assert_openai_error(answer, 403)
    assert answer.json()["error"]["code"] == "foreign_host"
    assert "Dana" not in answer.text and upstream.requests == []
    assert [(f.key, f.value) for f in proxy.layer.list_facts("default")] == [("name", "Dana")]
    for host in ("localhost:8080", "127.0.0.1", "[::1]:8080"):
        assert call(proxy, "GET", "/v1/memory/stats", headers={"host": host}).status_code == 200


def test_with_keys_the_key_decides_whatever_the_origin(keyed):
    answer = chat_as(keyed, "sk-alice", "hello", headers={"origin": "https://evil.example"})
    assert answer.status_code == 200


# -- a browser's CORS preflight ------------------------------------------------------------------


class CorsProvider:
    """A provider that answers a CORS preflight as OpenAI's API does (any origin, the headers
    asked for), and keeps the header lines of each it gets."""

    def __init__(self):
        self.preflights = []

    async def preflight(self, request):
        self.preflights.append(dict(request.headers))
        allowed = {
            "access-control-allow-origin": request.headers["origin"],
            "access-control-allow-methods": "GET, POST, OPTIONS",
            "access-control-allow-headers": request.headers["access-control-request-headers"],
            "access-control-max-age": "600",
        }
        return Response(status_code=200, headers=allowed)


PREFLIGHT = {
    "origin": "https://app.example",
    "access-control-request-method": "POST",
    "access-control-request-headers": "authorization, content-type, x-memory-user-id",
}


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/responses", "/v1/embeddings"])
def test_with_keys_a_browsers_preflight_reaches_the_provider_without_credentials(make_proxy, path):
    """A browser sends no credentials on a preflight and calls nothing until it is answered:
    a 401 kept every browser app from calling moim with its key."""
    provider = CorsProvider()
    app = Starlette(routes=[Route("/v1/{path:path}", provider.preflight, methods=["OPTIONS"])])
    with serve_app(app) as root:
        proxy = make_proxy(keys=KEYS, upstream_base_url=root + "/v1", upstream_api_key="sk-up")

        answer = httpx.request("OPTIONS", proxy.root + path, headers=PREFLIGHT)

    assert answer.status_code == 200, answer.text
    assert answer.headers["access-control-allow-origin"] == "https://app.example"
    assert "x-memory-user-id" in answer.headers["access-control-allow-headers"]
    (sent,) = provider.preflights
    assert sent["access-control-request-method"] == "POST"
    assert "authorization" not in sent  # not the configured provider key either


def test_with_keys_a_preflight_carries_no_credentials_of_the_upstream_url(make_proxy):
    """A base URL may hold a gateway's credentials (`user:password@`), which httpx sends as
    Basic auth: anyone, with no key, could send them with an OPTIONS request of any path and
    headers (an `X-HTTP-Method-Override`, say) by naming an origin and a method."""
    provider = CorsProvider()
    app = Starlette(routes=[Route("/v1/{path:path}", provider.preflight, methods=["OPTIONS"])])
    with serve_app(app) as root:
        base = root.replace("http://", "http://gateway:sk-in-the-url@") + "/v1"
        proxy = make_proxy(keys=KEYS, upstream_base_url=base, upstream_api_key="sk-up")

        answer = httpx.request("OPTIONS", proxy.root + "/v1/files/file-1", headers=PREFLIGHT)

    assert answer.status_code == 200, answer.text
    (sent,) = provider.preflights
    assert "authorization" not in sent


@pytest.mark.parametrize(
    ("headers", "body"),
    [({"origin": "https://a.b"}, None), (PREFLIGHT, CHAT)],
    ids=["no-request-method", "with-a-body"],
)
def test_with_keys_an_options_request_that_is_no_preflight_needs_a_key(
    keyed, upstream, headers, body
):
    """A browser's preflight names the method it asks for, and has no body."""
    answer = call(keyed, "OPTIONS", "/v1/chat/completions", body, headers=headers)
    assert_openai_error(answer, 401)
    assert upstream.requests == []


@pytest.mark.parametrize("origin", FOREIGN)
def test_without_keys_a_preflight_from_another_origin_is_still_refused(proxy, upstream, origin):
    answer = call(proxy, "OPTIONS", "/v1/chat/completions", headers={**PREFLIGHT, "origin": origin})
    assert_openai_error(answer, 403)
    assert answer.json()["error"]["code"] == "foreign_origin"
    assert upstream.requests == []
