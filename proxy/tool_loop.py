"""The memory-tool loop: moim runs the model's calls to its own tools inside one chat request.

The loop, at most `MAX_ROUNDS` upstream calls (the last one offers no moim tools):

- non-streaming: send the body plus moim's tools; if the assistant message calls moim's tools,
  run them in a worker thread. With no client call in it, append that message (moim's calls
  only) and one `tool` message per call, and ask again. With client calls too, the response
  goes to the client with moim's calls removed, so no `tool_call_id` is left without its
  result (`finish_reason` stays "tool_calls"). A response with no moim call is relayed as the
  provider sent it; one with calls removed is re-serialised.
- streaming: each round is streamed but held back until the turn shows it is the client's:
  the first content delta or client tool call flushes what was held and relays the rest as it
  arrives. A round that ends having called only moim's tools is never shown; its calls are
  run and the next round starts. moim calls that arrive after content are run when the round
  ends (before `[DONE]` is relayed) and their deltas are dropped; client calls are renumbered
  from index 0 and a `finish_reason` of "tool_calls" with no client call left becomes "stop".
  So text the model says before calling a moim tool ("Let me note that") reaches the client,
  and the round it belongs to is the final one: the tool still runs, but the model does not
  see its result in this request.

A provider that breaks off a round moim holds back (the client has been sent nothing yet) gets
the client a 502 `upstream_broken` in OpenAI's error shape, and nothing is stored; one that
breaks off the round being relayed breaks the client's connection off (`proxy/break_off.py`),
the part said stored partial.

While a round is awaited (the whole answer, or a streamed round until it speaks), moim listens
on the client's connection (`proxy/client_gone.py`): a client that leaves ends the provider's
call, and what it said is stored as on the byte path. The streamed rounds (`RoundFilter`) are
read by `proxy/round_filter.py`.

The client sees only the final round (its `usage` counts that round only); `remember` stores
the client's messages and that final reply, never moim's internal rounds. Tool results are
JSON strings; bad arguments give `{"error": ...}` for the model, never an exception.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Awaitable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import anyio.to_thread
import httpx
from starlette.responses import Response, StreamingResponse
from starlette.types import Receive

from proxy import request_json
from proxy.client_gone import ClientLeft, until_client_leaves
from proxy.header_lines import with_provider_headers
from proxy.identity import Identity
from proxy.json_items import Items, Located
from proxy.round_filter import RoundFilter, is_done, sse_events
from proxy.streaming import EndCallback, ReplyCollector, not_stored, read_reply, relay
from proxy.tools import MAX_ROUNDS, execute, is_memory_call, memory_tools_edit, offered
from proxy.upstream import (
    Target,
    body_chunks,
    open_openai,
)
from proxy.upstream_errors import broken_off, unreachable, without_key

if TYPE_CHECKING:
    from proxy.exchange import Exchange, Report
    from proxy.state import AppState

logger = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class _Loop:
    """What every round of one request needs: where to send, and whose memory to use."""

    state: AppState
    target: Target
    authorization: str | None
    header_lines: Sequence[tuple[bytes, bytes]]
    who: Identity
    collector: ReplyCollector
    on_end: EndCallback
    report: Report
    receive: Receive  # the client's connection: says when the client leaves (client_gone.py)
    query: str = ""

    async def listening(self, waiting: Awaitable[T]) -> T:
        """What `waiting` (a round's wait for the provider) comes to; when the client leaves
        first, the provider's call is ended and what the client said is kept, as on the byte
        path, and `ClientLeft` raised."""
        try:
            return await until_client_leaves(self.receive, waiting)
        except ClientLeft:
            self.on_end(True)
            raise

    async def open(self, content: bytes) -> httpx.Response:
        try:
            return await open_openai(
                self.state.client,
                self.target,
                content,
                self.authorization,
                self.header_lines,
                query=self.query,
            )
        except httpx.HTTPError as exc:
            raise unreachable(exc) from exc

    async def run(self, calls: Sequence[Mapping[str, Any]]) -> list[str]:
        """Execute moim's calls in a worker thread; one result per call, in order."""
        layer, user_id, allowed = self.state.layer, self.who.user_id, offered(self.who.mode)
        return await anyio.to_thread.run_sync(
            lambda: [execute(layer, user_id, call, allowed) for call in calls]
        )

    async def whole(
        self, upstream: httpx.Response, data: bytes | AsyncIterator[bytes] | None = None
    ) -> Response:
        """Answer with a whole (non-SSE) upstream body; a success ends the turn. A body past
        `server.max_body_bytes` is relayed as it comes, a success's reply not stored (as on
        the byte path, `proxy/pipeline.py`)."""
        if data is None:
            data = await read_reply(upstream, self.state.config.max_body_bytes)
        if not isinstance(data, bytes):
            if not upstream.is_success:
                return self.relayed(upstream, data, None, not_stored)
            return self.relayed(upstream, data, self.collector, self.on_end)
        data = without_key(data, self.authorization)
        if upstream.is_success:  # not an error, nor a redirect (answered elsewhere)
            self.collector.feed_json(data)
            self.on_end(False)
        whole = Response(data, status_code=upstream.status_code, headers=self.report.headers())
        return with_provider_headers(whole, upstream)

    def relayed(
        self,
        upstream: httpx.Response,
        pieces: AsyncIterator[bytes],
        collector: ReplyCollector | None,
        on_end: EndCallback,
    ) -> Response:
        """Relay `pieces` as they come (the collector reading at most the bound), then close
        the upstream."""
        limit = self.state.config.max_body_bytes
        streamed = StreamingResponse(
            relay(pieces, collector, on_end, upstream.aclose, limit, key=self.authorization),
            status_code=upstream.status_code,
            headers=self.report.headers(),
        )
        return with_provider_headers(streamed, upstream)


async def forward_with_tools(
    exchange: Exchange, content: bytes, collector: ReplyCollector, on_end: EndCallback
) -> Response:
    """Forward `content` (the body as it would go upstream) with moim's tools in the loop."""
    loop = _Loop(
        exchange.state,
        exchange.target,
        exchange.authorization,
        exchange.header_lines,
        exchange.prepared.who,
        collector,
        on_end,
        exchange.report,
        exchange.receive,
        exchange.query,
    )
    body, located = request_json.loads_locating(content, "messages")
    assert located is not None and located.items is not None  # moim's own JSON, with messages
    rounds = _Rounds(body, located, located.items)
    if body.get("stream") is True:
        return await _streamed(loop, rounds)
    return await _complete(loop, rounds)


@dataclass(frozen=True, slots=True)
class _Rounds:
    """The body as it goes upstream (`body` parsed, `located` where its values and `items`
    its messages lie in its text): each round's body is its text with moim's additions
    written in, not the whole body written again (`json.dumps`: ~4.7 ms at 487 kB)."""

    body: dict[str, Any]
    located: Located
    items: Items

    def sent(self, added: Sequence[Any], names: Sequence[str]) -> bytes:
        """The body with the messages of moim's rounds so far (`added`) after its own, and
        (`names`) moim's tools after the client's."""
        tools = memory_tools_edit(self.body, self.located, names) if names else None
        written = ",".join(json.dumps(message, ensure_ascii=False) for message in added)
        end = len(self.items.spans)
        return self.located.edited(
            tools, self.items.item_edit(end, written, False) if added else None
        )


def _followup(
    content: Any, calls: Sequence[Mapping[str, Any]], results: Sequence[str]
) -> list[Any]:
    """The assistant message with moim's calls only, then one tool message per call."""
    assistant = {"role": "assistant", "content": content, "tool_calls": list(calls)}
    return [
        assistant,
        *(
            {"role": "tool", "tool_call_id": call["id"], "content": result}
            for call, result in zip(calls, results, strict=True)
        ),
    ]


def _clean(calls: Sequence[Mapping[str, Any]], round_: int) -> list[dict[str, Any]]:
    """moim's calls as they are sent back, each with an id (a provider may omit it)."""
    return [
        {
            "id": call.get("id") or f"call_moim_{round_}_{i}",
            "type": "function",
            "function": {
                "name": call["function"]["name"],
                "arguments": call["function"].get("arguments") or "",
            },
        }
        for i, call in enumerate(calls)
    ]


async def _complete(loop: _Loop, rounds: _Rounds) -> Response:
    added: list[Any] = []
    names = offered(loop.who.mode)
    for round_ in range(MAX_ROUNDS):
        last = round_ == MAX_ROUNDS - 1
        sent = rounds.sent(added, () if last else names)
        upstream, data = await loop.listening(_answered(loop, sent))
        if not isinstance(data, bytes):  # past the bound: relayed, no moim call looked for
            return await loop.whole(upstream, data)
        message = _message(data) if upstream.status_code < 400 else None
        calls = (message or {}).get("tool_calls") or []
        mine = _clean([c for c in calls if is_memory_call(c)], round_)
        if not mine:
            return await loop.whole(upstream, data)
        results = await loop.run(mine)
        if last or any(not is_memory_call(c) for c in calls):
            return await loop.whole(upstream, _without_memory_calls(data))
        assert message is not None
        added += _followup(message.get("content"), mine, results)
    raise AssertionError("unreachable: the last round always answers")


async def _answered(
    loop: _Loop, content: bytes
) -> tuple[httpx.Response, bytes | AsyncIterator[bytes]]:
    """One round, its answer read whole (or past the bound, to relay)."""
    upstream = await loop.open(content)
    return upstream, await read_reply(upstream, loop.state.config.max_body_bytes)


def _message(data: bytes) -> dict[str, Any] | None:
    try:
        message = json.loads(data)["choices"][0]["message"]
    except (ValueError, KeyError, IndexError, TypeError):
        return None
    return message if isinstance(message, dict) else None


def _without_memory_calls(data: bytes) -> bytes:
    """The completion with moim's calls removed; no call left means a plain "stop"."""
    completion = json.loads(data)
    choice = completion["choices"][0]
    kept = [c for c in choice["message"]["tool_calls"] if not is_memory_call(c)]
    if kept:
        choice["message"]["tool_calls"] = kept
    else:
        del choice["message"]["tool_calls"]
        if choice.get("finish_reason") == "tool_calls":
            choice["finish_reason"] = "stop"
    return json.dumps(completion, ensure_ascii=False).encode()


# -- streaming ---------------------------------------------------------------------------------


async def _streamed(loop: _Loop, rounds: _Rounds) -> Response:
    added: list[Any] = []
    names = offered(loop.who.mode)
    for round_ in range(MAX_ROUNDS):
        last = round_ == MAX_ROUNDS - 1
        held = await loop.listening(_hold(loop, rounds.sent(added, () if last else names)))
        upstream, round_filter = held.upstream, held.round_filter
        if held.events is None:
            return await loop.whole(upstream, held.data)
        mine = _clean(round_filter.calls(), round_)
        if round_filter.spoke or not mine or last:
            stream = _rest(loop, held.shown, held.events, round_filter)
            return loop.relayed(upstream, stream, loop.collector, loop.on_end)
        await upstream.aclose()
        added += _followup(None, mine, await loop.run(mine))
    raise AssertionError("unreachable: the last round always answers")


@dataclass(frozen=True, slots=True)
class _Held:
    """A streamed round read until it speaks or ends: what the client has not seen yet
    (`shown`: its events as the client will see them), and the rest still to come (`events`;
    None when the answer was no stream, `data` then its body)."""

    upstream: httpx.Response
    data: bytes | AsyncIterator[bytes] | None = None
    events: AsyncIterator[bytes] | None = None
    shown: list[bytes] = field(default_factory=list)
    round_filter: RoundFilter = field(default_factory=RoundFilter)


async def _hold(loop: _Loop, content: bytes) -> _Held:
    """Open a streamed round and read it until it is the client's (it speaks) or ends."""
    upstream = await loop.open(content)
    if upstream.status_code >= 400 or not _is_sse(upstream):
        return _Held(upstream, await read_reply(upstream, loop.state.config.max_body_bytes))
    held = _Held(upstream, events=sse_events(body_chunks(upstream)))
    assert held.events is not None
    try:
        async for event in held.events:
            shown = held.round_filter.filter(event)
            if shown is not None:
                held.shown.append(shown)
            if held.round_filter.spoke:
                break
    except httpx.HTTPError:
        await upstream.aclose()
        raise broken_off() from None
    except BaseException:
        await upstream.aclose()
        raise
    return held


def _is_sse(upstream: httpx.Response) -> bool:
    content_type: str = upstream.headers.get("content-type", "")
    return content_type.startswith("text/event-stream")


async def _rest(
    loop: _Loop, held: list[bytes], events: AsyncIterator[bytes], round_filter: RoundFilter
) -> AsyncIterator[bytes]:
    """The final round for the client: what was held, then the rest as it arrives.

    moim calls of this round are run before `[DONE]` is relayed, so a client that reads its
    facts right after its stream finds them.
    """
    for event in held:
        if is_done(event):
            await _settle(loop, round_filter)
        yield event
    async for event in events:
        shown = round_filter.filter(event)
        if shown is None:
            continue
        if is_done(shown):
            await _settle(loop, round_filter)
        yield shown
    await _settle(loop, round_filter)


async def _settle(loop: _Loop, round_filter: RoundFilter) -> None:
    calls = round_filter.take_calls()
    if calls:
        await loop.run(_clean(calls, MAX_ROUNDS))
