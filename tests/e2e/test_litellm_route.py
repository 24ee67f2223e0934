"""A config route through litellm: same OpenAI answer for the client, same memory behaviour.

CONTRACT.md, "Model routing": config.yaml may send a model name through litellm; the body the
provider then receives is litellm's translation of the client's body plus the block. Here
litellm's `openai/…` provider talks to the same fake upstream, so both ends can be checked.
"""

import json
import logging
import sys
import threading
import time

import httpx
import pytest

from proxy.config import ModelRoute

BLOCK_START = "=== Memory Context ==="
BLOCK_END = "=== End Memory ==="


@pytest.fixture
def routed(make_proxy, upstream):
    """A proxy whose model `via-litellm` goes through litellm to the fake upstream."""
    route = ModelRoute(model="openai/gpt-4o-mini", api_base=upstream.url, api_key="sk-up")
    return make_proxy(routes={"via-litellm": route})


@pytest.fixture
def litellm_not_yet_imported():
    """Skip unless this process has not loaded litellm yet (set up before the proxy starts)."""
    if "litellm" in sys.modules:
        pytest.skip("litellm was already imported in this process")


def test_first_litellm_call_does_not_freeze_other_streams(
    litellm_not_yet_imported, routed, upstream
):
    # Kept first in this module: only the request that loads litellm (~3 s) can show it.
    gaps = []

    def stream_slowly():
        body = {"model": "slow", "stream": True, "messages": [{"role": "user", "content": "Go"}]}
        with httpx.stream(
            "POST", routed.url + "/chat/completions", json=body, timeout=60
        ) as response:
            last = time.monotonic()
            for _ in response.iter_raw():
                gaps.append(time.monotonic() - last)
                last = time.monotonic()

    streaming = threading.Thread(target=stream_slowly)
    streaming.start()
    time.sleep(0.3)
    routed_reply = httpx.post(
        routed.url + "/chat/completions",
        timeout=60,
        json={"model": "via-litellm", "messages": [{"role": "user", "content": "Hello"}]},
    )
    streaming.join()

    assert routed_reply.status_code == 200
    assert len(gaps) > 30
    assert max(gaps) < 1.5  # chunks come every 50 ms; the event loop must keep serving them


def test_non_streaming_reply_through_litellm(routed, upstream):
    with routed.client() as client:
        completion = client.chat.completions.create(
            model="via-litellm", messages=[{"role": "user", "content": "Hello via litellm"}]
        )
    routed.flush()

    assert completion.choices[0].message.content == "echo: Hello via litellm"
    assert completion.choices[0].finish_reason == "stop"
    assert upstream.last_json["model"] == "gpt-4o-mini"
    assert upstream.requests[-1].headers["authorization"] == "Bearer sk-up"
    assert [(m.role, m.content) for m in routed.layer.store.messages("default")] == [
        ("user", "Hello via litellm"),
        ("assistant", "echo: Hello via litellm"),
    ]


def test_streaming_reply_through_litellm_ends_with_done(routed, upstream):
    body = {
        "model": "via-litellm",
        "stream": True,
        "messages": [{"role": "user", "content": "Stream me a reply please"}],
    }

    with httpx.stream("POST", routed.url + "/chat/completions", json=body, timeout=30) as response:
        data = response.read()
    routed.flush()

    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["x-memory-mode"] == "auto"
    assert data.endswith(b"data: [DONE]\n\n")
    events = [
        json.loads(line[6:])
        for line in data.decode().splitlines()
        if line.startswith("data: ") and line != "data: [DONE]"
    ]
    text = "".join(e["choices"][0]["delta"].get("content") or "" for e in events if e["choices"])
    assert text == "echo: Stream me a reply please"
    assert upstream.last_json["stream"] is True
    assert [(m.role, m.content, m.partial) for m in routed.layer.store.messages("default")] == [
        ("user", "Stream me a reply please", False),
        ("assistant", "echo: Stream me a reply please", False),
    ]


def test_sdk_stream_through_litellm(routed, upstream):
    with routed.client() as client:
        stream = client.chat.completions.create(
            model="via-litellm", messages=[{"role": "user", "content": "Tell me more"}], stream=True
        )
        text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)

    assert text == "echo: Tell me more"


def test_memory_block_reaches_the_provider_through_litellm(routed, upstream):
    system = "You are a helpful assistant."
    with routed.client() as client:
        client.chat.completions.create(
            model="via-litellm",
            messages=[{"role": "user", "content": "My dog is called Rex and he loves the beach"}],
        )
        routed.flush()
        raw = client.chat.completions.with_raw_response.create(
            model="via-litellm",
            messages=[
                {"role": "system", "content": system},
                {"role": "user", "content": "What is my dog called?"},
            ],
        )

    assert int(raw.headers["x-memory-chunks-injected"]) > 0
    messages = upstream.last_json["messages"]
    assert [m["role"] for m in messages] == ["system", "system", "user"]
    assert messages[0]["content"] == system
    assert messages[1]["content"].startswith(BLOCK_START + "\n")
    assert "My dog is called Rex" in messages[1]["content"]
    assert messages[1]["content"].endswith(BLOCK_END)
    assert messages[2]["content"] == "What is my dog called?"


def test_provider_error_through_litellm_keeps_its_status(routed, upstream):
    upstream.script.append(
        {
            "status": 400,
            "body": {
                "error": {
                    "message": "Bad thing (test).",
                    "type": "invalid_request_error",
                    "param": None,
                    "code": "invalid_request",
                }
            },
        }
    )

    response = httpx.post(
        routed.url + "/chat/completions",
        timeout=30,
        json={"model": "via-litellm", "messages": [{"role": "user", "content": "Hello"}]},
    )
    routed.flush()

    assert response.status_code == 400
    error = response.json()["error"]
    assert sorted(error) == ["code", "message", "param", "type"]
    assert "Bad thing (test)." in error["message"]
    assert "x-memory-mode" in response.headers
    assert routed.layer.store.messages("default") == []


