"""One request that gets memory, in the order of DESIGN.md's diagram, one line per step.

who → measure → recall → budget → inject (in `memory`) → forward → stream back → remember.
This module owns the order and the fail-open: if any memory step fails, the request goes
on exactly as the client sent it and the response says so in `x-memory-error`.

Each API with memory, chat completions (`proxy/chat.py`) and the Responses API
(`proxy/responses.py`), runs these steps through an `Api` of its own: how its body is
checked, the `Conversation` the memory steps read from it (chat messages, and how the block
is written back), and how it is forwarded. The byte path to an OpenAI-compatible upstream
(`forward_bytes`) and the hand-over to the writer (`remember`) are shared. The records the
steps pass along are in `proxy/exchange.py`; the bodies of the memory steps (measure, recall,
inject) in `proxy/recall_step.py`.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

import anyio.to_thread
import httpx
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from memory import ResponseLink, Turn, without_inline_data
from proxy import request_json
from proxy.auth import authenticate, sees_account_state
from proxy.client_gone import CLIENT_CLOSED, ClientLeft, until_client_leaves
from proxy.errors import BadRequest, ProxyError, error_response
from proxy.exchange import Api, Conversation, Exchange, Prepared, Report
from proxy.header_lines import with_provider_headers, without_account
from proxy.held_history import check_held_history
from proxy.identity import BODY_USER_FIELDS, Identity, Mode, identify, memory_mode
from proxy.json_items import Located
from proxy.limits import read_body
from proxy.overflow import refusal_of_block
from proxy.recall_step import measure_and_recall, wait_for_searchable
from proxy.request_metrics import endpoint_of
from proxy.streaming import EndCallback, EventCollector, not_stored, read_reply, relay
from proxy.upstream import (
    body_chunks,
    open_openai,
    provider_key,
    resolve,
)
from proxy.upstream_errors import unreachable, without_key

if TYPE_CHECKING:
    from proxy.state import AppState

logger = logging.getLogger(__name__)


async def handle(
    request: Request, state: AppState, api: Api, path_user: str | None = None
) -> Response:
    """Answer one request of `api`, with memory."""
    started = time.perf_counter()
    forget_mark, arrived_at = state.writer.forget_mark(), time.time()
    headers = header_values(request.scope["headers"])
    report = Report(request_id=headers.get("x-request-id") or new_request_id())
    try:
        caller = authenticate(headers, state.config)
        raw = await read_body(request, state.config.max_body_bytes, state.config.body_timeout)
        # with memory off nothing is placed nor journaled: no need to note where messages lie
        mode = memory_mode(headers.get("x-memory-mode"), state.config.memory_enabled)
        body, conversation = api.read(raw, state.config.max_messages, mode is not Mode.OFF)
        who = identify(
            headers,
            {**{f: body.get(f) for f in BODY_USER_FIELDS}, "messages": conversation.messages},
            path_user,
            caller.bound_user,
            state.config.memory_enabled,
            state.config.memory_tools,
            state.config.skip_ui_tasks,
        )
        caller.check_user(who.user_id)
        if conversation.held and not sees_account_state(caller, state.config):
            await check_held_history(state, who.user_id, conversation)
        target = resolve(body["model"], state.config)
        if api.check is not None:  # before any memory step: a refusal stores nothing
            api.check(body, target, state.config)
    except ProxyError as exc:
        return _error(exc, report)
    report.mode, report.session_id, report.ui_task = who.mode.value, who.session_id, who.ui_task
    if who.mode is Mode.OFF:  # nothing to measure or recall: no coroutine to make and await
        prepared = Prepared(who)
    else:
        prepared = await prepare(state, who, conversation, report, len(raw), target.model)
    who = prepared.who
    report.session_id = who.session_id
    if who.mode.writes and body.get("stream") is True:
        # a stream's headers go out before its turn is journaled: say now if that is failing
        report.error = report.error or state.writer.journal_problem()
    report.overhead_ms = (time.perf_counter() - started) * 1000
    authorization = provider_key(target, state.config, caller.authorization)
    try:
        exchange = Exchange(
            state,
            without_account(request.scope["headers"], bool(state.config.keys)),
            target,
            body,
            raw,
            conversation,
            prepared,
            authorization,
            report,
            request.receive,
            request.scope["query_string"].decode("latin-1"),
            forget_mark,
            arrived_at,
        )
        response = await api.forward(exchange)
    except ProxyError as exc:
        response = _error(exc, report)
    except ClientLeft:  # no one reads the answer: the log line and the metrics say so
        response = Response(status_code=CLIENT_CLOSED, headers=report.headers())
    if prepared.settle is not None:  # the inspector's record, once the answer is sent
        response.background = _after(response.background, prepared.settle)
    _log(who, body, report, response.status_code)
    # the path as routed: `request.url` would build and parse a whole URL (~8 µs)
    state.metrics.observe(endpoint_of(request.scope["path"]), report)
    return response


def header_values(raw: Iterable[tuple[bytes, bytes]]) -> dict[str, str]:
    """A request's headers as a dict: each name as ASGI gives it (lower case) with its first
    value, as Starlette's `Headers.get` reads it. A request looks up about fifteen names, most
    of them absent; a miss in `Headers` is a scan of every header and a KeyError (~1.3 µs),
    here one probe."""
    return {name.decode("latin-1"): value.decode("latin-1") for name, value in reversed(list(raw))}


def new_request_id() -> str:
    """A request id for a request that brought none: what `uuid.uuid4().hex` gives (32 hex
    digits from the OS's random bytes, the same version and variant bits) without building a
    `UUID` object (3.5-5.8 → 1.2-2.9 µs)."""
    bits = int.from_bytes(os.urandom(16)) & ~_UUID_VERSION_MASK | _UUID4_BITS
    return f"{bits:032x}"


# uuid.UUID(version=4) clears these bits (the variant's two, the version's four) and sets
# variant 10 (RFC 4122) and version 4
_UUID_VERSION_MASK = (0xC000 << 48) | (0xF000 << 64)
_UUID4_BITS = (0x8000 << 48) | (4 << 76)


def model_body(raw: bytes, key: str | None = None) -> tuple[dict[str, Any], Located | None]:
    """The request JSON: an object with a `model` string and a `stream` that is a boolean or
    null (not streamed, as OpenAI takes it), as every API with memory takes; and where its
    values lie in its text, with (`key`) the items of its array `key`
    (`request_json.loads_locating`)."""
    try:
        body, located = request_json.loads_locating(raw, key)
    except ValueError as exc:  # UnicodeDecodeError too
        raise BadRequest(f"request body is not valid JSON: {exc}", code="invalid_json") from None
    if not isinstance(body, dict):
        raise BadRequest("request body must be a JSON object", code="invalid_body")
    if not isinstance(body.get("model"), str) or not body["model"].strip():
        raise BadRequest(
            "'model' is required and must be a string", param="model", code="invalid_model"
        )
    if body.get("stream") is not None and not isinstance(body["stream"], bool):
        raise BadRequest("'stream' must be a boolean or null", param="stream")
    return body, located


async def prepare(
    state: AppState,
    who: Identity,
    conversation: Conversation,
    report: Report,
    size: int,
    model: str,
) -> Prepared:
    """Measure, recall, budget and inject (for a mode other than off; `size`: the body's
    bytes, `model` the provider's name for the model, which the body sent names).

    The one broad `except` of the request path: whatever fails in memory, the request still
    goes through, without memory, and the response says so.
    """
    try:
        # The searches start now, on the layer's threads; measuring the request and
        # resolving its session run meanwhile, on a worker thread (the loop's executor). The
        # block is then built and placed by the thread that searched, which wakes this loop
        # when it is done: the loop is woken once, not also when the worker is.
        pending = None
        if who.mode.reads and not conversation.held:
            await wait_for_searchable(state, who, conversation, report)
            pending = state.layer.begin_recall(who.user_id, conversation.messages)
        prepared: Future[Prepared] = Future()
        measure = functools.partial(
            measure_and_recall, state, who, conversation, report, pending, size, model
        )
        asyncio.get_running_loop().run_in_executor(None, _settle_into, prepared, measure)
        return await asyncio.wrap_future(prepared)  # one wake, when the block is placed
    except Exception as exc:
        logger.exception("memory recall failed; forwarding without memory")
        report.error = f"recall failed: {type(exc).__name__}"
        report.error_kind = type(exc).__name__
        return Prepared(who)


def _settle_into(
    prepared: Future[Prepared], measure: Callable[[], Prepared | Future[Prepared]]
) -> None:
    """Run `measure` (on a worker thread) and have `prepared` hold what it comes to: its
    result, or, when the search under way will finish the recall, that recall's result, set
    by the search's thread. The event loop waits on `prepared` alone, so it is woken once a
    request, not also when this thread is done."""
    try:
        result = measure()
    except BaseException as exc:
        prepared.set_exception(exc)
        return
    if not isinstance(result, Future):
        prepared.set_result(result)
        return

    def copy(done: Future[Prepared]) -> None:
        error = done.exception()
        if error is not None:
            prepared.set_exception(error)
        else:
            prepared.set_result(done.result())

    result.add_done_callback(copy)


def _after(background: BackgroundTask | None, settle: Callable[[], None]) -> BackgroundTask:
    """`background`, then `settle`, run once the response is sent, on a worker thread.

    Not on the event loop: the record tells what was left out, and for a large user that
    reads the text of the hits past the block's pool from the store (kept_text.py): at 100k
    chunks 5.3 ms of wall p50 (10.8 p90, 3.5 of CPU) after each answer, during which the
    loop served no other request (docs/performance.md, "Fourteenth pass")."""

    async def then() -> None:
        if background is not None:
            await background()
        try:
            await anyio.to_thread.run_sync(settle)
        except Exception:  # the inspector's loss, never the request's
            logger.exception("keeping the request for the inspector failed")

    return BackgroundTask(then)


async def forward_bytes(
    exchange: Exchange,
    path: str,
    content: bytes,
    collector: EventCollector,
    on_end: EndCallback,
) -> Response:
    """POST `content` to an OpenAI-compatible upstream's `path`; relay its answer byte for
    byte, gathering the reply on the side."""
    prepared, report = exchange.prepared, exchange.report
    try:  # a client that leaves before the answer ends the provider's call (client_gone.py)
        upstream, data = await until_client_leaves(
            exchange.receive, _answer(exchange, path, content)
        )
        refused = None
        if isinstance(data, bytes) and prepared.body is not None:
            refused = refusal_of_block(upstream.status_code, data)
        if refused is not None:
            # refused because of the block (overflow.py): sent again as the client sent it
            report.without_block(refused)
            upstream, data = await until_client_leaves(
                exchange.receive, _answer(exchange, path, exchange.plain)
            )
    except ClientLeft:
        on_end(True)  # what the client said is kept, as when it leaves a stream
        raise
    if not isinstance(data, bytes):  # a stream (or a body past the bound), relayed as it comes
        # nothing to gather for a turn not stored, but a Responses reply's id (held_history.py)
        kept = collector if prepared.who.mode.writes or collector.keeps_reply_ids else None
        limit = exchange.state.config.max_body_bytes
        if not upstream.is_success:  # an error (or a redirect) past the bound: no turn
            kept, on_end = None, not_stored
        streamed = StreamingResponse(
            relay(data, kept, on_end, upstream.aclose, limit, key=exchange.authorization),
            status_code=upstream.status_code,
            headers=report.headers(),
        )
        return with_provider_headers(streamed, upstream)
    data = without_key(data, exchange.authorization)
    if upstream.is_success:  # a redirect is answered wherever the client follows it to
        collector.feed_json(data)
        on_end(False)  # before the headers: they say if this turn's journal write failed
    whole = Response(data, status_code=upstream.status_code, headers=report.headers())
    return with_provider_headers(whole, upstream)


async def _answer(
    exchange: Exchange, path: str, content: bytes
) -> tuple[httpx.Response, bytes | AsyncIterator[bytes]]:
    """The provider's response to `content`, with its body read whole, or its body's bytes to
    relay as they come: a stream's, or a body's past `server.max_body_bytes`, a success's or
    an error's (`read_reply`), which moim does not hold whole."""
    try:
        upstream = await open_openai(
            exchange.state.client,
            exchange.target,
            content,
            exchange.authorization,
            exchange.header_lines,
            path,
            exchange.query,
        )
    except httpx.HTTPError as exc:
        raise unreachable(exc) from exc
    streaming = upstream.headers.get("content-type", "").startswith("text/event-stream")
    if upstream.status_code < 400 and streaming:
        return upstream, body_chunks(upstream)
    return upstream, await read_reply(upstream, exchange.state.config.max_body_bytes)


def remember(exchange: Exchange, collector: EventCollector) -> EndCallback:
    """The callback that hands a finished (or abandoned) turn to the writer, unless its user
    was forgotten since the request arrived.

    A Responses API reply's id is noted at once (`AppState.responses`), in every mode, so a
    request that continues it finds its session before the writer has stored the turn, and
    with proxy keys is known to be this user's (`proxy/held_history.py`).

    A journal write that fails is this request's to report, and no other's: in its
    `x-memory-error` when the response is whole (its headers are not sent yet), else in the
    log line below, under its request id.
    """
    state, prepared, conversation = exchange.state, exchange.prepared, exchange.conversation
    report, who = exchange.report, exchange.prepared.who

    def on_end(partial: bool) -> None:
        if collector.response_id is not None:
            link = ResponseLink(who.session_id, collector.context_tokens)
            state.responses.note(who.user_id, collector.response_id, link)
        mark = exchange.forget_mark
        if not who.mode.writes or state.writer.forgotten_since(who.user_id, mark, who.session_id):
            return
        replies = collector.replies()
        # an image's, a sound's or a file's bytes are not memory's (memory/ingest/media.py)
        messages = without_inline_data((*conversation.messages, *replies[:-1]))
        error = state.writer.submit(
            Turn(
                user_id=who.user_id,
                session_id=who.session_id,
                model=conversation.model,
                messages=messages,
                reply=replies[-1] if replies else None,
                created_at=who.timestamp if who.timestamp is not None else time.time(),
                partial=partial,
                # none when the block was not sent after all (`Report.without_block`)
                extra={"injected_facts": prepared.fact_ids if report.block else ()},
                response_id=collector.response_id,
                context_tokens=collector.context_tokens,
                continues=conversation.held,
                arrived_at=exchange.arrived_at,
                messages_json=_as_sent(conversation, messages),
                answer_in_call=exchange.forces_a_function,
                named_session=who.explicit_session,
            )
        )
        if error is not None:
            report.error = error
            logger.warning("request_id=%s user_id=%s %s", report.request_id, who.user_id, error)

    return on_end


def _as_sent(conversation: Conversation, messages: Sequence[Mapping[str, Any]]) -> str | None:
    """The JSON text of `messages` as the client sent it, when they are the messages it sent
    (none lost inline data, no reply of the provider's came before the last), for the
    journal's line (`Turn.messages_json`); else None."""
    items, sent = conversation.message_items, conversation.messages
    if items is None or len(messages) != len(sent):
        return None
    return items.array() if all(a is b for a, b in zip(messages, sent, strict=True)) else None


def _error(exc: ProxyError, report: Report) -> Response:
    return error_response(exc, report.headers())


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
        report.log_notes(),
    )
