"""How moim is served: uvicorn's options, and a time and size limit on each request's head.

uvicorn waits for a request line and headers as long as a client takes: a connection that
sends nothing, or a header a minute, keeps its socket (and a slot of the process's file
descriptors) forever; 1,500 slow clients held theirs 40 s each, as long as they liked. The
protocols here are uvicorn's with one timer more: a request's head must be whole within
`server.header_timeout` seconds of its first byte (of the connection's start, for a new
connection), else moim answers 408 in OpenAI's shape and closes the connection; a new
connection that sent nothing is closed without a word (a client's speculative connection must
not read a stray 408 later). A kept-alive connection idle after a response is not timed by
it: uvicorn closes that one after `server.keep_alive_timeout` seconds (75 by default, above
the 60 s a load balancer keeps its idle connections to moim: closed first by moim, a
connection the balancer reuses at that moment is a 502; uvicorn's own default, 5 s, is also
the openai SDK's pool expiry, and a request sent as the two ran out together was reset).
Bodies have their own limit, `server.body_timeout`, in `read_body` (proxy/limits.py).
`moim serve` and the tests' servers run with these options, so both serve alike.

Two parsers: httptools (llhttp, in C) when it is installed, else h11 (pure Python, ~3x the
CPU a request). h11 refuses a head buffered past `h11_max_incomplete_event_size` with a
bare-text 400 and closes; httptools has no such limit, so its protocol here counts a head's
bytes and does the same at the same size. The event loop is uvicorn's choice: uvloop when
installed (not on Windows), else asyncio's.
"""

from __future__ import annotations

import asyncio
import socket
import time
from types import FrameType
from typing import Any, Literal

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from proxy.config import Config
from proxy.head_timer import HeadTimer
from proxy.limits import parser_limit

Parser = Literal["auto", "h11", "httptools"]


def uvicorn_options(config: Config, parser: Parser = "auto") -> dict[str, Any]:
    """Keyword arguments for `uvicorn.run` / `uvicorn.Config` that serve `config` as moim does.

    `parser` "auto" is httptools when it can be imported, else h11 (tests name one).
    """
    limit = parser_limit(config.max_header_bytes)
    use_httptools = parser == "httptools" or (parser == "auto" and _has_httptools())
    if use_httptools:
        from proxy.serving_httptools import head_limited_httptools

        protocol: type[asyncio.Protocol] = head_limited_httptools(config.header_timeout, limit)
    else:
        protocol = head_timeout_protocol(config.header_timeout)
    return {
        "http": protocol,
        "h11_max_incomplete_event_size": limit,
        "timeout_keep_alive": config.keep_alive_timeout,
        # replies still under way this long after a stop was asked for are cut; the writer
        # has what is left of it (`StopClock`), and the journal keeps what it cannot store
        "timeout_graceful_shutdown": config.shutdown_timeout,
    }


class StopClock:
    """When a stop was asked for (SIGTERM, Ctrl-C), so that the app's shutdown spends what is
    left of `server.shutdown_timeout` from then, after the replies under way took their part.
    Never asked (the tests' servers): the whole of it. The shutdown notes here how many turns
    it lost, for `moim serve`'s exit status."""

    def __init__(self) -> None:
        self.asked: float | None = None  # time.monotonic() of the first signal
        self.turns_lost = 0  # neither stored nor journaled when the writer stopped

    def ask(self) -> None:
        if self.asked is None:
            self.asked = time.monotonic()

    def left(self, seconds: float) -> float:
        if self.asked is None:
            return seconds
        return max(0.0, seconds - (time.monotonic() - self.asked))


class StoppingServer(uvicorn.Server):
    """uvicorn's server, telling `clock` when a signal asks it to stop."""

    def __init__(self, config: uvicorn.Config, clock: StopClock) -> None:
        super().__init__(config)
        self.clock = clock

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self.clock.ask()
        super().handle_exit(sig, frame)


def bind_problem(host: str, port: int) -> str | None:
    """Why `host:port` cannot be listened on (in use, not this machine's, no such name), or None.

    Tried as asyncio's server will bind it (every address the name has, IPv6 ones alone), and
    let go at once: `moim serve` asks before it opens the store and starts, where uvicorn would
    find out only after the whole startup, and say so among its shutdown lines (exit status 3).
    """
    try:
        addresses = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except socket.gaierror as exc:
        return f"cannot listen on {host}:{port}: {exc.strerror}"
    for family, kind, proto, _, address in addresses:
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                probe.bind(address)
            except OSError as exc:
                return f"cannot listen on {host}:{port}: {exc.strerror or exc}"
    return None


def _has_httptools() -> bool:
    try:
        import httptools  # noqa: F401
    except ImportError:
        return False
    return True


def head_timeout_protocol(seconds: float) -> type[H11Protocol]:
    """uvicorn's h11 protocol, giving each request's head at most `seconds` to arrive."""

    class Protocol(HeadTimeoutH11):
        head_timeout = seconds

    return Protocol


class HeadTimeoutH11(HeadTimer, H11Protocol):
    """H11Protocol with a timer running while a request's head is awaited (h11's IDLE)."""

    _started = False  # bytes of the awaited head have arrived

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._watch_head()

    def data_received(self, data: bytes) -> None:
        if self.lingering:  # answered 408 (proxy/head_timer.py): the rest goes unread
            return
        super().data_received(data)
        self._started = self._awaiting_head() and (self._started or bool(data))
        self._watch_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_timer()
        super().connection_lost(exc)

    def _awaiting_head(self) -> bool:
        return self.conn.their_state is h11.IDLE and not self.transport.is_closing()

    def _head_begun(self) -> bool:
        return self._started
