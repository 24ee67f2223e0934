"""Step 6b, stream back: relay the provider's bytes as they arrive, and gather the reply.

The bytes reach the client exactly as the provider sent them. On the side, a collector
parses the server-sent events (or the JSON body) into what `remember` stores: a
`ReplyCollector` the chat completion's assistant message, the Responses API's
`ResponseCollector` (`proxy/responses.py`) its output items. The turn is handed over when the
reply is whole (chat's `[DONE]`, the Responses API's `response.completed`), before those last
bytes are sent, so a client that calls `/v1/memory/flush` right after its stream finds its
turn; when the client leaves early, the relay's `finally` hands over what was produced,
marked partial.

When the provider breaks off mid-body (its connection drops, or moim's read timeout passes
between two chunks) the part is handed over, marked partial, and the relay raises `BrokeOff`:
`proxy/break_off.py` then ends the client's response without its terminating chunk, so the
client's HTTP library fails as it would have called directly, instead of reading a truncated
answer (or download) as whole.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
import httpx

from proxy.call_pieces import CallPieces
from proxy.upstream import body_chunks
from proxy.upstream_errors import broken_off, chunks_without_key

logger = logging.getLogger(__name__)

EndCallback = Callable[[bool], None]  # called once with partial=True/False


class BrokeOff(Exception):
    """The provider broke off a body moim was relaying: the client's must break off too."""


class EventCollector:
    """Server-sent events read on the side as they pass; each API reads its own events.

    `replies` is what the provider said, as chat messages for `remember`: one assistant
    message for chat, possibly more for the Responses API (its output items). A Responses
    reply also has the provider's id for it and the tokens its context then holds.
    """

    # Read even when the turn is not stored: a Responses reply's id says whose it is.
    keeps_reply_ids = False

    def __init__(self) -> None:
        self.done = False
        self.response_id: str | None = None
        self.context_tokens = 0
        self._partial: list[bytes] = []  # the pieces of a line still arriving

    def feed(self, data: bytes) -> bool:
        """Consume SSE bytes; return True once the reply is known to be whole.

        A line's pieces are joined once, when its end arrives: a long line sent in many small
        pieces costs its length, not its length times the pieces."""
        if b"\n" not in data:
            self._partial.append(data)
            return self.done
        first, *lines = data.split(b"\n")
        self._partial.append(first)
        lines.insert(0, b"".join(self._partial))
        self._partial = [lines.pop()]
        return self._lines(lines)

    def end(self) -> bool:
        """The stream ended: read a last line without its newline; True if the reply is whole."""
        self._lines([b"".join(self._partial)])
        self._partial = []
        return self.whole()

    def whole(self) -> bool:
        return self.done

    def _lines(self, lines: list[bytes]) -> bool:
        for line in lines:
            line = line.strip()
            if not line.startswith(b"data:"):
                continue
            payload = line[5:].strip()
            if payload == b"[DONE]":
                self.done = True
                continue
            try:
                event = json.loads(payload)
            except ValueError:
                continue
            if isinstance(event, dict):
                self._event(event)
        return self.done

    def _event(self, event: dict[str, Any]) -> None:
        raise NotImplementedError

    def feed_json(self, body: bytes) -> None:
        """Consume a non-streamed response body."""
        raise NotImplementedError

    def replies(self) -> list[dict[str, Any]]:
        """What the provider said so far, as chat messages (valid Unicode); maybe none."""
        raise NotImplementedError


