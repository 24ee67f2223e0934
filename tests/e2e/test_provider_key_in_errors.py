"""A provider's error that quotes the key it refused reaches the client without that key.

With proxy keys the provider key is the operator's, and a client must never learn it; some
providers and gateways quote it ("Incorrect API key provided: sk-…"). The official openai
SDK talks to the real proxy, which talks to a stand-in provider that quotes the key it got:
in a refusal read whole, in one larger than `server.max_body_bytes` (relayed as it comes, not
read whole), and in an error event inside a stream that began with a 200. (litellm reads a
body whole, and breaks a stream with an error event in it off.)
"""

import json

import httpx
import openai
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from proxy.config import ModelRoute, ProxyKey
from tests.conftest import serve_app

SECRET = "sk-operator-0123456789abcdefSECRET"
KEYS = (ProxyKey("sk-alice", user_id="alice"),)
HELLO = [{"role": "user", "content": "Hello there"}]
LIMIT = 4096  # server.max_body_bytes: a `large` model's error is past it


async def _quote_the_key(request: Request) -> Response:
    """A 401 whose message (and `WWW-Authenticate`) quotes the bearer token the request
    carried; past `LIMIT` for a `large` model (or `/models?large`), quoting it again at its
    end; for a `stream-error` model, a 200 stream whose last event is that error."""
    token = request.headers.get("authorization", "").removeprefix("Bearer ")
    error = {"message": f"Incorrect API key provided: {token}.", "type": "invalid_request_error"}
    body = json.loads(await request.body() or b"{}")
    model = body.get("model", "") if isinstance(body, dict) else ""
    if model == "stream-error":
        return _stream_ending_in(error, responses=request.url.path.endswith("/responses"))
    if model == "large" or "large" in request.query_params:
        error |= {"padding": "x" * (LIMIT * 4), "again": error["message"]}
    refused = f'Bearer error="invalid_token", error_description="{error["message"]}"'
    answer = {"error": {**error, "param": None, "code": "invalid_api_key"}}
    return JSONResponse(answer, 401, headers={"www-authenticate": refused})


def _stream_ending_in(error: dict[str, str], responses: bool) -> Response:
    if responses:
        created = {"type": "response.created", "response": {"id": "resp_1", "status": "queued"}}
        events = [created, {"type": "error", "code": "invalid_api_key", **error}]
        lines = [f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events]
    else:
        delta = {"role": "assistant", "content": "Hi"}
        chunk = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m"}
        events = [{**chunk, "choices": [{"index": 0, "delta": delta}]}, {"error": error}]
        lines = [f"data: {json.dumps(e)}\n\n" for e in events]
    return Response("".join(lines), 200, media_type="text/event-stream")


@pytest.fixture
def quoting_proxy(make_proxy):
    app = Starlette(routes=[Route("/v1/{path:path}", _quote_the_key, methods=["GET", "POST"])])
    with serve_app(app) as root:
        route = ModelRoute(model="openai/gpt-4o-mini", api_base=root + "/v1", api_key=SECRET)
        yield make_proxy(
            keys=KEYS,
            upstream_base_url=root + "/v1",
            upstream_api_key=SECRET,
            routes={"via-litellm": route},
            max_body_bytes=LIMIT,
        )


def _chat(model, **options):
    return lambda c: c.chat.completions.create(model=model, messages=HELLO, **options)


TOOLS = {"X-Memory-Tools": "on"}
CALLS = {
    "chat": _chat("gpt-4o-mini"),
    "chat, streamed": _chat("gpt-4o-mini", stream=True),
    "chat with memory tools": _chat("gpt-4o-mini", extra_headers=TOOLS),
    "responses": lambda c: c.responses.create(model="gpt-4o-mini", input="Hello there"),
    "chat through litellm": _chat("via-litellm"),
    "embeddings (passed through)": lambda c: c.embeddings.create(
        model="text-embedding-3-small", input="Hello"
    ),
    "models (passed through)": lambda c: c.models.list(),
    "chat, an error past the bound": _chat("large"),
    "chat, streamed, an error past the bound": _chat("large", stream=True),
    "chat with memory tools, an error past the bound": _chat("large", extra_headers=TOOLS),
    "responses, an error past the bound": lambda c: c.responses.create(model="large", input="Hi"),
    "models (passed through), an error past the bound": lambda c: c.models.list(
        extra_query={"large": "1"}
    ),
}


@pytest.mark.parametrize("call", CALLS)
def test_a_provider_error_quoting_the_operators_key_reaches_the_client_without_it(
    quoting_proxy, call
):
    with quoting_proxy.client(api_key="sk-alice") as client:
        with pytest.raises(openai.AuthenticationError) as refused:
            CALLS[call](client)

    body = refused.value.response.text
    assert body.count("Incorrect API key provided") == (2 if "past the bound" in call else 1)
    assert SECRET not in body and SECRET[-12:] not in body
    assert SECRET not in str(refused.value.response.headers.raw)  # WWW-Authenticate quotes it


STREAMS = {
    "chat": _chat("stream-error", stream=True),
    "chat with memory tools": _chat("stream-error", stream=True, extra_headers=TOOLS),
    "responses": lambda c: c.responses.create(model="stream-error", input="Hi", stream=True),
}


@pytest.mark.parametrize("call", STREAMS)
def test_an_error_event_inside_a_stream_reaches_the_client_without_the_key(quoting_proxy, call):
    said = []
    with quoting_proxy.client(api_key="sk-alice") as client:
        try:
            said.extend(event.model_dump_json() for event in STREAMS[call](client))
        except openai.APIError as exc:  # the SDK raises on chat's error event
            said.append(f"{exc.message} {exc.body}")

    assert "Incorrect API key provided" in "\n".join(said)
    assert SECRET not in "\n".join(said) and SECRET[-12:] not in "\n".join(said)


def test_a_stream_passed_through_carries_no_key(quoting_proxy):
    """Pass-through (legacy completions) relays a 200 as it comes: its error event too."""
    body = {"model": "stream-error", "prompt": "Hello", "stream": True}
    headers = {"authorization": "Bearer sk-alice"}
    answer = httpx.post(quoting_proxy.url + "/completions", json=body, headers=headers)

    assert "Incorrect API key provided" in answer.text and SECRET not in answer.text
