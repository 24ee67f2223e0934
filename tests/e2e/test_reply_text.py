"""A chat reply's text is stored whatever field it comes in (proxy/streaming.py's collector).

A spoken reply (`modalities: ["text", "audio"]`) has `content` null and its words in
`message.audio.transcript` (streamed: `delta.audio.transcript` pieces beside the audio data);
a structured-output refusal has `content` null and its words in `refusal`. Each is stored as
the reply's text, streamed or not. A spoken reply resent by its audio id (no content, as
OpenAI's docs show) is the reply stored, not a new turn. A call of a custom tool (GPT-5's
free-form tools: `type: "custom"`, its `custom.input` streamed in pieces; in the Responses
API a `custom_tool_call` item, and its `custom_tool_call_output`) is stored as the call made,
and resent in the history it is that message. The provider here answers as OpenAI
does; the model name picks the reply.
"""

import json

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from tests.conftest import serve_app

USER = {"x-memory-user-id": "speaker"}
TRANSCRIPT = ["Your dog ", "is called ", "Biscuit."]
REFUSAL = ["I'm sorry, ", "I can't help ", "with that."]
SHELL = ["ls -la ", "~/photos"]  # a custom tool's input, as streamed
SHELL_CALL = {
    "id": "call_shell",
    "type": "custom",
    "custom": {"name": "shell", "input": "".join(SHELL)},
}


def _deltas(model, audio_id):
    """The streamed message's deltas: the text in pieces, as OpenAI sends it."""
    if model == "custom-tool":
        opening = {**SHELL_CALL, "custom": {"name": "shell", "input": ""}}
        calls = [opening] + [{"custom": {"input": piece}} for piece in SHELL]
        first = {"role": "assistant", "content": None}
        return [first] + [{"tool_calls": [{"index": 0, **call}]} for call in calls]
    if model == "audio-reply":
        first = {"role": "assistant", "content": None, "refusal": None}
        audio = [{"id": audio_id, "data": "UklGRg==", "expires_at": 1, "transcript": ""}]
        audio += [{"transcript": piece} for piece in TRANSCRIPT] + [{"data": "AAAA"}]
        return [first] + [{"audio": part} for part in audio]
    first = {"role": "assistant", "content": None, "refusal": ""}
    return [first] + [{"refusal": piece} for piece in REFUSAL]


def _message(model, audio_id):
    if model == "custom-tool":
        return {"role": "assistant", "content": None, "tool_calls": [SHELL_CALL]}
    if model == "audio-reply":
        audio = {"id": audio_id, "data": "UklGRg==", "expires_at": 1}
        return {
            "role": "assistant",
            "content": None,
            "audio": {**audio, "transcript": "".join(TRANSCRIPT)},
        }
    return {"role": "assistant", "content": None, "refusal": "".join(REFUSAL)}


async def _chat(request: Request) -> Response:
    body = json.loads(await request.body())
    model = body["model"]
    audio_id = f"audio_{len(body['messages'])}"  # each reply of a conversation its own
    head = {"id": "chatcmpl-said", "created": 1, "model": model}
    if not body.get("stream"):
        choice = {"index": 0, "message": _message(model, audio_id), "finish_reason": "stop"}
        completion = {**head, "object": "chat.completion", "choices": [choice]}
        return Response(json.dumps(completion), media_type="application/json")
    chunk = {**head, "object": "chat.completion.chunk"}
    deltas = _deltas(model, audio_id)
    choices = [{"index": 0, "delta": delta, "finish_reason": None} for delta in deltas]
    choices.append({"index": 0, "delta": {}, "finish_reason": "stop"})
    events = [f"data: {json.dumps({**chunk, 'choices': [c]})}\n\n" for c in choices]
    return StreamingResponse(iter([*events, "data: [DONE]\n\n"]), media_type="text/event-stream")


def _refused_response(status="completed"):
    part = {"type": "refusal", "refusal": "".join(REFUSAL)}
    item = {"id": "msg_1", "type": "message", "role": "assistant", "status": status}
    return {
        "id": "resp_refused",
        "object": "response",
        "created_at": 1,
        "model": "refusal",
        "status": status,
        "output": [{**item, "content": [part]}],
        "usage": {"input_tokens": 5, "output_tokens": 9, "total_tokens": 14},
    }


def _custom_call_response():
    item = {"id": "ctc_1", "type": "custom_tool_call", "status": "completed"}
    item |= {"call_id": SHELL_CALL["id"], "name": "shell", "input": "".join(SHELL)}
    done = _refused_response()
    return {**done, "id": "resp_called", "model": "custom-tool", "output": [item]}


