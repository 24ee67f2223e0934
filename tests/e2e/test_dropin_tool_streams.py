"""Parallel tool calls streamed by OpenAI-compatible servers that number them otherwise.

OpenAI gives each call of a reply its own `index`, and every piece of a call that index. Some
servers do not: Ollama gives every call index 0, Gemini's OpenAI endpoint gives none. moim's
collector joined such calls into one (`get_weatherget_time`, `{...}{...}`), stored that, and
stored again, as a new message, the two calls the client then sent back in its history. The
provider here streams as those servers do; the model name picks which.

With moim's memory tools on, the loop's filter read pieces by their index alone: a client's call
and moim's call under one index became one call, hidden from the client or shown to it.
"""

import json

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from tests.conftest import serve_app

USER = {"x-memory-user-id": "caller"}
CALLS = [
    {
        "id": "call_weather",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
    },
    {
        "id": "call_time",
        "type": "function",
        "function": {"name": "get_time", "arguments": '{"tz":"CET"}'},
    },
]
ANSWER = "Sunny, and it is noon."


# moim's memory tool and the client's, in the order the model named in the request's tail says.
REMEMBER = {
    "id": "call_remember",
    "type": "function",
    "function": {"name": "moim_remember_fact", "arguments": '{"key":"city","value":"Paris"}'},
}
MIXED = {"moim-first": [REMEMBER, CALLS[0]], "client-first": [CALLS[0], REMEMBER]}


def _pieces(model):
    """Each call in two pieces: its id and name, then its arguments."""
    pieces = []
    for call in MIXED.get(model.partition("/")[2], CALLS):
        opening = {**call, "function": {"name": call["function"]["name"], "arguments": ""}}
        pieces += [opening, {"function": {"arguments": call["function"]["arguments"]}}]
    if model.startswith("index-zero"):
        return [{"index": 0, **piece} for piece in pieces]
    return pieces  # no index


async def _chat(request: Request) -> Response:
    body = json.loads(await request.body())
    head = {"id": "chatcmpl-calls", "created": 1, "model": body["model"]}
    answered = body["messages"][-1]["role"] == "tool"
    if not body.get("stream"):
        message = {"role": "assistant", "content": ANSWER}
        choice = {"index": 0, "message": message, "finish_reason": "stop"}
        completion = {**head, "object": "chat.completion", "choices": [choice]}
        return Response(json.dumps(completion), media_type="application/json")
    deltas = [{"role": "assistant", "content": ANSWER if answered else None}]
    if not answered:
        deltas += [{"tool_calls": [piece]} for piece in _pieces(body["model"])]
    finish = "stop" if answered else "tool_calls"
    choices = [{"index": 0, "delta": delta, "finish_reason": None} for delta in deltas]
    choices.append({"index": 0, "delta": {}, "finish_reason": finish})
    chunk = {**head, "object": "chat.completion.chunk"}
    events = [f"data: {json.dumps({**chunk, 'choices': [c]})}\n\n" for c in choices]
    return StreamingResponse(iter([*events, "data: [DONE]\n\n"]), media_type="text/event-stream")


@pytest.fixture(scope="module")
def calling():
    app = Starlette(routes=[Route("/v1/chat/completions", _chat, methods=["POST"])])
    with serve_app(app) as root:
        yield root + "/v1"


@pytest.mark.parametrize("model", ["index-zero", "no-index"])
def test_parallel_calls_numbered_otherwise_are_stored_as_the_calls_made(make_proxy, calling, model):
    proxy = make_proxy(upstream_base_url=calling)
    question = {"role": "user", "content": "Weather and time in Paris?"}
    with proxy.client(default_headers=USER) as client:
        chunks = list(client.chat.completions.create(model=model, messages=[question], stream=True))
        assert len(chunks) == 6  # relayed as sent: the role, four pieces, the finish
        results = [
            {"role": "tool", "tool_call_id": "call_weather", "content": "Sunny"},
            {"role": "tool", "tool_call_id": "call_time", "content": "12:00"},
        ]
        history = [question, {"role": "assistant", "tool_calls": CALLS}, *results]
        list(client.chat.completions.create(model=model, messages=history, stream=True))
    proxy.flush()
    exported = httpx.get(proxy.url + "/memory/export", headers=USER).text
    payloads = [json.loads(line)["payload"] for line in exported.splitlines()]
    assert [m["role"] for m in payloads] == ["user", "assistant", "tool", "tool", "assistant"]
    assert payloads[1]["tool_calls"] == CALLS
    assert payloads[4]["content"] == ANSWER


@pytest.mark.parametrize("order", ["moim-first", "client-first"])
@pytest.mark.parametrize("numbering", ["index-zero", "no-index"])
def test_memory_tools_keep_a_clients_call_apart_from_moims(make_proxy, calling, numbering, order):
    proxy = make_proxy(upstream_base_url=calling)
    headers = {**USER, "X-Memory-Tools": "on"}
    question = {"role": "user", "content": "Weather in Paris? Remember I live there."}
    with proxy.client(default_headers=headers) as client:
        stream = client.chat.completions.create(
            model=f"{numbering}/{order}", messages=[question], stream=True
        )
        chunks = [chunk.model_dump() for chunk in stream]
    pieces = [call for c in chunks for call in c["choices"][0]["delta"]["tool_calls"] or []]
    assert {piece["index"] for piece in pieces} == {0}  # the client's one call, renumbered
    assert [piece["id"] for piece in pieces if piece["id"]] == ["call_weather"]
    assert "".join(piece["function"]["name"] or "" for piece in pieces) == "get_weather"
    assert "".join(piece["function"]["arguments"] or "" for piece in pieces) == '{"city":"Paris"}'
    assert [c["choices"][0]["finish_reason"] for c in chunks][-1] == "tool_calls"
    facts = httpx.get(proxy.url + "/memory/facts", headers=USER).json()["facts"]
    assert [(fact["key"], fact["value"]) for fact in facts] == [("city", "Paris")]
