"""uvicorn's httptools protocol with the h11 one's guarantees (proxy/serving.py).

httptools (llhttp, in C) parses a request's head for about a third of h11's CPU, but neither
it nor uvicorn bounds how long a head may take or how large it may grow. This protocol adds
both, as `HeadTimeoutH11` and h11's `max_incomplete_event_size` give the h11 path:

- a head must be whole within `head_timeout` seconds of its first byte (of the connection's
  start, for a new connection); past that, 408 in OpenAI's shape if any of it came, else a
  silent close, and the connection closes either way. As with h11, the timer runs only while
  no response is in progress (a pipelined head waits for the response before it).
- a head still incomplete after `max_head_bytes` bytes is refused as h11 refuses it: uvicorn's
  bare-text 400 "Invalid HTTP request received.", and the connection closes. A whole head
  below that size reaches the app, whose `HeaderLimit` answers 431 past
  `server.max_header_bytes`.

And one thing more, h11's too: a response to an HTTP/1.0 request is never sent in chunks.
uvicorn's httptools cycle frames every body of unknown length (a stream, a pass-through
without a length) as `Transfer-Encoding: chunked`, whatever the request's version; HTTP/1.0
knows no chunks (RFC 9112 §6.1: a server must not send them), and an HTTP/1.0 client
(`curl -0`, ApacheBench, a proxy speaking 1.0 upstream) read the chunk sizes as the body's
text: a stream's events came with "2fa" lines between them. Such a body runs, as h11 sends
it, to the connection's close (the connection closes after an HTTP/1.0 response anyway).

Imported only when httptools is installed.
"""

from __future__ import annotations

import asyncio

from uvicorn._types import ASGISendEvent
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

from proxy.head_timer import HeadTimer

INVALID = "Invalid HTTP request received."  # uvicorn's words for a head h11 refuses


def head_limited_httptools(seconds: float, max_head_bytes: int) -> type[HttpToolsProtocol]:
    """uvicorn's httptools protocol with each head's time and size bounded."""

    class Protocol(HeadLimitedHttpTools):
        head_timeout = seconds
        head_limit = max_head_bytes

    return Protocol


class HeadLimitedHttpTools(HeadTimer, HttpToolsProtocol):
    """HttpToolsProtocol that times each awaited head and counts its bytes."""

    head_limit = 64 * 1024
    _in_head = True  # the client's next bytes belong to a request's head
    _head_bytes = 0  # bytes of it received so far

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._watch_head()

    def data_received(self, data: bytes) -> None:
        if self.lingering:  # answered 408 (proxy/head_timer.py): the rest goes unread
            return
        if self._in_head:
            self._head_bytes += len(data)
        super().data_received(data)
        if self._in_head and self._head_bytes > self.head_limit and not self._closing():
            self.logger.warning(INVALID)
            self.send_400_response(INVALID)
        self._watch_head()

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._head_bytes = 0
        self._stop_timer()
        super().on_headers_complete()
        cycle = self.cycle  # this request's, unless it was an upgrade (no cycle made)
        if cycle is not None and cycle.scope is self.scope and self.scope["http_version"] == "1.0":
            cycle.__class__ = Http10Cycle  # before its task first runs: it sends nothing yet

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._in_head = True

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self._head_bytes:  # the next head began during the response: time it from now
            self._watch_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_timer()
        super().connection_lost(exc)

    def _closing(self) -> bool:
        return self.transport is None or self.transport.is_closing()

    def _awaiting_head(self) -> bool:
        """A head is owed and no response is in progress (h11's IDLE)."""
        idle = self.cycle is None or self.cycle.response_complete
        return self._in_head and idle and not self._closing()

    def _head_begun(self) -> bool:
        return self._head_bytes > 0


class Http10Cycle(RequestResponseCycle):
    """The response to an HTTP/1.0 request: a body of unknown length is sent as it comes, to
    the connection's close, never in chunks (uvicorn's cycle chunks it)."""

    _to_close = False  # the body is delimited by the connection's close

    async def send(self, message: ASGISendEvent) -> None:
        if message["type"] == "http.response.start" and not self.response_started:
            names = {name.lower() for name, _ in message.get("headers", [])}
            if not names & {b"content-length", b"transfer-encoding"}:
                self._to_close, self.keep_alive = True, False
                self.chunked_encoding = False  # uvicorn's cycle adds no chunked header then
        elif message["type"] == "http.response.body" and self._to_close:
            # each piece is, as far as uvicorn's length check knows, all that is left
            self.expected_content_length = len(message.get("body", b""))
        await super().send(message)
