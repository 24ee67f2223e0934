"""openai-python, run for real against moim and the fake upstream, with a memory round trip.

Chat sync, async and streamed, with tools and with `response_format`; embeddings through the
pass-through. Each chat variant says the fact in one conversation and asks in a new one.
"""

import asyncio
import json

import openai
import pydantic
import pytest

from tests.clients.round_trip import (
    FACT,
    QUESTION,
    USER,
    assert_not_recalled_yet,
    assert_recalled,
)
from tests.upstream_api import embedding_of

HEADERS = {"X-Memory-User-Id": USER}
MODEL = "gpt-4o-mini"


def ask(text):
    return [{"role": "user", "content": text}]


def sync_chat(proxy, text):
    with proxy.client(default_headers=HEADERS) as client:
        return client.chat.completions.create(model=MODEL, messages=ask(text)).choices[0].message


def sync_stream(proxy, text):
    with proxy.client(default_headers=HEADERS) as client:
        stream = client.chat.completions.create(model=MODEL, messages=ask(text), stream=True)
        return "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)


def async_chat(proxy, text):
    async def run():
        async with proxy.async_client(default_headers=HEADERS) as client:
            reply = await client.chat.completions.create(model=MODEL, messages=ask(text))
            return reply.choices[0].message.content

    return asyncio.run(run())


def async_stream(proxy, text):
    async def run():
        async with proxy.async_client(default_headers=HEADERS) as client:
            stream = await client.chat.completions.create(
                model=MODEL, messages=ask(text), stream=True
            )
            return "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])

    return asyncio.run(run())


@pytest.mark.parametrize("chat", [sync_chat, sync_stream, async_chat, async_stream])
def test_chat_round_trip(proxy, upstream, chat):
    said = chat(proxy, FACT)
    assert_not_recalled_yet(upstream)
    proxy.flush()

    answer = chat(proxy, QUESTION)

    assert_recalled(upstream)
    assert "echo: " + FACT in str(said)
    assert "echo: " + QUESTION in str(answer)


WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


def test_tools_round_trip(proxy, upstream):
    sync_chat(proxy, FACT)
    proxy.flush()
    with proxy.client(default_headers=HEADERS) as client:
        first = client.chat.completions.create(
            model="tool-call", messages=ask(QUESTION), tools=[WEATHER_TOOL]
        )
        assert_recalled(upstream)
        assert upstream.last_json["tools"] == [WEATHER_TOOL]
        call = first.choices[0].message.tool_calls[0]
        followed = client.chat.completions.create(
            model=MODEL,
            tools=[WEATHER_TOOL],
            messages=[
                *ask(QUESTION),
                first.choices[0].message.model_dump(exclude_none=True),
                {"role": "tool", "tool_call_id": call.id, "content": "Sunny, 24 °C"},
            ],
        )

    assert (call.function.name, json.loads(call.function.arguments)) == (
        "get_weather",
        {"city": "Paris"},
    )
    assert followed.choices[0].message.content == "echo: " + QUESTION
    assert upstream.last_json["messages"][-1]["tool_call_id"] == call.id


class Pet(pydantic.BaseModel):
    name: str
    kind: str


def test_response_format_round_trip(proxy, upstream):
    sync_chat(proxy, FACT)
    proxy.flush()
    upstream.json_script.append({"content": '{"name": "Whiskers", "kind": "cat"}'})

    with proxy.client(default_headers=HEADERS) as client:
        parsed = client.chat.completions.parse(
            model=MODEL, messages=ask(QUESTION), response_format=Pet
        )

    assert parsed.choices[0].message.parsed == Pet(name="Whiskers", kind="cat")
    assert_recalled(upstream)
    sent = upstream.last_json["response_format"]
    assert sent["type"] == "json_schema"
    assert sent["json_schema"]["name"] == "Pet"


def test_embeddings_pass_through(proxy, upstream):
    with proxy.client(default_headers=HEADERS) as client:
        result = client.embeddings.create(model="text-embedding-3-small", input=[FACT, QUESTION])

    assert [item.embedding for item in result.data] == [embedding_of(FACT), embedding_of(QUESTION)]
    assert upstream.requests[-1].json["encoding_format"] == "base64"  # the SDK's default
    proxy.flush()
    assert proxy.layer.stats(USER).messages == 0


def test_async_embeddings_pass_through(proxy, upstream):
    async def run():
        async with proxy.async_client(default_headers=HEADERS) as client:
            return await client.embeddings.create(model="text-embedding-3-small", input=FACT)

    result = asyncio.run(run())

    assert result.data[0].embedding == embedding_of(FACT)


def test_sdk_errors_from_the_pass_through_keep_their_type(proxy, upstream):
    with proxy.client() as client, pytest.raises(openai.NotFoundError) as caught:
        client.models.retrieve("no-such-model")

    assert caught.value.body["code"] == "model_not_found"
