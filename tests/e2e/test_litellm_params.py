"""What of a client's body may reach litellm (proxy/litellm_params.py), what its errors show.

litellm takes routing and credentials (`api_base`, `base_url`, `api_key`, `extra_headers`, …)
from the same keyword arguments as the request's parameters, so a body passed whole let a client
send the operator's provider key to any address. Here a second stand-in server plays the
attacker: it must receive nothing, whatever the body says.
"""

import json
import socket

import httpx
import pytest

from proxy.config import ModelRoute, ProxyKey
from tests.upstream import serve_upstream

OPERATOR_KEY = "sk-operator-secret"
ALIAS_KEY = "sk-alias-secret"
KEYS = (ProxyKey("sk-bound-alice", user_id="alice"), ProxyKey("sk-admin-key", admin=True))
BOUND = {"authorization": "Bearer sk-bound-alice"}
HELLO = [{"role": "user", "content": "Hello"}]
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


@pytest.fixture(scope="module")
def attacker_server():
    with serve_upstream() as server:
        yield server


@pytest.fixture
def attacker(attacker_server):
    """A recording server at an address of the client's choosing; it must hear nothing."""
    attacker_server.reset()
    return attacker_server


@pytest.fixture
def operator_key(monkeypatch):
    """The operator's OpenAI key, in the environment where litellm finds it."""
    monkeypatch.setenv("OPENAI_API_KEY", OPERATOR_KEY)


def post(proxy, body, headers=BOUND):
    return httpx.post(proxy.url + "/chat/completions", json=body, headers=headers, timeout=30)


def assert_refused(response, param):
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert error["param"] == param
    assert f"'{param}'" in error["message"]


def test_api_base_cannot_send_the_operator_key_elsewhere(make_proxy, attacker, operator_key):
    proxy = make_proxy(keys=KEYS)
    body = {"model": "openai/gpt-4o-mini", "messages": HELLO, "api_base": attacker.url}

    response = post(proxy, body)
    proxy.flush()

    assert_refused(response, "api_base")
    assert attacker.requests == []
    assert proxy.layer.store.messages("alice") == []


def test_base_url_cannot_override_an_alias_base(make_proxy, upstream, attacker):
    # litellm lets `base_url` win over `api_base`, so the alias's own key went with it
    route = ModelRoute(model="openai/gpt-4o-mini", api_base=upstream.url, api_key=ALIAS_KEY)
    proxy = make_proxy(keys=KEYS, routes={"team-model": route})
    body = {"model": "team-model", "messages": HELLO, "base_url": attacker.url}

    response = post(proxy, body)

    assert_refused(response, "base_url")
    assert attacker.requests == []
    assert upstream.requests == []


def test_an_alias_key_does_not_follow_a_client_api_base(make_proxy, attacker):
    route = ModelRoute(model="openai/gpt-4o-mini", api_key=ALIAS_KEY)  # litellm's default base
    proxy = make_proxy(keys=KEYS, routes={"team-model": route})
    body = {"model": "team-model", "messages": HELLO, "api_base": attacker.url}

    response = post(proxy, body)

    assert_refused(response, "api_base")
    assert attacker.requests == []


def test_no_upstream_url_plain_model_and_api_base(make_proxy, attacker, operator_key):
    proxy = make_proxy(keys=KEYS, upstream_base_url=None)
    body = {"model": "gpt-4o-mini", "messages": HELLO, "api_base": attacker.url}

    response = post(proxy, body)

    assert_refused(response, "api_base")
    assert attacker.requests == []


