"""Who may read `/metrics`: the global counters are not any one user's to read.

With proxy keys configured, `/metrics` needs an admin key or a metrics key
(`auth.metrics_keys`), unless `server.metrics_public: true` opens it (a Prometheus scraper on
loopback). A key bound to one user, a key with `users` and an unbound key get a 403 in
OpenAI's shape; no key or a wrong one a 401. A metrics key reads `/metrics` and nothing else.
Without proxy keys `/metrics` is open, as every other endpoint is.
"""

import httpx
import pytest

from proxy.config import ProxyKey

KEYS = (
    ProxyKey("sk-alice", user_id="alice"),
    ProxyKey("sk-team", users=("bob", "carol")),
    ProxyKey("sk-service"),
    ProxyKey("sk-admin", admin=True),
    ProxyKey("sk-scrape", metrics_only=True),
)
CHAT = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Hello there"}]}


def metrics(proxy, key=None):
    headers = {"authorization": f"Bearer {key}"} if key else {}
    return httpx.get(proxy.root + "/metrics", headers=headers, timeout=10)


def assert_openai_error(response, status, kind):
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == kind and error["message"]
    assert "moim_" not in response.text


def assert_metrics(response):
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    assert "moim_ingest_pending " in response.text


@pytest.fixture
def keyed(make_proxy):
    return make_proxy(keys=KEYS)


def test_only_an_admin_or_a_metrics_key_reads_metrics(keyed):
    assert_metrics(metrics(keyed, "sk-admin"))
    assert_metrics(metrics(keyed, "sk-scrape"))
    for key in ("sk-alice", "sk-team", "sk-service"):
        assert_openai_error(metrics(keyed, key), 403, "permission_error")
    assert_openai_error(metrics(keyed), 401, "authentication_error")
    assert_openai_error(metrics(keyed, "sk-wrong-key"), 401, "authentication_error")


def test_a_metrics_key_reads_metrics_and_nothing_else(keyed, upstream):
    headers = {"authorization": "Bearer sk-scrape", "x-memory-user-id": "alice"}
    for method, path, body in (
        ("POST", "/v1/chat/completions", CHAT),
        ("POST", "/u/alice/v1/chat/completions", CHAT),
        ("GET", "/v1/models", None),
        ("GET", "/v1/memory/stats", None),
        ("GET", "/v1/memory/export", None),
        ("POST", "/v1/memory/flush", None),
        ("DELETE", "/v1/memory", None),
    ):
        response = httpx.request(method, keyed.root + path, json=body, headers=headers, timeout=30)
        assert_openai_error(response, 403, "permission_error")
    assert upstream.requests == []
    assert keyed.layer.store.messages("alice") == []


def test_metrics_public_opens_metrics_and_nothing_else(make_proxy, upstream):
    proxy = make_proxy(keys=KEYS, metrics_public=True)
    assert_metrics(metrics(proxy))
    assert_metrics(metrics(proxy, "sk-alice"))
    chat = httpx.post(proxy.root + "/v1/chat/completions", json=CHAT, timeout=30)
    assert_openai_error(chat, 401, "authentication_error")
    assert upstream.requests == []


def test_without_proxy_keys_metrics_stay_open(proxy):
    assert_metrics(metrics(proxy))
    assert_metrics(metrics(proxy, "sk-anything"))