def test_a_missing_provider_key_is_a_401_not_a_500(make_proxy, upstream, monkeypatch):
    # litellm reports a missing OpenAI key, found before anything is sent, as a 500
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    keyless = make_proxy(
        routes={"keyless": ModelRoute(model="openai/gpt-4o-mini", api_base=upstream.url)}
    )

    response = httpx.post(
        keyless.url + "/chat/completions",
        timeout=30,
        json={"model": "keyless", "messages": [{"role": "user", "content": "Hello"}]},
    )
    keyless.flush()

    assert response.status_code == 401
    error = response.json()["error"]
    assert sorted(error) == ["code", "message", "param", "type"]
    assert error["type"] == "authentication_error" and "api_key" in error["message"]
    assert upstream.requests == []
    assert keyless.layer.store.messages("default") == []


def test_client_leaving_a_litellm_stream_stops_the_provider(routed, upstream):
    reply = "".join(f"word{i:03d} " for i in range(60))  # 60 chunks, 50 ms apart: 3 s
    upstream.script.append({"content": reply, "delay": 0.05})
    body = {
        "model": "via-litellm",
        "stream": True,
        "messages": [{"role": "user", "content": "Talk for a while"}],
    }

    with httpx.Client(timeout=30) as http:
        with http.stream("POST", routed.url + "/chat/completions", json=body) as response:
            chunks = response.iter_raw()
            next(chunks), next(chunks), next(chunks)
    deadline = time.monotonic() + 5
    while upstream.disconnects == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    routed.flush()

    assert upstream.disconnects == 1
    messages = routed.layer.store.messages("default")
    assert [(m.role, m.partial) for m in messages] == [("user", False), ("assistant", True)]
    assert reply.startswith(messages[1].content) and messages[1].content != reply


CACHED = {"type": "ephemeral"}


def test_an_anthropic_route_gets_the_block_after_the_last_cache_breakpoint(make_proxy, upstream):
    # litellm's anthropic/ provider against the stand-in's Anthropic messages endpoint. The
    # client marks its system prompt and its latest message for Anthropic's prompt cache: the
    # provider caches the prefix up to each mark, so the block must come after the last one.
    root = upstream.url.removesuffix("/v1")
    claude = ModelRoute(model="anthropic/claude-sonnet-4-5", api_base=root, api_key="sk-up")
    proxy = make_proxy(routes={"claude": claude})
    said = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "My dog is Rex"}]}
    httpx.post(proxy.url + "/chat/completions", json=said, timeout=10)
    proxy.flush()
    system = [{"type": "text", "text": "You are terse.", "cache_control": CACHED}]
    question = {"type": "text", "text": "What is my dog called?", "cache_control": CACHED}
    messages = [
        {"role": "system", "content": system},
        {"role": "user", "content": "Hello"},
        {"role": "assistant", "content": "Hi."},
        {"role": "user", "content": [question]},
    ]

    response = httpx.post(
        proxy.url + "/chat/completions", json={"model": "claude", "messages": messages}, timeout=60
    )

    assert response.status_code == 200, response.text
    assert int(response.headers["x-memory-chunks-injected"]) >= 1
    sent = upstream.requests[-1]
    assert sent.path == "/v1/messages"
    assert sent.json["system"] == system  # the cached system prompt, untouched
    first, reply, last = sent.json["messages"]
    assert (first["content"][0]["text"], reply["content"][0]["text"]) == ("Hello", "Hi.")
    parts = [part["text"] for part in last["content"]]
    assert last["content"][0] == question  # the marked message, then the block after it
    assert parts[-1].startswith(BLOCK_START) and "Rex" in parts[-1]


def test_no_message_text_reaches_the_logs_even_at_debug(routed, upstream, caplog):
    # litellm logs each call's messages at DEBUG; `moim serve --log-level debug` let them out.
    caplog.set_level(logging.DEBUG)
    said = "my locker code is zebra4711"
    body = {"model": "via-litellm", "messages": [{"role": "user", "content": said}]}

    answer = httpx.post(routed.url + "/chat/completions", json=body, timeout=60)

    assert answer.status_code == 200, answer.text
    assert caplog.records, "nothing was logged: the capture is not working"
    assert "zebra4711" in upstream.last_json["messages"][-1]["content"]
    logged = "\n".join(f"{r.name} {r.getMessage()} {r.exc_text or ''}" for r in caplog.records)
    assert "zebra4711" not in logged


def test_a_provider_error_quoting_the_request_reaches_the_client_not_the_logs(
    routed, upstream, caplog
):
    # Providers' validation errors quote what they were sent (pydantic's `input`, a key
    # "sk-up" named as invalid): the client gets the words, the log only the status and code.
    caplog.set_level(logging.DEBUG)
    quoted = "Invalid message 'my locker code is zebra4711' for key sk-up"
    error = {"message": quoted, "type": "invalid_request_error", "param": None, "code": "bad"}
    upstream.script.extend([{"status": 400, "body": {"error": error}}] * 3)
    body = {"model": "via-litellm", "messages": [{"role": "user", "content": "zebra4711"}]}

    answer = httpx.post(routed.url + "/chat/completions", json=body, timeout=60)

    assert answer.status_code == 400 and "zebra4711" in answer.json()["error"]["message"]
    logged = "\n".join(f"{r.name} {r.getMessage()} {r.exc_text or ''}" for r in caplog.records)
    assert "litellm call failed: 400" in logged and "bad" in logged
    assert "zebra4711" not in logged and "sk-up" not in logged
