"""A fake OpenAI-compatible provider, served for real on a free local port.

moim's tests cannot reach an LLM, so the upstream provider is the one stand-in they may use
(STYLE.md point 17); everything else, the proxy included, runs for real. This module serves a
small Starlette app under uvicorn in a background thread. It answers like the OpenAI API, but
deterministically, and records every request it receives, so a test can assert on exactly what
moim forwarded.

Replies to ``POST /v1/chat/completions``:

- by default the content is ``"echo: "`` + the last user message's text (string content, or the
  ``text`` parts of a list joined with no separator), cut to 200 characters; ``usage`` counts one
  token per 4 characters;
- ``stream: true`` sends real SSE: a role chunk, the content in 8-character chunks, tool-call
  deltas (id and name first, then the arguments in pieces), a chunk with ``finish_reason``, a
  usage chunk when ``stream_options.include_usage`` is set, then ``data: [DONE]``. Each event is
  its own body message, so the client sees real chunk boundaries;
- the model name picks a behaviour: ``tool-call`` (``get_weather`` with ``{"city":"Paris"}``),
  ``error-400`` / ``error-401`` / ``error-429`` (with ``Retry-After: 7``) / ``error-500`` (an
  OpenAI-shaped error body), ``slow`` (40 chunks 50 ms apart), ``broken`` (the connection drops
  after three content chunks, with no ``[DONE]``) and ``logprobs`` (fixed logprobs per chunk);
  a stream whose client leaves before its end adds one to ``Upstream.disconnects``;
- a non-empty ``Upstream.script`` overrides all of that: each chat request pops its first item,
  ``{"content": ..., "tool_calls": [{"id", "name", "arguments"}], "delay": seconds,
  "broken_after": chunks}`` (any subset; ``broken_after``: the stream drops after that many
  chunks past the first, as ``broken``'s), or ``{"status": int, "body": dict, "headers": dict}``
  for a raw error (the Anthropic endpoint answers such an item too);
- a non-empty ``Upstream.json_script`` (same items) answers, before ``script``, the requests that
  ask for a JSON object (``response_format``, as moim's consolidation does), so a test can
  script them while chats go on beside them.

``POST /v1/responses`` answers the same way in the Responses API's shapes, JSON or its real event
stream (``tests/upstream_responses.py``), and keeps the ids it answered with: a
``previous_response_id`` it never gave out gets OpenAI's 400 ``previous_response_not_found``.
With ``background: true`` it answers ``queued`` (or streams), and ``GET /v1/responses/{id}``
polls the reply (``?stream=true``: its events).

``POST /v1/messages`` is a minimal Anthropic messages endpoint (JSON only), for litellm's
``anthropic/…`` routes: it answers ``"Noted, turn <n>."`` with Anthropic's ``usage``.

``GET /v1/models`` lists a few models. Embeddings, legacy completions, moderations, files,
audio speech and ``GET /v1/models/{id}`` are answered by ``tests/upstream_api.py``; any other
path gets an OpenAI-shaped 404. Every request is recorded as it arrived: method, path (and the
raw, still percent-encoded path), query string, headers (also as their lines, in order, a
repeated name as its lines) and the raw body bytes.

Connections must have ``TCP_NODELAY``, or a small streamed write can wait ~40 ms for a delayed
ACK (Nagle). uvicorn never sets it; asyncio's transports do, but only when the listening
socket's proto is ``IPPROTO_TCP``, so ``serve_upstream`` creates it that way. Each recorded
request carries the flag as read from its server-side socket, so a test can pin it.
"""

import asyncio
import contextlib
import json
import socket
import threading
import time
from collections.abc import AsyncGenerator, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from tests import upstream_responses as responses
from tests.upstream_api import OtherEndpoints

