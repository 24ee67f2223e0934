"""`POST /v1/chat/completions`: the chat API through the pipeline's steps (`proxy/pipeline.py`).

What is chat's own: the body's checks (`messages`), the conversation memory reads (the
messages as sent; the block placed among them by `memory.inject_block`), and the forward:
through litellm for other providers, through moim's tool loop when memory tools are on
(`proxy/tool_loop.py`), else the byte path to an OpenAI-compatible upstream.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from memory import Placement, block_place, inject_block
from proxy import litellm_params, tool_loop, tools
from proxy.client_gone import ClientLeft, until_client_leaves
from proxy.config import Config
from proxy.errors import BadRequest, UpstreamError
from proxy.exchange import Api, Conversation, Exchange, model_edit, reply_reserve
from proxy.json_items import Located
from proxy.overflow import refusal_of_block
from proxy.pipeline import forward_bytes, handle, model_body, remember
from proxy.room import media_parts
from proxy.streaming import EndCallback, ReplyCollector, relay
from proxy.upstream import Target, call_litellm, litellm_json, litellm_sse
from proxy.upstream_errors import without_key

if TYPE_CHECKING:
    from proxy.state import AppState


async def chat(request: Request, state: AppState, path_user: str | None = None) -> Response:
    """Handle `POST /v1/chat/completions` (and its aliases)."""
    return await handle(request, state, CHAT, path_user)


def read_chat_body(
    raw: bytes, max_messages: int, memory: bool = True
) -> tuple[dict[str, Any], Conversation]:
    """The request JSON checked (`parse_chat_body`), and what memory reads from it; with
    `memory`, where its messages lie in its text too (memory off needs it not: noting it
    costs ~2 µs a message, ~5 ms for a chat of 2,000)."""
    body, located = parse_chat_body(raw, max_messages, memory)
    return body, chat_conversation(body, located)


def chat_conversation(body: dict[str, Any], located: Located | None = None) -> Conversation:
    """A chat request as memory reads it: its messages, and the block placed among them: as
    one message written into the body's text where `located` says its messages lie (the
    client's bytes otherwise kept), else in the whole body written again."""
    items = located.items if located is not None else None

    def place(block: str, placement: Placement, model: str) -> bytes:
        if located is not None and items is not None:
            index, message, replaces = block_place(body["messages"], block, placement)
            return located.edited(
                items.item_edit(index, json.dumps(message, ensure_ascii=False), replaces),
                model_edit(located, body, model),
            )
        messages = inject_block(body["messages"], block, placement)
        sent = {**body, "messages": messages, "model": model}
        return json.dumps(sent, ensure_ascii=False).encode()

    messages = body["messages"]
    return Conversation(
        body["model"],
        messages,
        place,
        reply_tokens=reply_reserve(body, "max_completion_tokens", "max_tokens"),
        definitions=tuple(body[name] for name in _DEFINITIONS if body.get(name)),
        media_parts=media_parts(messages),
        message_items=items,
        text=located,
    )


# What a chat body holds beyond its messages that the provider counts (proxy/room.py).
_DEFINITIONS = ("tools", "functions", "response_format")


def parse_chat_body(
    raw: bytes, max_messages: int, locate: bool = True
) -> tuple[dict[str, Any], Located | None]:
    """The request JSON, checked just enough to route and remember it, and where its values
    lie in its text, with (`locate`) its messages."""
    body, located = model_body(raw, "messages" if locate else None)
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
    return body, located


async def forward(exchange: Exchange) -> Response:
    """Send a chat request upstream and answer the client; hand the turn to the writer."""
    prepared, target, body = exchange.prepared, exchange.target, exchange.body
    collector = ReplyCollector()
    on_end = remember(exchange, collector)
    if target.kind == "litellm":
        sent = json.loads(prepared.body) if prepared.body is not None else body
        return await _forward_litellm(exchange, sent, collector, on_end)
    content = exchange.outbound
    if tools.applies(prepared.who, target, body):  # memory tools: the loop is tool_loop.py
        return await tool_loop.forward_with_tools(exchange, content, collector, on_end)
    return await forward_bytes(exchange, "/chat/completions", content, collector, on_end)


async def _forward_litellm(
    exchange: Exchange, body: dict[str, Any], collector: ReplyCollector, on_end: EndCallback
) -> Response:
    report = exchange.report
    try:  # a client that leaves before the answer ends the provider's call (client_gone.py)
        try:
            result = await until_client_leaves(exchange.receive, _call(exchange, body))
        except UpstreamError as exc:
            refused = refusal_of_block(exc.status, exc.content)
            if exchange.prepared.body is None or refused is None:
                raise
            # refused because of the block (overflow.py): sent again as the client sent it
            report.without_block(refused)
            body = exchange.body
            result = await until_client_leaves(exchange.receive, _call(exchange, body))
    except ClientLeft:
        on_end(True)  # what the client said is kept, as when it leaves a stream
        raise
    if body.get("stream") is True:
        return StreamingResponse(
            relay(
                litellm_sse(result),
                collector,
                on_end,
                limit=exchange.state.config.max_body_bytes,
                key=exchange.authorization,
            ),
            media_type="text/event-stream",
            headers=report.headers(),
        )
    data = without_key(litellm_json(result), exchange.authorization)
    if len(data) > exchange.state.config.max_body_bytes:
        on_end(True)  # as on the byte path: a reply past the bound is relayed, not stored
    else:
        collector.feed_json(data)
        on_end(False)
    return Response(data, media_type="application/json", headers=report.headers())


def _call(exchange: Exchange, body: dict[str, Any]) -> Awaitable[Any]:
    """litellm's call of `body` to the request's provider."""
    timeout = exchange.state.config.read_timeout
    return call_litellm(exchange.target, body, exchange.authorization, timeout)


def check_litellm_params(body: dict[str, Any], target: Target, config: Config) -> None:
    """Through litellm only OpenAI's parameters pass; its address and key come from config."""
    if target.kind == "litellm":
        litellm_params.refuse_unsafe(body, alias=body["model"] in config.routes)


CHAT = Api(read_chat_body, forward, check_litellm_params)
