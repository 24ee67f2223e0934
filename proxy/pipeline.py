"""One chat request, in the order of DESIGN.md's diagram, one line per step.

who → measure → recall → budget → inject (in `memory`) → forward → stream back → remember.
This module owns the order and the fail-open: if any memory step fails, the request goes
on exactly as the client sent it and the response says so in `x-memory-error`.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import anyio.to_thread
import httpx
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from memory import (
    RecallRequest,
    Turn,
    context_window,
    count_message_tokens,
    fill_ratio,
    inject_block,
)
from proxy import litellm_params, request_json, tool_loop, tools
from proxy.auth import authenticate
from proxy.errors import BadRequest, ProxyError, UpstreamError
from proxy.identity import Identity, Mode, identify
from proxy.limits import read_body
from proxy.streaming import ReplyCollector, relay
from proxy.upstream import (
    Target,
    call_litellm,
    litellm_json,
    litellm_sse,
    open_openai,
    provider_key,
    relayed_headers,
    resolve,
    unreachable,
    upstream_error,
)

if TYPE_CHECKING:
    from proxy.app import AppState

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class Report:
    """What moim did for one request, sent back as `x-memory-*` headers."""

    request_id: str
    mode: str = "off"
    session_id: str = ""
    tier: int = 0
    fill_ratio: float = 0.0
    tokens: int = 0
    chunks: int = 0
    facts: int = 0
    overhead_ms: float = 0.0
    error: str | None = None

    def headers(self) -> dict[str, str]:
        headers = {
            "x-request-id": self.request_id,
            "x-memory-mode": self.mode,
            "x-memory-session-id": self.session_id,
            "x-memory-tier": str(self.tier),
            "x-memory-fill-ratio": f"{self.fill_ratio:.4f}",
            "x-memory-tokens-injected": str(self.tokens),
            "x-memory-chunks-injected": str(self.chunks),
            "x-memory-facts-injected": str(self.facts),
            "x-memory-overhead-ms": f"{self.overhead_ms:.2f}",
        }
        if self.error:
            headers["x-memory-error"] = self.error
        return headers


async def chat(request: Request, state: AppState, path_user: str | None = None) -> Response:
    """Handle `POST /v1/chat/completions` (and its aliases)."""
    started = time.perf_counter()
    report = Report(request_id=request.headers.get("x-request-id") or uuid.uuid4().hex)
    try:
        caller = authenticate(request.headers, state.config)
        raw = await read_body(request, state.config.max_body_bytes, state.config.body_timeout)
        body = parse_chat_body(raw, state.config.max_messages)
        who = identify(
            request.headers,
            body,
            path_user,
            caller.bound_user,
            state.config.memory_enabled,
            state.config.memory_tools,
        )
        caller.check_user(who.user_id)
        target = resolve(body["model"], state.config)
        if target.kind == "litellm":  # only OpenAI's parameters; address and key from config
            litellm_params.refuse_unsafe(body, alias=body["model"] in state.config.routes)
    except ProxyError as exc:
        return _error(exc, report)
    report.mode, report.session_id = who.mode.value, who.session_id
    prepared = await prepare(state, who, body, report)
    who = prepared.who
    report.session_id = who.session_id
    report.error = report.error or state.writer.take_error()
    report.overhead_ms = (time.perf_counter() - started) * 1000
    authorization = provider_key(target, state.config, caller.authorization)
    try:
        response = await forward(state, request, target, body, raw, prepared, authorization, report)
    except ProxyError as exc:
        response = _error(exc, report)
    _log(who, body, report, response.status_code)
    return response


def parse_chat_body(raw: bytes, max_messages: int) -> dict[str, Any]:
    """The request JSON, checked just enough to route and remember it."""
    try:
        body = request_json.loads(raw)
    except ValueError as exc:  # UnicodeDecodeError too
        raise BadRequest(f"request body is not valid JSON: {exc}", code="invalid_json") from None
    if not isinstance(body, dict):
        raise BadRequest("request body must be a JSON object", code="invalid_body")
    if not isinstance(body.get("model"), str) or not body["model"].strip():
        raise BadRequest(
            "'model' is required and must be a string", param="model", code="invalid_model"
        )
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest(
            "'messages' is required and must be a non-empty array",
            param="messages",
            code="invalid_messages",
        )
    if len(messages) > max_messages:
        raise BadRequest(f"'messages' has more than {max_messages} items", param="messages")
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise BadRequest(
                f"messages[{index}] must be an object with a 'role' string",
                param=f"messages[{index}]",
                code="invalid_message",
            )
        content = message.get("content")
        if content is not None and not isinstance(content, (str, list)):
            raise BadRequest(
                f"messages[{index}].content must be a string, an array or null",
                param=f"messages[{index}].content",
                code="invalid_message",
            )
    if "stream" in body and not isinstance(body["stream"], bool):
        raise BadRequest("'stream' must be a boolean", param="stream")
    return body


@dataclass(frozen=True, slots=True)
class Prepared:
    """Who the request is for (session resolved) and the body to send (None: the client's)."""

    who: Identity
    body: bytes | None = None
    fact_ids: tuple[int, ...] = ()


async def prepare(state: AppState, who: Identity, body: dict[str, Any], report: Report) -> Prepared:
    """Measure, recall, budget and inject.

    The one broad `except` of the request path: whatever fails in memory, the request still
    goes through, without memory, and the response says so.
    """
    if who.mode is Mode.OFF:
        return Prepared(who)
    try:
        return await anyio.to_thread.run_sync(_prepare, state, who, body, report)
    except Exception as exc:
        logger.exception("memory recall failed; forwarding without memory")
        report.error = f"recall failed: {type(exc).__name__}"
        return Prepared(who)


def _prepare(state: AppState, who: Identity, body: dict[str, Any], report: Report) -> Prepared:
    settings = state.layer.settings
    model = body["model"]
    tokens = count_message_tokens(body["messages"], model)
    window = context_window(model, settings.context_windows, settings.default_context_window)
    report.fill_ratio = fill_ratio(tokens, window)
    if not who.explicit_session:
        session_id = state.layer.continue_session(who.user_id, who.session_id, body["messages"])
        who = replace(who, session_id=session_id)
    if not who.mode.reads:
        return Prepared(who)
    recollection = state.layer.recall(
        RecallRequest(
            who.user_id, who.session_id, model, body["messages"], tokens, window, who.context_budget
        )
    )
    report.tier = recollection.tier.level
    if recollection.warming:
        report.error = "embedding model still loading: facts only, no excerpts"
    if recollection.block is None:
        return Prepared(who)
    report.tokens = recollection.block.tokens
    report.chunks = recollection.block.excerpts
    report.facts = recollection.block.facts
    messages = inject_block(body["messages"], recollection.block.text, settings.placement)
    content = json.dumps({**body, "messages": messages}, ensure_ascii=False).encode()
    return Prepared(who, content, recollection.block.fact_ids)


async def forward(
    state: AppState,
    request: Request,
    target: Target,
    body: dict[str, Any],
    raw: bytes,
    prepared: Prepared,
    authorization: str | None,
    report: Report,
) -> Response:
    """Send upstream and answer the client; hand the turn to the writer when it ends."""
    collector = ReplyCollector()
    outbound = prepared.body
    on_end = _remember(state, prepared, body, collector)
    if target.kind == "litellm":
        sent = json.loads(outbound) if outbound is not None else body
        return await _forward_litellm(state, target, sent, authorization, collector, on_end, report)
    content = outbound if outbound is not None else raw
    if target.model != body["model"]:  # a config alias names another model upstream
        content = json.dumps({**json.loads(content), "model": target.model}).encode()
    if tools.applies(prepared.who, target, body):  # memory tools: the loop is tool_loop.py
        return await tool_loop.forward_with_tools(
            state,
            request.headers,
            target,
            content,
            prepared,
            authorization,
            collector,
            on_end,
            report,
        )
    try:
        upstream = await open_openai(state.client, target, content, authorization, request.headers)
    except httpx.HTTPError as exc:
        raise unreachable(exc) from exc
    headers = {**relayed_headers(upstream), **report.headers()}
    streaming = upstream.headers.get("content-type", "").startswith("text/event-stream")
    if upstream.status_code < 400 and streaming:
        kept = collector if prepared.who.mode.writes else None  # nothing to gather otherwise
        return StreamingResponse(
            relay(upstream.aiter_raw(), kept, on_end, upstream.aclose),
            status_code=upstream.status_code,
            headers=headers,
        )
    try:
        data = await upstream.aread()
    except httpx.HTTPError as exc:
        message = upstream_error("upstream closed the connection", "upstream_broken")
        raise UpstreamError(502, message) from exc
    finally:
        await upstream.aclose()
    if upstream.status_code < 400:
        collector.feed_json(data)
        on_end(False)
    return Response(data, status_code=upstream.status_code, headers=headers)


async def _forward_litellm(
    state: AppState,
    target: Target,
    body: dict[str, Any],
    authorization: str | None,
    collector: ReplyCollector,
    on_end: Any,
    report: Report,
) -> Response:
    result = await call_litellm(target, body, authorization, state.config.read_timeout)
    if body.get("stream") is True:
        return StreamingResponse(
            relay(litellm_sse(result), collector, on_end),
            media_type="text/event-stream",
            headers=report.headers(),
        )
    data = litellm_json(result)
    collector.feed_json(data)
    on_end(False)
    return Response(data, media_type="application/json", headers=report.headers())


def _remember(
    state: AppState, prepared: Prepared, body: Mapping[str, Any], collector: ReplyCollector
) -> Any:
    """The callback that hands a finished (or abandoned) turn to the writer."""
    who = prepared.who

    def on_end(partial: bool) -> None:
        if not who.mode.writes:
            return
        state.writer.submit(
            Turn(
                user_id=who.user_id,
                session_id=who.session_id,
                model=str(body["model"]),
                messages=tuple(body["messages"]),
                reply=collector.reply(),
                created_at=who.timestamp if who.timestamp is not None else time.time(),
                partial=partial,
                extra={"injected_facts": prepared.fact_ids},
            )
        )

    return on_end


def _error(exc: ProxyError, report: Report) -> Response:
    headers = {**exc.headers, **report.headers()}
    if isinstance(exc, UpstreamError):
        return Response(
            exc.content, status_code=exc.status, headers=headers, media_type="application/json"
        )
    return Response(
        json.dumps(exc.body()),
        status_code=exc.status,
        headers=headers,
        media_type="application/json",
    )


def _log(who: Identity, body: Mapping[str, Any], report: Report, status: int) -> None:
    logger.info(
        "request_id=%s user_id=%s model=%s mode=%s tier=%s fill_ratio=%.4f chunks=%s "
        "overhead_ms=%.2f status=%s%s",
        report.request_id,
        who.user_id,
        body.get("model"),
        report.mode,
        report.tier,
        report.fill_ratio,
        report.chunks,
        report.overhead_ms,
        status,
        f" memory_error={report.error!r}" if report.error else "",
    )