CREATED = 1700000000
CHUNK_CHARS = 8
ECHO_LIMIT = 200
CHAT_PATH = "/v1/chat/completions"
RESPONSES_PATH = "/v1/responses"
ANTHROPIC_PATH = "/v1/messages"
MODELS = ("gpt-4o-mini", "gpt-4o", "tool-call", "slow", "broken", "logprobs")
WEATHER_CALL = {"id": "call_test_weather", "name": "get_weather", "arguments": '{"city":"Paris"}'}
LONG_REPLY = "".join(f"tick {i:02d} " for i in range(40))  # 40 chunks of exactly 8 characters
_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]
_ERRORS = {  # model name -> (status, type, code, message)
    "error-400": (400, "invalid_request_error", "invalid_request", "Invalid request (test)."),
    "error-401": (401, "invalid_request_error", "invalid_api_key", "Incorrect API key (test)."),
    "error-429": (429, "requests", "rate_limit_exceeded", "Rate limit reached (test)."),
    "error-500": (500, "server_error", "server_error", "The server had an error (test)."),
}


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One request as the fake received it; ``json`` is None when the body is not JSON."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    json: Any
    tcp_nodelay: bool
    query: str = ""  # the raw query string, without the "?"
    raw_path: str = ""  # the path as sent, percent-escapes kept
    header_lines: tuple[tuple[bytes, bytes], ...] = ()  # as sent: order and repeats kept


@dataclass(frozen=True, slots=True)
class _Reply:
    """What the assistant says, and how it is delivered."""

    content: str | None = None
    tool_calls: tuple[dict[str, str], ...] = ()
    logprobs: bool = False
    delay: float = 0.0
    broken_after: int | None = None  # chunks sent after the first before the connection drops

    @property
    def finish_reason(self) -> str:
        return "tool_calls" if self.tool_calls else "stop"


@dataclass(frozen=True, slots=True)
class _Turn:
    """The request-side facts every response shape needs."""

    number: int
    model: str
    prompt_tokens: int
    include_usage: bool


