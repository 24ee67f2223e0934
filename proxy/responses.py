"""`POST /v1/responses`: OpenAI's Responses API, with memory, through the chat pipeline's steps.

The steps are `proxy/pipeline.py`'s, in its order and with its fail-open; what differs is
how the request is read (`proxy/responses_body.py` makes chat messages of `instructions` and
`input`, and writes the block back as an input item) and what the reply looks like:
`ResponseCollector` reads the Responses API's events (or its JSON) on the side while the bytes
go to the client unchanged, and the turn is handed to the writer when `response.completed`
arrives, before the client has that event; a client that leaves early has what was said so far
stored, marked partial, as for chat.

A request naming `previous_response_id` continues a reply the provider keeps, with its
history: it is stored in that reply's session (the id was linked to it when the reply was
stored), its new messages stored as new, and recall leaves out the session's earlier turns,
which the model already sees. The provider's context after that reply counts in the fill ratio.
A request in a provider's `conversation` is the same, its session named by the conversation id.

A reply written in the background (`background: true`: the provider answers `queued` at once)
reaches the client only through its polls, `GET /v1/responses/{id}` (or its events resumed,
`?stream=true`), a pass-through: the reply is noted when it is queued, or when a streamed one
ends before it does (`proxy/background.py`), and stored whole from the first poll that finds
it completed (`watch_poll`), not as the part a stream left early carried.

Only OpenAI-compatible upstreams have this endpoint: a model routed through litellm gets a 400
naming the route, before anything is forwarded or stored.
"""

from __future__ import annotations

import json
import logging
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

from starlette.requests import Request
from starlette.responses import Response

from memory import Placement, ResponseLink, Turn
from proxy.background import Awaited
from proxy.errors import BadRequest
from proxy.exchange import Api, Conversation, Exchange, model_edit, reply_reserve
from proxy.json_items import Located
from proxy.pipeline import forward_bytes, handle, remember
from proxy.responses_body import (
    block_edit,
    conversation_messages,
    item_messages,
    parse_responses_body,
    place_block,
    thread_of,
)
from proxy.room import media_parts
from proxy.streaming import EndCallback, EventCollector, valid_unicode

if TYPE_CHECKING:
    from proxy.state import AppState

logger = logging.getLogger(__name__)

# The events after which the provider has said all it will: the reply is whole.
_FINAL = ("response.completed", "response.incomplete")


async def responses(request: Request, state: AppState, path_user: str | None = None) -> Response:
    """Handle `POST /v1/responses` (and `/u/{user_id}/v1/responses`)."""
    return await handle(request, state, RESPONSES, path_user)


def responses_conversation(body: dict[str, Any], located: Located | None = None) -> Conversation:
    """A Responses request as memory reads it, and the block placed in its input: written
    into the body's text where `located` says its values lie (the client's bytes otherwise
    kept), else in the whole body written again."""

    def place(block: str, placement: Placement, model: str) -> bytes:
        if located is not None:
            edit = block_edit(body, located, block, placement)
            return located.edited(edit, model_edit(located, body, model))
        sent = {**place_block(body, block, placement), "model": model}
        return json.dumps(sent, ensure_ascii=False).encode()

    messages = conversation_messages(body)
    return Conversation(
        body["model"],
        messages,
        place,
        body.get("previous_response_id"),
        thread_of(body),
        reply_reserve(body, "max_output_tokens"),
        tuple(body[name] for name in ("tools", "text") if body.get(name)),
        media_parts(messages),
        text=located,
    )


async def forward_responses(exchange: Exchange) -> Response:
    """Send upstream, relay the answer, hand the turn to the writer when it ends."""
    body, target = exchange.body, exchange.target
    if target.kind != "openai":
        raise BadRequest(
            f"model '{body['model']}' goes through litellm, and moim offers /v1/responses only "
            "for OpenAI-compatible upstreams (MOIM_UPSTREAM_BASE_URL or a route marked "
            "openai_compatible); use /v1/chat/completions for this model",
            param="model",
            code="responses_unsupported_route",
        )
    collector = ResponseCollector()
    stored = remember(exchange, collector)
    who, background = exchange.prepared.who, body.get("background") is True
    state, mark = exchange.state, exchange.forget_mark

    def on_end(partial: bool) -> None:
        awaited = collector.response_id if background and not collector.done else None
        if awaited is not None:  # the provider writes on: the whole reply comes with a poll
            collector.forget_heard()  # (watch_poll), not the part this answer carried, if any
        stored(partial)
        forgotten = state.writer.forgotten_since(who.user_id, mark, who.session_id)
        writes = who.mode.writes and not forgotten
        if awaited is not None and writes:
            model = exchange.conversation.model
            later = Awaited(who.user_id, who.session_id, model, exchange.arrived_at)
            state.background.note(awaited, later)

    return await forward_bytes(exchange, "/responses", exchange.outbound, collector, on_end)


# The events whose `delta` is a piece of an output item's text, call arguments or tool input.
_PIECES = frozenset(
    {
        "response.output_text.delta",
        "response.refusal.delta",
        "response.function_call_arguments.delta",
        "response.custom_tool_call_input.delta",
    }
)


