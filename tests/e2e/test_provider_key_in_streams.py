"""The operator's provider key never reaches the client, in the errors the first test file
(`test_provider_key_in_errors.py`) leaves out: an error body larger than
`server.max_body_bytes` (relayed as it comes, not read whole), an error event inside a stream
that began with a 200 (chat, Responses, the memory-tool loop, pass-through). The official openai
SDK talks to the real proxy, which talks to a stand-in provider that quotes the key it got.
(litellm routes read the body whole and break a stream with an error event off: held.)
"""

import json

import httpx
import openai
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from proxy.config import ProxyKey
from tests.conftest import serve_app

SECRET = "sk-operator-0123456789abcdefSECRET"
KEYS = (ProxyKey("sk-alice", user_id="alice"),)
HELLO = [{"role": "user", "content": "Hello there"}]
LIMIT = 4096  # server.max_body_bytes: the large error is past it


def _quoted(request: Request) -> str:
    token = request.headers.get("authorization", "").removeprefix("Bearer ")
    return f"Incorrect API key provided: {token}."


async def _provider(request: Request) -> Response:
    """How the stand-in answers depends on the model asked for (or the path, with none)."""
    body = json.loads(await request.body() or b"{}")
    model = body.get("model", "") if isinstance(body, dict) else ""
    error = {"message": _quoted(request), "type": "invalid_request_error", "param": None}
    if model.startswith("large") or request.url.path.endswith("/models"):
        padding = "x" * (LIMIT * 4)  # the key at the start, and again at the end
        large = {**error, "code": "invalid_api_key", "detail": padding, "again": _quoted(request)}
        return JSONResponse({"error": large}, 401)
    if "responses" in request.url.path:
        events = [
            {"type": "response.created", "response": {"id": "resp_1", "status": "in_progress"}},
            {"type": "error", "code": "invalid_api_key", "message": _quoted(request)},
        ]
        lines = [f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events]
        return Response(b"".join(lines), 200, media_type="text/event-stream")
    delta = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    first = {**delta, "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hi"}}]}
    lines = [b"data: " + json.dumps(first).encode() + b"\n\n"]
    lines.append(b"data: " + json.dumps({"error": error}).encode() + b"\n\n")
    return Response(b"".join(lines), 200, media_type="text/event-stream")


@pytest.fixture
def quoting_proxy(make_proxy):
    app = Starlette(routes=[Route("/v1/{path:path}", _provider, methods=["GET", "POST"])])
    with serve_app(app) as root:
        yield make_proxy(
            keys=KEYS,
            upstream_base_url=root + "/v1",
            upstream_api_key=SECRET,
            max_body_bytes=LIMIT,
        )


def _chat(model, stream=False, **extra):
    return lambda c: c.chat.completions.create(model=model, messages=HELLO, stream=stream, **extra)


LARGE = {
    "chat": _chat("large"),
    "chat, streamed": _chat("large", stream=True),
    "chat with memory tools": _chat("large", extra_headers={"X-Memory-Tools": "on"}),
    "responses": lambda c: c.responses.create(model="large", input="Hello there"),
    "models (passed through)": lambda c: c.models.list(),
}


@pytest.mark.parametrize("call", LARGE)
def test_an_error_larger_than_the_body_bound_reaches_the_client_without_the_key(
    quoting_proxy, call
):
    with quoting_proxy.client(api_key="sk-alice") as client:
        with pytest.raises(openai.AuthenticationError) as refused:
            LARGE[call](client)

    body = refused.value.response.text
    assert body.count("Incorrect API key provided") == 2 and len(body) > LIMIT
    assert SECRET not in body and SECRET[-12:] not in body


def _read(stream) -> str:
    """What the client's SDK made of a stream: its text, then the error it raised."""
    said = []
    try:
        for event in stream:
            said.append(event.model_dump_json())
    except openai.APIError as exc:
        said.append(f"{exc.message} {exc.body}")
    return "\n".join(said)


STREAMS = {
    "chat": _chat("gpt-4o-mini", stream=True),
    "chat with memory tools": _chat(
        "gpt-4o-mini", stream=True, extra_headers={"X-Memory-Tools": "on"}
    ),
    "responses": lambda c: c.responses.create(model="gpt-4o-mini", input="Hello", stream=True),
}


@pytest.mark.parametrize("call", STREAMS)
def test_an_error_event_inside_a_stream_reaches_the_client_without_the_key(quoting_proxy, call):
    with quoting_proxy.client(api_key="sk-alice") as client:
        said = _read(STREAMS[call](client))

    assert SECRET not in said and SECRET[-12:] not in said


def test_a_stream_passed_through_carries_no_key(quoting_proxy):
    """Pass-through (legacy completions) relays a 200 as it comes: an error event in it is
    masked too."""
    headers = {"authorization": "Bearer sk-alice"}
    body = {"model": "gpt-4o-mini", "input": "Hello", "stream": True}
    answer = httpx.post(quoting_proxy.url + "/completions", json=body, headers=headers)

    assert "Incorrect API key provided" in answer.text
    assert SECRET not in answer.text