class Upstream:
    """The fake provider's state: its URL, what it received, what it will say next."""

    def __init__(self, url: str) -> None:
        self.url = url  # base URL for OpenAI clients, ending in /v1
        self.requests: list[RecordedRequest] = []
        self.script: list[dict[str, Any]] = []
        self.json_script: list[dict[str, Any]] = []
        self.disconnects = 0  # streams whose client left before the last event
        self.api = OtherEndpoints(MODELS, self._event_stream)
        self.app = Starlette(routes=[Route("/{path:path}", self._handle, methods=_METHODS)])
        self.response_ids: set[str] = set()  # every response id given out
        self.background = responses.Background()  # `background: true` responses, polled
        # Raw header lines added to every chat completion response (a provider's cookies,
        # headers that are not ASCII).
        self.reply_headers: list[tuple[bytes, bytes]] = []
        self._server: uvicorn.Server | None = None
        self._chats = 0

    def reset(self) -> None:
        """Forget recorded requests, the scripts, the disconnect count and the id counter."""
        self.requests.clear()
        self.script.clear()
        self.json_script.clear()
        self.disconnects = 0
        self.response_ids.clear()
        self.background.reset()
        self.reply_headers.clear()
        self._chats = 0
        self.api.reset()

    @property
    def last_json(self) -> dict[str, Any]:
        """The JSON body of the last chat completion request."""
        for recorded in reversed(self.requests):
            if recorded.path == CHAT_PATH:
                return dict(recorded.json)
        raise LookupError("the upstream has received no chat completion request")

    @property
    def last_responses_json(self) -> dict[str, Any]:
        """The JSON body of the last ``/v1/responses`` request."""
        for recorded in reversed(self.requests):
            if recorded.path == RESPONSES_PATH:
                return dict(recorded.json)
        raise LookupError("the upstream has received no responses request")

    async def _handle(self, request: Request) -> Response:
        try:
            body = await request.body()
        except ClientDisconnect:  # the client cut its upload: nothing to record, nobody to answer
            return Response(status_code=400)
        try:
            parsed = json.loads(body) if body else None
        except ValueError:
            parsed = None
        recorded = RecordedRequest(
            method=request.method,
            path=request.url.path,
            headers=dict(request.headers),
            body=body,
            json=parsed,
            tcp_nodelay=self._nodelay(request),
            query=request.scope["query_string"].decode("latin-1"),
            raw_path=request.scope["raw_path"].decode("latin-1"),
            header_lines=tuple(request.scope["headers"]),
        )
        self.requests.append(recorded)
        if request.method == "POST" and request.url.path == CHAT_PATH:
            if not isinstance(parsed, dict):
                return _error(400, "invalid_request_error", "invalid_json", "Body is not JSON.")
            return self._chat(parsed)
        if request.method == "POST" and request.url.path == RESPONSES_PATH:
            if not isinstance(parsed, dict):
                return _error(400, "invalid_request_error", "invalid_json", "Body is not JSON.")
            return self._responses(parsed)
        if request.method == "POST" and request.url.path == ANTHROPIC_PATH:
            return self._anthropic(parsed)
        if request.method == "GET" and request.url.path.startswith(RESPONSES_PATH + "/"):
            response_id = request.url.path.removeprefix(RESPONSES_PATH + "/")
            events = self.background.events(response_id)
            if events is not None and request.query_params.get("stream") == "true":
                return self._event_stream(events, 0.0)
            polled = self.background.poll(response_id)
            if polled is not None:
                return JSONResponse(polled)
        if request.method == "GET" and request.url.path == "/v1/models":
            model = {"object": "model", "created": CREATED, "owned_by": "test"}
            return JSONResponse({"object": "list", "data": [{"id": m, **model} for m in MODELS]})
        answer = self.api.answer(request, body, parsed)
        if answer is not None:
            return answer
        return _error(404, "invalid_request_error", "unknown_url", f"No route {request.url.path}")

    def _chat(self, body: dict[str, Any]) -> Response:
        response = self._chat_reply(body)
        response.raw_headers.extend(self.reply_headers)
        return response

    def _chat_reply(self, body: dict[str, Any]) -> Response:
        self._chats += 1
        messages = body.get("messages") or []
        turn = _Turn(
            number=self._chats,
            model=str(body.get("model", "")),
            prompt_tokens=sum(_tokens(_text(m.get("content"))) for m in messages),
            include_usage=bool((body.get("stream_options") or {}).get("include_usage")),
        )
        script = self.json_script if body.get("response_format") else []
        reply = self._next_reply(turn.model, messages, script or self.script)
        if isinstance(reply, Response):
            return reply
        if not body.get("stream"):
            completion = json.dumps(_completion(turn, reply)).encode()
            if reply.broken_after is not None:
                return _Truncated([completion[: len(completion) // 2]], "application/json")
            return Response(completion, media_type="application/json")
        events = _events(turn, reply)
        if reply.broken_after is not None:
            return _Truncated(events[: 1 + reply.broken_after], "text/event-stream")
        return _EventStream(events, reply.delay, self._count_disconnect)

    def _responses(self, body: dict[str, Any]) -> Response:
        previous = body.get("previous_response_id")
        if previous is not None and previous not in self.response_ids:
            message = f"Previous response with id '{previous}' not found."
            return _error(400, "invalid_request_error", "previous_response_not_found", message)
        self._chats += 1
        question = [{"role": "user", "content": responses.input_text(body)}]
        reply = self._next_reply(str(body.get("model", "")), question, self.script)
        if isinstance(reply, Response):
            return reply
        output = responses.output_items(self._chats, reply.content, reply.tool_calls)
        self.response_ids.add(f"resp_test_{self._chats}")
        if body.get("background"):
            queued = self.background.start(self._chats, body, output)
            if not body.get("stream"):
                return JSONResponse(queued)
        if not body.get("stream"):
            answer = json.dumps(responses.response_object(self._chats, body, output)).encode()
            if reply.broken_after is not None:
                return _Truncated([answer[: len(answer) // 2]], "application/json")
            return Response(answer, media_type="application/json")
        events = responses.response_events(self._chats, body, output)
        if reply.broken_after is not None:  # created, in_progress, item and part added, deltas
            return _Truncated(events[: 4 + reply.broken_after], "text/event-stream")
        return _EventStream(events, reply.delay, self._count_disconnect)

    def _anthropic(self, body: Any) -> Response:
        if self.script and "status" in self.script[0]:  # a scripted raw answer, as for chats
            item = self.script.pop(0)
            return JSONResponse(item.get("body", {}), status_code=item["status"])
        self._chats += 1
        said = f"Noted, turn {self._chats}."
        prompt = _tokens(json.dumps(body))
        return JSONResponse(
            {
                "id": f"msg_test_{self._chats}",
                "type": "message",
                "role": "assistant",
                "model": str((body or {}).get("model", "")),
                "content": [{"type": "text", "text": said}],
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": prompt, "output_tokens": _tokens(said)},
            }
        )

    def _next_reply(
        self, model: str, messages: list[dict[str, Any]], script: list[dict[str, Any]]
    ) -> _Reply | Response:
        if script:
            item = script.pop(0)
            if "status" in item:
                status, headers = item["status"], item.get("headers")
                return JSONResponse(item.get("body", {}), status_code=status, headers=headers)
            calls = tuple(item.get("tool_calls", ()))
            delay, broken_after = item.get("delay", 0.0), item.get("broken_after")
            return _Reply(item.get("content"), calls, delay=delay, broken_after=broken_after)
        if model in _ERRORS:
            return _error(*_ERRORS[model])
        user = next((m for m in reversed(messages) if m.get("role") == "user"), {})
        echo = ("echo: " + _text(user.get("content")))[:ECHO_LIMIT]
        if model == "tool-call":
            return _Reply(tool_calls=(WEATHER_CALL,))
        if model == "slow":
            return _Reply(LONG_REPLY, delay=0.05)
        if model == "broken":
            return _Reply(LONG_REPLY, broken_after=3)
        return _Reply(echo, logprobs=model == "logprobs")

    def _event_stream(self, events: list[bytes], delay: float) -> Response:
        return _EventStream(events, delay, self._count_disconnect)

    def _count_disconnect(self) -> None:
        self.disconnects += 1

    def _nodelay(self, request: Request) -> bool:
        """TCP_NODELAY on the server-side socket this request arrived on."""
        assert self._server is not None and request.client is not None
        for connection in self._server.server_state.connections:
            if getattr(connection, "client", None) == tuple(request.client):
                sock = connection.transport.get_extra_info("socket")
                return bool(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        return False


class _EventStream(StreamingResponse):
    """SSE events, one body message each; counts a client that leaves before the last one."""

    def __init__(
        self, events: list[bytes], delay: float, on_disconnect: Callable[[], None]
    ) -> None:
        self._events, self._delay, self._on_disconnect = events, delay, on_disconnect
        self._finished = False
        self._generator = self._generate()
        super().__init__(self._generator, media_type="text/event-stream")

    async def _generate(self) -> AsyncGenerator[bytes, None]:
        for index, event in enumerate(self._events):
            if index and self._delay:
                await asyncio.sleep(self._delay)
            yield event
        self._finished = True

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # uvicorn's h11 speaks ASGI 2.3, so Starlette cancels the stream when the client leaves.
        try:
            await super().__call__(scope, receive, send)
        finally:
            await self._generator.aclose()
            if not self._finished:
                self._on_disconnect()


class _Truncated(Response):
    """Sends the start of a body and returns; uvicorn then drops the connection mid-body."""

    def __init__(self, parts: list[bytes], media_type: str) -> None:
        super().__init__(media_type=media_type)
        self.raw_headers = [(b"content-type", media_type.encode())]  # no content-length: chunked
        self._parts = parts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        for part in self._parts:
            await send({"type": "http.response.body", "body": part, "more_body": True})


def _error(status: int, kind: str, code: str, message: str) -> JSONResponse:
    headers = {"retry-after": "7"} if status == 429 else None
    body = {"error": {"message": message, "type": kind, "param": None, "code": code}}
    return JSONResponse(body, status_code=status, headers=headers)


def _text(content: Any) -> str:
    """A message's text: string content, or the text parts of a list joined together (parts
    that are not objects with a string `text`, as a client's bug sends, count as no text)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p for p in content if isinstance(p, dict) and p.get("type") == "text"]
        return "".join(p["text"] for p in parts if isinstance(p.get("text"), str))
    return ""


def _tokens(text: str) -> int:
    return (len(text) + 3) // 4  # a fixed stand-in for a tokenizer: one token per 4 characters


def _pieces(text: str) -> list[str]:
    return [text[i : i + CHUNK_CHARS] for i in range(0, len(text), CHUNK_CHARS)]


def _logprobs(text: str) -> dict[str, Any]:
    entries = [
        {"token": p, "logprob": -0.5, "bytes": list(p.encode()), "top_logprobs": []}
        for p in _pieces(text)
    ]
    return {"content": entries, "refusal": None}


def _usage(turn: _Turn, reply: _Reply) -> dict[str, int]:
    said = (reply.content or "") + "".join(call["arguments"] for call in reply.tool_calls)
    prompt, completion = turn.prompt_tokens, _tokens(said)
    total = prompt + completion
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": total}


def _tool_call(call: dict[str, str]) -> dict[str, Any]:
    function = {"name": call["name"], "arguments": call["arguments"]}
    return {"id": call["id"], "type": "function", "function": function}


def _head(turn: _Turn, kind: str) -> dict[str, Any]:
    """Fields shared by a completion and each of its chunks."""
    head = {"id": f"chatcmpl-test-{turn.number}", "object": kind, "created": CREATED}
    return {**head, "model": turn.model, "system_fingerprint": "fp_test"}


def _completion(turn: _Turn, reply: _Reply) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.tool_calls:
        message["tool_calls"] = [_tool_call(call) for call in reply.tool_calls]
    logprobs = _logprobs(reply.content or "") if reply.logprobs else None
    choice = dict(index=0, message=message, logprobs=logprobs, finish_reason=reply.finish_reason)
    return {**_head(turn, "chat.completion"), "choices": [choice], "usage": _usage(turn, reply)}


def _events(turn: _Turn, reply: _Reply) -> list[bytes]:
    """The whole SSE stream, one ``data:`` event per element, ending with ``[DONE]``."""
    head = _head(turn, "chat.completion.chunk")
    extra = {"usage": None} if turn.include_usage else {}

    def chunk(delta: dict[str, Any], finish: str | None = None, lp: Any = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "logprobs": lp, "finish_reason": finish}
        return {**head, "choices": [choice], **extra}

    chunks = [chunk({"role": "assistant", "content": "" if reply.content is not None else None})]
    for piece in _pieces(reply.content or ""):
        chunks.append(chunk({"content": piece}, lp=_logprobs(piece) if reply.logprobs else None))
    for index, call in enumerate(reply.tool_calls):
        opening = {"index": index, **_tool_call({**call, "arguments": ""})}
        chunks.append(chunk({"tool_calls": [opening]}))
        for piece in _pieces(call["arguments"]):
            part = {"index": index, "function": {"arguments": piece}}
            chunks.append(chunk({"tool_calls": [part]}))
    chunks.append(chunk({}, finish=reply.finish_reason))
    if turn.include_usage:
        chunks.append({**head, "choices": [], "usage": _usage(turn, reply)})
    return [f"data: {json.dumps(c)}\n\n".encode() for c in chunks] + [b"data: [DONE]\n\n"]


@contextlib.contextmanager
def serve_upstream() -> Iterator[Upstream]:
    """Serve a fresh ``Upstream`` on 127.0.0.1 and a free port until the block exits."""
    # asyncio sets TCP_NODELAY only on sockets whose proto is IPPROTO_TCP; with the default
    # proto 0 accepted connections keep Nagle on (base_events._set_nodelay).
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    host, port = sock.getsockname()
    upstream = Upstream(f"http://{host}:{port}/v1")
    # log_config=None leaves global logging alone; uvicorn's records reach pytest's capture.
    # h11 on asyncio whatever else is installed: the stand-in's behaviour (a client that
    # leaves, below) and its cost in benchmarks stay the same when moim's parser changes.
    config = uvicorn.Config(
        upstream.app,
        log_level="warning",
        lifespan="off",
        log_config=None,
        http="h11",
        loop="asyncio",
    )
    server = upstream._server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            sock.close()
            raise RuntimeError("the fake upstream did not start")
        time.sleep(0.001)
    try:
        yield upstream
    finally:
        server.should_exit = True
        thread.join()