class ResponseCollector(EventCollector):
    """A Responses API reply, from its event stream or its JSON body.

    Whole once `response.completed` (or `response.incomplete`) arrives: its `output` items are
    the reply. Before that, the items announced so far, their text and call arguments joined
    from the deltas, are what a client that left early heard. Read in every memory mode: the
    reply's id is noted as this user's (`proxy/held_history.py`).
    """

    keeps_reply_ids = True

    def __init__(self) -> None:
        super().__init__()
        self._output: list[dict[str, Any]] | None = None
        self._items: dict[int, dict[str, Any]] = {}
        self._pieces: dict[int, list[str]] = {}
        self._finished: set[int] = set()

    def _event(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if isinstance(event.get("response"), dict):
            self._response(event["response"], kind in _FINAL)
            return
        index, item, delta = event.get("output_index"), event.get("item"), event.get("delta")
        if not isinstance(index, int):
            return
        if kind in ("response.output_item.added", "response.output_item.done"):
            if isinstance(item, dict):
                self._items[index] = item
                if kind == "response.output_item.done":
                    self._finished.add(index)
        elif kind in _PIECES:
            if isinstance(delta, str):
                self._pieces.setdefault(index, []).append(delta)

    def _response(self, response: dict[str, Any], whole: bool) -> None:
        if isinstance(response.get("id"), str):
            self.response_id = response["id"]
        if not whole:
            return
        output = response.get("output")
        output = output if isinstance(output, list) else []
        self._output = [item for item in output if isinstance(item, dict)]
        usage = response.get("usage")
        total = usage.get("total_tokens") if isinstance(usage, dict) else None
        self.context_tokens = total if isinstance(total, int) else 0
        self.done = True

    def feed_json(self, body: bytes) -> None:
        try:
            data = json.loads(body)
        except ValueError:
            return
        if isinstance(data, dict):
            self._response(data, data.get("status") in ("completed", "incomplete"))

    def replies(self) -> list[dict[str, Any]]:
        items = self._output if self._output is not None else self._heard()
        messages: list[dict[str, Any]] = valid_unicode(item_messages(items))
        return messages

    def forget_heard(self) -> None:
        """Let go of what was heard of a reply that is not whole: a reply the provider goes on
        writing in the background is stored whole, from a poll, not as its first part."""
        self._items.clear()
        self._pieces.clear()
        self._finished.clear()

    def _heard(self) -> list[dict[str, Any]]:
        """The output items so far, an unfinished one with its deltas joined."""
        heard = []
        for index in sorted(self._items):
            item = self._items[index]
            said = "".join(self._pieces.get(index, []))
            if index in self._finished:
                heard.append(item)
            elif item.get("type") == "message" and said:
                heard.append({**item, "content": [{"type": "output_text", "text": said}]})
            elif item.get("type") == "function_call":
                heard.append({**item, "arguments": said})
            elif item.get("type") == "custom_tool_call":
                heard.append({**item, "input": said})
        return heard


class PolledReply(ResponseCollector):
    """A polled response's JSON body, gathered as it passes and read once it has all come."""

    def __init__(self) -> None:
        super().__init__()
        self._body: list[bytes] = []

    def feed(self, data: bytes) -> bool:
        self._body.append(data)
        return False

    def end(self) -> bool:
        self.feed_json(b"".join(self._body))
        return self.whole()


def watch_poll(
    state: AppState, method: str, suffix: str, query: bytes
) -> tuple[ResponseCollector, EndCallback] | None:
    """For a poll of a reply being written in the background that moim noted
    (`GET /v1/responses/{id}`, its JSON, or with `?stream=true` its events resumed), what the
    pass-through relays the answer with: a collector, and the callback that stores the reply
    once a poll finds it done. Else None."""
    prefix = "/responses/"
    if method != "GET" or not suffix.startswith(prefix):
        return None
    response_id = suffix.removeprefix(prefix)
    if state.background.get(response_id) is None:
        return None
    resumed = parse_qs(query.decode("latin-1")).get("stream") == ["true"]
    collector = ResponseCollector() if resumed else PolledReply()

    def on_end(partial: bool) -> None:
        replies = collector.replies()
        if partial or collector.response_id != response_id or not replies:
            return  # not done yet: a later poll stores it
        awaited = state.background.done(response_id)
        if awaited is None:  # a poll beside this one stored it, or its user was forgotten
            return
        link = ResponseLink(awaited.session_id, collector.context_tokens)
        state.responses.note(awaited.user_id, response_id, link)
        error = state.writer.submit(
            Turn(
                user_id=awaited.user_id,
                session_id=awaited.session_id,
                model=awaited.model,
                messages=tuple(replies[:-1]),
                reply=replies[-1],
                created_at=time.time(),
                continues=True,  # the request's messages are stored: every one is new
                arrived_at=awaited.arrived_at,
            )
        )
        if error is not None:  # no response to carry it: the log says so, as `remember`'s
            logger.warning(
                "background reply %s of user_id=%s: %s", response_id, awaited.user_id, error
            )

    return collector, on_end


def read_responses_body(
    raw: bytes, max_items: int, memory: bool = True
) -> tuple[dict[str, Any], Conversation]:
    """The request JSON checked (`parse_responses_body`), and what memory reads from it; with
    `memory`, where its input items lie in its text too (as chat's messages)."""
    body, located = parse_responses_body(raw, max_items, memory)
    return body, responses_conversation(body, located)


RESPONSES = Api(read_responses_body, forward_responses)