async def _responses(request: Request) -> Response:
    """The Responses API's refusal, as OpenAI sends it: a `refusal` content part; for the
    model `custom-tool`, a custom tool's call, its input streamed in pieces."""
    body = json.loads(await request.body())
    custom = body["model"] == "custom-tool"
    done = _custom_call_response() if custom else _refused_response()
    if not body.get("stream"):
        return Response(json.dumps(done), media_type="application/json")
    begun = {**done, "status": "in_progress", "output": []}
    item = {**done["output"][0], "status": "in_progress"}
    item |= {"input": ""} if custom else {"content": []}
    kind, pieces = ("custom_tool_call_input", SHELL) if custom else ("refusal", REFUSAL)
    events = [
        {"type": "response.created", "response": begun},
        {"type": "response.output_item.added", "output_index": 0, "item": item},
        *(
            {"type": f"response.{kind}.delta", "output_index": 0, "content_index": 0, "delta": d}
            for d in pieces
        ),
        {"type": "response.output_item.done", "output_index": 0, "item": done["output"][0]},
        {"type": "response.completed", "response": done},
    ]
    lines = [f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events]
    return StreamingResponse(iter(lines), media_type="text/event-stream")


@pytest.fixture(scope="module")
def speaking():
    app = Starlette(
        routes=[
            Route("/v1/chat/completions", _chat, methods=["POST"]),
            Route("/v1/responses", _responses, methods=["POST"]),
        ]
    )
    with serve_app(app) as root:
        yield root + "/v1"


def stored(proxy):
    proxy.flush()
    return [(m.role, m.content, m.partial) for m in proxy.layer.store.messages("speaker")]


def ask(proxy, model, stream):
    request = {
        "model": model,
        "stream": stream,
        "messages": [{"role": "user", "content": "What is my dog called?"}],
    }
    if model == "audio-reply":
        request |= {"modalities": ["text", "audio"], "audio": {"voice": "alloy", "format": "wav"}}
    with proxy.client(default_headers=USER) as client:
        reply = client.chat.completions.create(**request)
        if not stream:
            return reply.choices[0].message
        return [chunk.choices[0].delta for chunk in reply if chunk.choices]


@pytest.mark.parametrize("stream", [False, True])
def test_a_spoken_reply_is_stored_as_its_transcript(make_proxy, speaking, stream):
    proxy = make_proxy(upstream_base_url=speaking)
    answer = ask(proxy, "audio-reply", stream)
    if not stream:  # relayed as sent
        assert answer.content is None and answer.audio.transcript == "".join(TRANSCRIPT)
    assert stored(proxy) == [
        ("user", "What is my dog called?", False),
        ("assistant", "".join(TRANSCRIPT), False),
    ]


@pytest.mark.parametrize("stream", [False, True])
def test_a_refusal_is_stored_as_the_replys_text(make_proxy, speaking, stream):
    proxy = make_proxy(upstream_base_url=speaking)
    answer = ask(proxy, "refusal", stream)
    said = answer.refusal if not stream else "".join(d.refusal or "" for d in answer)
    assert said == "".join(REFUSAL)
    assert stored(proxy) == [
        ("user", "What is my dog called?", False),
        ("assistant", "".join(REFUSAL), False),
    ]


@pytest.mark.parametrize("stream", [False, True])
def test_a_responses_refusal_is_stored_as_the_replys_text(make_proxy, speaking, stream):
    proxy = make_proxy(upstream_base_url=speaking)
    with proxy.client(default_headers=USER) as client:
        reply = client.responses.create(
            model="refusal", input="What is my dog called?", stream=stream
        )
        if stream:
            for _ in reply:
                pass
    assert stored(proxy) == [
        ("user", "What is my dog called?", False),
        ("assistant", "".join(REFUSAL), False),
    ]


def test_a_refusal_resent_in_the_history_is_the_message_stored_not_a_new_one(make_proxy, speaking):
    proxy = make_proxy(upstream_base_url=speaking)
    question = {"role": "user", "content": "What is my dog called?"}
    with proxy.client(default_headers=USER) as client:
        refused = client.chat.completions.create(model="refusal", messages=[question])
        history = [question, refused.choices[0].message.model_dump(exclude_none=True)]
        follow = {"role": "user", "content": "Fine, then tell me a joke."}
        client.chat.completions.create(model="refusal", messages=[*history, follow])
    assert stored(proxy) == [
        ("user", "What is my dog called?", False),
        ("assistant", "".join(REFUSAL), False),
        ("user", "Fine, then tell me a joke.", False),
        ("assistant", "".join(REFUSAL), False),
    ]