@pytest.mark.parametrize(
    ("param", "value"),
    [
        ("api_key", "sk-chosen-by-client"),
        ("extra_headers", {"x-forwarded-host": "attacker"}),
        ("custom_llm_provider", "oobabooga"),
        ("api_version", "2024-01-01"),
        ("aws_region_name", "us-east-1"),
        ("vertex_project", "someone-else"),
        ("timeout", 0.001),
        ("num_retries", 50),
        ("mock_response", "a reply moim never asked for"),
        ("extra_body", {"api_base": "http://elsewhere"}),
    ],
)
def test_litellm_only_parameters_are_refused_naming_them(
    make_proxy, upstream, attacker, operator_key, param, value
):
    route = ModelRoute(model="openai/gpt-4o-mini", api_base=upstream.url, api_key=ALIAS_KEY)
    proxy = make_proxy(keys=KEYS, routes={"team-model": route})
    body = {"model": "team-model", "messages": HELLO, param: value}

    response = post(proxy, body)

    assert_refused(response, param)
    assert upstream.requests == [] and attacker.requests == []


def test_a_model_name_that_is_an_address_is_refused(make_proxy, attacker):
    # some litellm providers (oobabooga, huggingface) take a URL in the model name as the base
    proxy = make_proxy(keys=KEYS, upstream_base_url=None)
    body = {"model": "oobabooga/" + attacker.url + "/chat/completions", "messages": HELLO}

    response = post(proxy, body)

    assert_refused(response, "model")
    assert attacker.requests == []


def test_openai_parameters_still_reach_the_provider_through_litellm(make_proxy, upstream):
    route = ModelRoute(model="openai/gpt-4o-mini", api_base=upstream.url, api_key=ALIAS_KEY)
    proxy = make_proxy(keys=KEYS, routes={"team-model": route})
    body = {
        "model": "team-model",
        "messages": HELLO,
        "temperature": 0.25,
        "max_tokens": 17,
        "seed": 7,
        "stop": ["\n\n"],
        "user": "alice",
        "metadata": {"purpose": "litellm bookkeeping, never sent"},
    }

    response = post(proxy, body)

    assert response.status_code == 200, response.text
    assert response.json()["choices"][0]["message"]["content"] == "echo: Hello"
    sent = upstream.last_json
    assert {k: sent[k] for k in ("temperature", "max_tokens", "seed", "stop", "user")} == {
        "temperature": 0.25,
        "max_tokens": 17,
        "seed": 7,
        "stop": ["\n\n"],
        "user": "alice",
    }
    assert "metadata" not in sent
    assert upstream.requests[-1].headers["authorization"] == f"Bearer {ALIAS_KEY}"


def test_the_byte_path_ignores_routing_fields_in_the_body(make_proxy, upstream, attacker):
    # an OpenAI-compatible upstream gets the body as bytes; its URL and key come from config
    proxy = make_proxy(keys=KEYS, upstream_api_key=OPERATOR_KEY)
    body = {"model": "gpt-4o-mini", "messages": HELLO, "api_base": attacker.url}
    body |= {"base_url": attacker.url, "extra_headers": {"host": "attacker"}}

    response = post(proxy, body)

    assert response.status_code == 200, response.text
    assert attacker.requests == []
    assert upstream.last_json["api_base"] == attacker.url  # forwarded unchanged, not obeyed
    assert upstream.requests[-1].headers["authorization"] == f"Bearer {OPERATOR_KEY}"


# -- errors ------------------------------------------------------------------------------------

LITELLM_NOISE = (
    "Traceback",
    "site-packages",
    ".py",
    "Give Feedback",
    "Get Help",
    "turn_on_debug",
    "litellm.",
)


def test_a_litellm_failure_reaches_the_client_without_traceback_or_banner(
    make_proxy, upstream, capfd
):
    # litellm's Anthropic translation fails on an unknown content part, before any request,
    # and raised it with a traceback and a bug-report notice in the message
    route = ModelRoute(model="anthropic/claude-3-5-sonnet", api_base=upstream.url, api_key="sk")
    proxy = make_proxy(routes={"claude": route})
    body = {"model": "claude", "messages": [{"role": "user", "content": [{"type": "weird"}]}]}

    response = post(proxy, body, headers={})

    assert 400 <= response.status_code < 600
    error = response.json()["error"]
    assert sorted(error) == ["code", "message", "param", "type"]
    assert error["message"] and "\n" not in error["message"]
    assert not [noise for noise in LITELLM_NOISE if noise in response.text]
    assert "Give Feedback" not in capfd.readouterr().out
    assert upstream.requests == []


