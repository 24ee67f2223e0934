"""Drop-in compatibility, second round: what the official SDK and a raw client send and get
through moim, against the provider called directly (a user changes only OPENAI_BASE_URL).

Each test is a case an audit found moim treating differently from the provider, or a memory
header moim misread: a request header the client sends twice, an `X-Memory-Tools` value that is
neither on nor off.
"""

import asyncio

import httpx
import openai
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


# -- the SDK's retries -------------------------------------------------------------------------

BUSY = {"error": {"message": "Busy (test).", "type": "server_error", "param": None, "code": None}}


def ask_with_retries(proxy, path, stream, use_async):
    """One request through the SDK allowing two retries; the reply's text."""
    options = {"base_url": proxy.url, "api_key": "sk-client", "max_retries": 2}
    options["default_headers"] = {"x-memory-user-id": "rita"}

    async def async_ask():
        async with openai.AsyncOpenAI(**options) as client:
            if path == "/responses":
                return (
                    await client.responses.create(model="gpt-4o-mini", input="Hello")
                ).output_text
            reply = await client.chat.completions.create(
                model="gpt-4o-mini", messages=HELLO, stream=stream
            )
            if not stream:
                return reply.choices[0].message.content
            return "".join([c.choices[0].delta.content or "" async for c in reply if c.choices])

    def sync_ask():
        with openai.OpenAI(**options) as client:
            if path == "/responses":
                return client.responses.create(model="gpt-4o-mini", input="Hello").output_text
            reply = client.chat.completions.create(
                model="gpt-4o-mini", messages=HELLO, stream=stream
            )
            if not stream:
                return reply.choices[0].message.content
            return "".join(c.choices[0].delta.content or "" for c in reply if c.choices)

    return asyncio.run(async_ask()) if use_async else sync_ask()


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize(
    "path, stream",
    [("/chat/completions", False), ("/chat/completions", True), ("/responses", False)],
    ids=["chat", "chat-stream", "responses"],
)
@pytest.mark.parametrize(
    "status, headers",
    [
        (429, {"retry-after-ms": "1"}),
        (503, {"retry-after": "0"}),
        (400, {"x-should-retry": "true", "retry-after-ms": "1"}),
    ],
    ids=["429", "503", "400-should-retry"],
)
def test_the_sdk_retries_as_the_provider_says_and_the_turn_is_stored_once(
    proxy, upstream, status, headers, path, stream, use_async
):
    upstream.script[:] = [{"status": status, "body": BUSY, "headers": headers}]

    said = ask_with_retries(proxy, path, stream, use_async)

    assert said == "echo: Hello"
    assert [r.path for r in upstream.requests] == ["/v1" + path] * 2
    proxy.flush()
    stored = [(m.role, m.content) for m in proxy.layer.store.messages("rita")]
    assert stored == [("user", "Hello"), ("assistant", "echo: Hello")]


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
def test_the_sdk_does_not_retry_what_the_provider_says_not_to(proxy, upstream, use_async):
    upstream.script[:] = [{"status": 500, "body": BUSY, "headers": {"x-should-retry": "false"}}]

    with pytest.raises(openai.InternalServerError) as caught:
        ask_with_retries(proxy, "/chat/completions", False, use_async)

    assert caught.value.response.headers["x-should-retry"] == "false"
    assert len(upstream.requests) == 1
    proxy.flush()
    assert proxy.layer.store.messages("rita") == []