@pytest.mark.parametrize("stream", [False, True])
def test_a_spoken_reply_resent_by_its_audio_id_is_the_message_stored_not_a_new_one(
    make_proxy, speaking, stream
):
    """OpenAI's docs: a multi-turn audio conversation resends the reply as `audio: {"id"}`, no
    content; it is the reply stored with its transcript, not a new (empty) turn."""
    proxy = make_proxy(upstream_base_url=speaking)
    question = {"role": "user", "content": "What is my dog called?"}
    spoken = {"modalities": ["text", "audio"], "audio": {"voice": "alloy", "format": "wav"}}
    with proxy.client(default_headers=USER) as client:
        first = client.chat.completions.create(
            model="audio-reply", messages=[question], stream=stream, **spoken
        )
        if stream:
            deltas = [c.choices[0].delta.model_dump() for c in first if c.choices]
            audio_id = next(d["audio"]["id"] for d in deltas if (d.get("audio") or {}).get("id"))
        else:
            audio_id = first.choices[0].message.audio.id
        history = [question, {"role": "assistant", "audio": {"id": audio_id}}]
        follow = {"role": "user", "content": "And how old is he?"}
        second = client.chat.completions.create(
            model="audio-reply", messages=[*history, follow], stream=stream, **spoken
        )
        if stream:
            list(second)  # read to its end, or the reply is stored partial
    assert audio_id == "audio_1"
    assert stored(proxy) == [
        ("user", "What is my dog called?", False),
        ("assistant", "".join(TRANSCRIPT), False),
        ("user", "And how old is he?", False),
        ("assistant", "".join(TRANSCRIPT), False),
    ]


@pytest.mark.parametrize("stream", [False, True])
def test_a_custom_tool_call_is_stored_as_made_and_resent_is_the_message_stored(
    make_proxy, speaking, stream
):
    """A streamed custom tool call was stored as a function call with no name and no
    arguments, and the call the client resent in its history was stored again."""
    proxy = make_proxy(upstream_base_url=speaking)
    question = {"role": "user", "content": "Which photos do I have?"}
    with proxy.client(default_headers=USER) as client:
        reply = client.chat.completions.create(
            model="custom-tool", messages=[question], stream=stream
        )
        if stream:
            list(reply)  # read to its end, or the reply is stored partial
        result = {"role": "tool", "tool_call_id": "call_shell", "content": "kayak.jpg"}
        history = [question, {"role": "assistant", "tool_calls": [SHELL_CALL]}, result]
        again = client.chat.completions.create(model="custom-tool", messages=history, stream=stream)
        if stream:
            list(again)
    proxy.flush()
    exported = httpx.get(proxy.url + "/memory/export", headers=USER).text
    stored_messages = [json.loads(line)["payload"] for line in exported.splitlines()]
    calls = [m for m in stored_messages if m.get("tool_calls")]
    assert [m["tool_calls"] for m in calls] == [[SHELL_CALL], [SHELL_CALL]]  # both replies
    assert [m["role"] for m in stored_messages] == ["user", "assistant", "tool", "assistant"]


@pytest.mark.parametrize("stream", [False, True])
def test_a_responses_custom_tool_call_and_its_output_are_stored_as_chats(
    make_proxy, speaking, stream
):
    """Custom tool calls and their outputs were left out of memory (function calls are kept)."""
    proxy = make_proxy(upstream_base_url=speaking)
    ask = [{"role": "user", "content": "Which photos do I have?"}]
    tools = [{"type": "custom", "name": "shell"}]
    with proxy.client(default_headers=USER) as client:
        reply = client.responses.create(model="custom-tool", input=ask, tools=tools, stream=stream)
        if stream:
            reply = [event for event in reply][-1].response
        output = [item.model_dump(exclude_none=True) for item in reply.output]
        result = {"type": "custom_tool_call_output", "call_id": "call_shell", "output": "kayak.jpg"}
        client.responses.create(model="refusal", input=[*ask, *output, result], tools=tools)
    assert stored(proxy) == [
        ("user", "Which photos do I have?", False),
        ("assistant", "", False),
        ("tool", "kayak.jpg", False),
        ("assistant", "".join(REFUSAL), False),
    ]
    exported = httpx.get(proxy.url + "/memory/export", headers=USER).text
    payloads = [json.loads(line)["payload"] for line in exported.splitlines()]
    assert payloads[1]["tool_calls"] == [SHELL_CALL]