class ReplyCollector(EventCollector):
    """The assistant message (choice 0) of a chat completion, from a stream or a JSON body.

    Its text is what the model said: `content`; for a spoken reply (`modalities: ["audio"]`,
    content null) the audio's `transcript`; for a structured-output refusal (content null)
    the `refusal`. The first of these that holds text is the reply's text. A spoken reply
    keeps its audio's id (`audio: {"id"}`, never the audio): the client resends the reply by it.
    A legacy `functions` request's reply is its `function_call` (content null): kept as made.
    """

    def __init__(self) -> None:
        super().__init__()
        self._content: list[str] = []
        self._transcript: list[str] = []
        self._refusal: list[str] = []
        self._audio_id: str | None = None
        self._calls: list[dict[str, Any]] = []  # in the order the calls began
        self._function_call: dict[str, str] | None = None  # a legacy `functions` reply's call
        self._pieces = CallPieces()  # which of `_calls` a streamed piece is of
        self._role_seen = False
        self._finished = False

    def whole(self) -> bool:
        """`[DONE]` arrived, or a choice finished (some providers omit `[DONE]`)."""
        return self.done or self._finished

    def feed_json(self, body: bytes) -> None:
        """Consume a non-streamed ChatCompletion body."""
        try:
            data = json.loads(body)
            message = data["choices"][0]["message"]
        except (ValueError, KeyError, IndexError, TypeError):
            return
        if isinstance(message, dict):
            self._text(message)
            for call in message.get("tool_calls") or []:
                if isinstance(call, dict):
                    self._calls.append(call)
            self._merge_function_call(message.get("function_call"))
            self._role_seen = True
            self.done = True

    def _event(self, event: dict[str, Any]) -> None:
        for choice in event.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            if not isinstance(delta, dict):
                continue
            self._role_seen = True
            if choice.get("finish_reason"):
                self._finished = True
            self._text(delta)
            for call in delta.get("tool_calls") or []:
                if isinstance(call, dict):
                    self._merge_call(call)
            self._merge_function_call(delta.get("function_call"))

    def _text(self, message: dict[str, Any]) -> None:
        """The text of a message, or of a delta of one: content, transcript, refusal."""
        content, refusal = message.get("content"), message.get("refusal")
        audio = message.get("audio")
        if isinstance(content, str):
            self._content.append(content)
        if isinstance(audio, dict) and isinstance(audio.get("transcript"), str):
            self._transcript.append(audio["transcript"])
        if isinstance(audio, dict) and isinstance(audio.get("id"), str) and audio["id"]:
            self._audio_id = audio["id"]
        if isinstance(refusal, str):
            self._refusal.append(refusal)

    def _merge_call(self, delta: dict[str, Any]) -> None:
        """Join a tool call's pieces: a function's name and arguments, or a custom tool's
        (GPT-5's free-form tools: `type: "custom"`, `custom: {name, input}`) name and input,
        as the client's SDK joins them and then resends the call. Which call a piece is of:
        `CallPieces` (servers that number calls otherwise: Ollama, Gemini)."""
        slot, begins = self._pieces.call_of(delta)
        if begins:
            kind = "custom" if delta.get("type") == "custom" or "custom" in delta else "function"
            said = ("name", "input") if kind == "custom" else ("name", "arguments")
            self._calls.append({"id": None, "type": kind, kind: dict.fromkeys(said, "")})
        call = self._calls[slot]
        if delta.get("id"):
            call["id"] = delta["id"]
        kind = call["type"]
        pieces = delta.get(kind)
        for field, joined in call[kind].items():
            piece = pieces.get(field) if isinstance(pieces, dict) else None
            if isinstance(piece, str):
                call[kind][field] = joined + piece

    def _merge_function_call(self, piece: Any) -> None:
        """Join a legacy function call's pieces (its name, then its arguments in pieces): a
        reply that is only a call was no reply at all, and was never stored."""
        if not isinstance(piece, dict):
            return
        call = self._function_call or {"name": "", "arguments": ""}
        for field, joined in call.items():
            if isinstance(piece.get(field), str):
                call[field] = joined + piece[field]
        self._function_call = call

    def reply(self) -> dict[str, Any] | None:
        """The assistant message, or None when nothing was produced; its text valid Unicode."""
        content = "".join(self._content) or "".join(self._transcript) or "".join(self._refusal)
        if not content and not self._calls and self._function_call is None:
            return None
        message: dict[str, Any] = {"role": "assistant", "content": content or None}
        if self._calls:
            message["tool_calls"] = list(self._calls)
        if self._function_call is not None:
            message["function_call"] = dict(self._function_call)
        if self._audio_id is not None:
            message["audio"] = {"id": self._audio_id}
        valid: dict[str, Any] = valid_unicode(message)
        return valid

    def replies(self) -> list[dict[str, Any]]:
        reply = self.reply()
        return [] if reply is None else [reply]


