"""The timer both of moim's HTTP protocols run while a request's head is awaited.

`proxy/serving.py` (h11) and `proxy/serving_httptools.py` (httptools) each say when a head is
owed (`_awaiting_head`) and whether any of it has come (`_head_begun`); this mixin runs the
timer between the two and, past `head_timeout` seconds, answers 408 in OpenAI's shape when some
of the head came, else closes without a word (a client's speculative connection must not read a
stray 408 later). The connection closes either way.

After a 408 the connection closes as RFC 9112 §9.6 asks: the write side first (the 408, then
FIN), then, once the client closes too or `LINGER` seconds pass, the rest, discarding what the
client still sends meanwhile. Closed at once, a socket with bytes of the head unread (a
client still sending them) answers with a TCP reset, not FIN: the client's next read raised
ECONNRESET instead of ending, and a reset can discard the 408 before it is read.
"""

from __future__ import annotations

import asyncio
import json

from proxy.errors import RequestTimeout

# Seconds a connection answered 408 waits for the client to close before it is closed.
LINGER = 2.0


def timeout_response(seconds: float) -> bytes:
    """The 408 sent when a head is not whole within `seconds`; it closes the connection."""
    error = RequestTimeout(
        f"the request's headers did not arrive within {seconds:g} s (server.header_timeout)"
    )
    body = json.dumps(error.body()).encode()
    head = (
        "HTTP/1.1 408 Request Timeout\r\n"
        "content-type: application/json\r\n"
        f"content-length: {len(body)}\r\n"
        "connection: close\r\n\r\n"
    )
    return head.encode() + body


class HeadTimer:
    """Mixed into a uvicorn protocol, before it: the protocol provides `loop` and `transport`."""

    head_timeout = 10.0
    _timer: asyncio.TimerHandle | None = None
    lingering = False  # answered 408: what the client still sends is discarded
    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport

    def _awaiting_head(self) -> bool:
        """A head is owed and no response is in progress."""
        raise NotImplementedError

    def _head_begun(self) -> bool:
        """Some bytes of the awaited head have arrived."""
        raise NotImplementedError

    def _watch_head(self) -> None:
        """Run the timer while a head is awaited; stop it otherwise."""
        if not self._awaiting_head():
            self._stop_timer()
        elif self._timer is None:
            self._timer = self.loop.call_later(self.head_timeout, self._head_timed_out)

    def _stop_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _head_timed_out(self) -> None:
        self._timer = None
        if not self._awaiting_head():
            return
        if not self._head_begun():
            self.transport.close()
            return
        self.transport.write(timeout_response(self.head_timeout))
        self.lingering = True
        if self.transport.can_write_eof():
            self.transport.write_eof()  # FIN after the 408; the client's EOF closes the rest
        self.loop.call_later(LINGER, self.transport.close)
