"""Without proxy keys on a bind other than loopback, no web page may write or read memory.

The Docker image binds 0.0.0.0 (`docker run -p 127.0.0.1:8080:8080` still reaches it from
loopback only): a page the user visits posts to it unasked, and a page whose DNS name is
rebound to its address reads `/v1/memory/export`. Clients that are no browser send no
`Origin`, and name moim by an address or by a name no public DNS answers (`moim` in a
compose network, `host.docker.internal`). The proxy is configured with `host: 0.0.0.0`
(served on a loopback port: the rule reads the configured bind, not the socket).
"""

import httpx
import pytest

from tests.e2e.test_auth import CHAT, FOREIGN, WRITES, assert_openai_error, call
from tests.e2e.test_mcp import INITIALIZE


@pytest.fixture
def open_bind(make_proxy):
    return make_proxy(host="0.0.0.0")


@pytest.mark.parametrize("origin", [*FOREIGN, "http://192.168.1.5:8080"])
@pytest.mark.parametrize(("method", "path", "body"), WRITES)
def test_a_page_of_another_origin_is_refused(open_bind, upstream, origin, method, path, body):
    open_bind.layer.set_fact("default", "name", "Dana")
    answer = call(open_bind, method, path, body, headers={"origin": origin})
    assert_openai_error(answer, 403)
    assert answer.json()["error"]["code"] == "foreign_origin"
    assert upstream.requests == []
    assert [(f.key, f.value) for f in open_bind.layer.list_facts("default")] == [("name", "Dana")]


@pytest.mark.parametrize(("method", "path", "body"), [*WRITES, ("GET", "/v1/memory/export", None)])
def test_a_page_whose_name_was_rebound_to_moim_is_refused(open_bind, upstream, method, path, body):
    # evil.example now resolves to moim's address: its GETs are same-origin (no Origin).
    open_bind.layer.set_fact("default", "name", "Dana")
    answer = call(open_bind, method, path, body, headers={"host": "evil.example:8080"})
    assert_openai_error(answer, 403)
    assert answer.json()["error"]["code"] == "foreign_host"
    assert "Dana" not in answer.text and upstream.requests == []
    assert [(f.key, f.value) for f in open_bind.layer.list_facts("default")] == [("name", "Dana")]


HOSTS = (
    "127.0.0.1:8080",
    "localhost:8080",
    "192.168.1.5:8080",
    "[fd00::5]:8080",
    "moim:8080",
    "host.docker.internal:8080",
    "studio.local",
)


@pytest.mark.parametrize("host", HOSTS)
def test_clients_naming_moim_by_address_or_private_name_are_answered(open_bind, host):
    open_bind.layer.set_fact("default", "name", "Dana")
    answer = call(open_bind, "GET", "/v1/memory/export", headers={"host": host})
    assert answer.status_code == 200 and "Dana" in answer.text
    chat = call(open_bind, "POST", "/v1/chat/completions", CHAT, headers={"host": host})
    assert chat.status_code == 200


def test_pages_served_from_loopback_are_answered(open_bind):
    answer = call(
        open_bind, "POST", "/v1/chat/completions", CHAT, headers={"origin": "http://localhost:3000"}
    )
    assert answer.status_code == 200


def test_a_configured_host_name_is_answered(make_proxy):
    proxy = make_proxy(host="moim.example.org")
    answer = call(proxy, "GET", "/v1/memory/stats", headers={"host": "moim.example.org:8080"})
    assert answer.status_code == 200


def test_mcp_refuses_a_foreign_origin_and_a_rebound_name(open_bind):
    accept = {"Accept": "application/json, text/event-stream"}

    def post(headers):
        return httpx.post(open_bind.root + "/mcp", json=INITIALIZE, headers={**accept, **headers})

    assert post({"Origin": "http://evil.example"}).status_code == 403
    assert post({"Host": "evil.example:8080"}).status_code == 403
    assert post({"Host": "moim:8080"}).status_code == 200