def valid_unicode(value: Any) -> Any:
    """`value` with every string valid Unicode, which the journal and SQLite require.

    A provider may escape a character outside the BMP as a surrogate pair (`"\\ud83d\\ude00"`)
    and split the pair across two events: joined, the halves make the character again. A
    lone half becomes U+FFFD. Strings that are valid already (all but these) are unchanged.
    """
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        return value
    if isinstance(value, dict):
        return {valid_unicode(k): valid_unicode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [valid_unicode(item) for item in value]
    return value


async def relay(
    source: AsyncIterator[bytes],
    collector: EventCollector | None,
    on_end: EndCallback,
    close: Callable[[], Awaitable[None]] | None = None,
    limit: int | None = None,
    *,
    key: str | None,
) -> AsyncIterator[bytes]:
    """Yield the source's bytes unchanged but for `key`, the provider key moim sent (its
    `Authorization` value), masked wherever the provider quotes it (`chunks_without_key`);
    call `on_end` exactly once, then `close`.

    `source` is an httpx response's `aiter_raw()` (OpenAI-compatible upstreams) or the SSE
    bytes made from a litellm stream. Without a collector (a turn that is not stored) the
    events are not parsed at all. Once past `limit` bytes the collector reads no more (the
    client still gets every byte): what it gathered is handed over, partial, so a huge or
    endless reply is never held whole. A source that fails mid-body raises `BrokeOff` once the part
    is handed over (partial) and the upstream closed.
    """
    ended = False
    read = 0
    broken: tuple[type[BaseException], ...] = (httpx.HTTPError, *_litellm_errors())
    try:
        async for data in chunks_without_key(source, key):
            if collector is not None and not ended:
                read += len(data)
                if collector.feed(data):
                    ended = True
                    on_end(False)
                elif limit is not None and read > limit:
                    ended = True
                    on_end(True)
            yield data
        if not ended:
            ended = True
            on_end(collector is not None and not collector.end())
    except broken as exc:
        # Keep the part (below), and break the client's response off as the provider's was.
        logger.warning(
            "upstream broke off mid-response (%s): breaking off the client's too",
            type(exc).__name__,
        )
        raise BrokeOff from exc
    finally:
        if not ended:
            on_end(True)
        if close is not None:
            with anyio.CancelScope(shield=True):
                await close()


async def read_reply(response: httpx.Response, limit: int) -> bytes | AsyncIterator[bytes]:
    """A provider's body, read whole and the response closed when it comes to at most `limit`
    bytes (`server.max_body_bytes`); past that, the pieces read, then the rest, to relay as
    they come (the relay closes it): a body moim looks into (a reply to store, an error, a tool
    round) reaches the client whole, but moim never holds more of it than the bound (an
    endless one: forever). A body cut off is a 502 `upstream_broken`."""
    data: bytes | AsyncIterator[bytes] = b""
    try:
        data = await _at_most(body_chunks(response), limit)
        return data
    except httpx.HTTPError as exc:
        raise broken_off() from exc
    finally:
        if isinstance(data, bytes):
            await response.aclose()


async def _at_most(pieces: AsyncIterator[bytes], limit: int) -> bytes | AsyncIterator[bytes]:
    held: list[bytes] = []
    size = 0
    async for piece in pieces:
        held.append(piece)
        size += len(piece)
        if size > limit:
            return _chained(held, pieces)
    return b"".join(held)


async def _chained(first: list[bytes], rest: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    for piece in first:
        yield piece
    async for piece in rest:
        yield piece


def not_stored(partial: bool) -> None:
    """The end of an answer that is no turn to store (a pass-through's, a provider's error)."""


def _litellm_errors() -> tuple[type[Exception], ...]:
    """litellm's provider errors derive from openai's, which only exist once it is loaded."""
    import sys

    openai = sys.modules.get("openai")
    return (openai.APIError,) if openai is not None else ()
