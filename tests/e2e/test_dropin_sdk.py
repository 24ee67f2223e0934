"""Drop-in compatibility, second round: what the official SDK and a raw client send and get
through moim, against the provider called directly (a user changes only OPENAI_BASE_URL).

Each test is a case an audit found moim treating differently from the provider, or a memory
header moim misread: a request header the client sends twice, an `X-Memory-Tools` value that is
neither on nor off.
"""

import httpx
import pytest

HELLO = [{"role": "user", "content": "Hello"}]
REPEATED = [("x-tag", "a"), ("openai-beta", "one"), ("x-tag", "b"), ("openai-beta", "two")]


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(
    "path, tools",
    [("/chat/completions", "off"), ("/chat/completions", "on"), ("/responses", "off")],
    ids=["chat", "chat-memory-tools", "responses"],
)
def test_a_header_the_client_sends_twice_reaches_the_provider_as_two_lines(
    proxy, upstream, path, tools, stream
):
    """A gateway's tag or `OpenAI-Beta` sent twice: the pass-through relayed both lines, in
    order; chat and the Responses API kept only the first, and sent the headers reversed."""
    body = {"model": "gpt-4o-mini", "stream": stream, "messages": HELLO, "input": "Hello"}
    headers = [*REPEATED, ("x-memory-tools", tools)]

    with httpx.stream("POST", proxy.url + path, json=body, headers=headers) as response:
        response.read()

    assert response.status_code == 200, response.text
    sent = [
        line for line in upstream.requests[-1].header_lines if line[0] in (b"x-tag", b"openai-beta")
    ]
    assert sent == [(name.encode(), value.encode()) for name, value in REPEATED]


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("path", ["/chat/completions", "/responses"])
@pytest.mark.parametrize("value", ["maybe", "enabled", "2"])
def test_an_x_memory_tools_value_neither_on_nor_off_is_a_400_and_goes_nowhere(
    proxy, upstream, path, value, stream
):
    """It was taken as "off", silently: with `memory.tools: true` in config, a typo turned
    the tools off. The other `X-Memory-*` headers refuse a bad value."""
    body = {"model": "gpt-4o-mini", "stream": stream, "messages": HELLO, "input": "Hello"}
    headers = {"x-memory-tools": value, "x-memory-user-id": "tess"}

    response = httpx.post(proxy.url + path, json=body, headers=headers)

    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["type"], error["param"]) == ("invalid_request_error", "X-Memory-Tools")
    assert set(error) == {"message", "type", "param", "code"}
    assert upstream.requests == []
    proxy.flush()
    assert proxy.layer.store.messages("tess") == []


@pytest.mark.parametrize(
    "value, offered", [("on", True), ("Yes", True), ("off", False), ("0", False)]
)
def test_the_x_memory_tools_values_moim_takes(proxy, upstream, value, offered):
    body = {"model": "gpt-4o-mini", "messages": HELLO}

    response = httpx.post(
        proxy.url + "/chat/completions", json=body, headers={"x-memory-tools": value}
    )

    assert response.status_code == 200
    assert ("tools" in upstream.last_json) is offered