def test_a_provider_error_through_litellm_keeps_its_status_and_words(make_proxy, upstream):
    route = ModelRoute(model="openai/error-429", api_base=upstream.url, api_key="sk-up")
    proxy = make_proxy(routes={"limited": route})

    response = post(proxy, {"model": "limited", "messages": HELLO}, headers={})

    assert response.status_code == 429
    assert response.json() == {
        "error": {
            "message": "Rate limit reached (test).",
            "type": "requests",
            "param": None,
            "code": "rate_limit_exceeded",
        }
    }


def test_an_unreachable_provider_through_litellm_is_a_502(make_proxy):
    with socket.socket() as closed:  # bound, never listening: connections are refused
        closed.bind(("127.0.0.1", 0))
        address = f"http://127.0.0.1:{closed.getsockname()[1]}/v1"
        route = ModelRoute(model="openai/gpt-4o-mini", api_base=address, api_key="sk-up")
        proxy = make_proxy(routes={"down": route})

        response = post(proxy, {"model": "down", "messages": HELLO}, headers={})

    assert response.status_code == 502
    assert response.json() == {
        "error": {
            "message": "upstream unreachable: ConnectError",
            "type": "upstream_error",
            "param": None,
            "code": "upstream_unreachable",
        }
    }


# -- tools -------------------------------------------------------------------------------------


def test_tools_through_litellm_answer_with_the_tool_call(make_proxy, upstream):
    # litellm 1.106.2 imported its MCP gateway (and the absent `mcp` package) for any `tools`
    route = ModelRoute(model="openai/tool-call", api_base=upstream.url, api_key="sk-up")
    proxy = make_proxy(upstream_base_url=None, routes={"weather": route})
    body = {"model": "weather", "messages": HELLO, "tools": [WEATHER_TOOL]}

    response = post(proxy, body, headers={})

    assert response.status_code == 200, response.text
    choice = response.json()["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    call = choice["message"]["tool_calls"][0]
    assert call["function"] == {"name": "get_weather", "arguments": '{"city":"Paris"}'}
    assert upstream.last_json["tools"] == [WEATHER_TOOL]


def test_an_mcp_tool_goes_to_the_provider_not_to_litellm_gateway(make_proxy, upstream, attacker):
    # litellm would run its own MCP gateway for such a tool (it needs `mcp` and `fastapi`)
    route = ModelRoute(model="openai/gpt-4o-mini", api_base=upstream.url, api_key="sk-up")
    proxy = make_proxy(upstream_base_url=None, routes={"mcp-model": route})
    tool = {"type": "mcp", "server_label": "x", "server_url": attacker.url + "/mcp/x"}

    response = post(proxy, {"model": "mcp-model", "messages": HELLO, "tools": [tool]}, headers={})

    assert response.status_code == 200, response.text
    assert upstream.last_json["tools"] == [tool]
    assert attacker.requests == []


def test_streamed_tools_through_litellm(make_proxy, upstream):
    route = ModelRoute(model="openai/tool-call", api_base=upstream.url, api_key="sk-up")
    proxy = make_proxy(upstream_base_url=None, routes={"weather": route})
    body = {"model": "weather", "messages": HELLO, "tools": [WEATHER_TOOL], "stream": True}

    with httpx.stream("POST", proxy.url + "/chat/completions", json=body, timeout=30) as response:
        data = response.read()

    assert response.status_code == 200, data
    events = [
        json.loads(line[6:])
        for line in data.decode().splitlines()
        if line.startswith("data: ") and line != "data: [DONE]"
    ]
    deltas = [e["choices"][0]["delta"] for e in events if e["choices"]]
    calls = [c for d in deltas for c in d.get("tool_calls") or []]
    assert calls[0]["function"]["name"] == "get_weather"
    assert "".join(c["function"].get("arguments") or "" for c in calls) == '{"city":"Paris"}'
