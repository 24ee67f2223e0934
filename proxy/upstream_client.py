"""The pooled httpx client moim forwards with, with a cheaper check of its idle connections.

httpcore's pool looks at every idle connection each time a request joins or leaves it (twice
a request), asking whether its socket is readable: an idle connection with something to read
is one the server closed. Over anyio each such question builds the stream's table of
attributes first (addresses, socket, ... ~20 µs), then polls the socket (~2 µs); with the 32
idle connections of 32 clients that was about a millisecond of the event loop a request. The
streams here keep their socket from the moment they connect and poll it directly: the same
answer, without the table. Everything else is the stream httpcore made.

The one hook is the pool's network backend, which httpx does not expose: when a later httpx
or httpcore moves it, the client is left as httpx built it (correct, only slower).

`send` is how a request goes out on the client: once more, on a new connection, when a pooled
one turns out to be stale.
"""

from __future__ import annotations

import logging
import select
import socket
import ssl
import sys
from collections.abc import Iterable
from http.cookiejar import CookieJar, DefaultCookiePolicy
from typing import Any

import httpcore
import httpx

from proxy.config import Config

logger = logging.getLogger(__name__)

# httpcore's SOCKET_OPTION, spelled out (httpcore does not export it)
SocketOption = (
    tuple[int, int, int] | tuple[int, int, bytes | bytearray] | tuple[int, int, None, int]
)


def upstream_client(config: Config) -> httpx.AsyncClient:
    """The one client every upstream call goes through (`AppState.client`)."""
    client = httpx.AsyncClient(
        timeout=httpx.Timeout(config.read_timeout, connect=config.connect_timeout),
        limits=httpx.Limits(max_connections=1000, max_keepalive_connections=100),
        cookies=no_cookies(),
    )
    pool = getattr(client._transport, "_pool", None)
    backend = getattr(pool, "_network_backend", None)
    if isinstance(backend, httpcore.AsyncNetworkBackend):
        pool._network_backend = SocketKeepingBackend(backend)  # type: ignore[union-attr]
    return client


# Failures of a connection before any answer came: what a kept-alive connection the server
# closed at the moment it was reused looks like (a reset, or an end of stream).
STALE_CONNECTION = (httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError)


async def send(client: httpx.AsyncClient, request: httpx.Request) -> httpx.Response:
    """`client.send(request, stream=True)`, sent once more on a new connection when the first
    attempt failed before any response header arrived (`STALE_CONNECTION`).

    A server's keep-alive timeout can close an idle pooled connection just as it is reused:
    the pool's check saw nothing to read yet, the request was written, the server answered with
    a reset (1 request in ~1,800 under `bench/load.py`). Browsers and proxies retry such a
    request once on a fresh connection; so does moim, so a client never sees a 502 for it.
    The pool would hand the retry another idle connection, possibly as stale, so it goes on a
    one-shot client without keep-alive: a new connection, closed when the response is (the
    client then holds nothing, and is left to the garbage collector).
    Connect errors and timeouts are not retried: the upstream is down or slow, and a second
    wait would only double the first. The request's body must be bytes (sent twice).
    """
    try:
        return await client.send(request, stream=True)
    except STALE_CONNECTION as exc:
        logger.info("upstream connection failed (%s); retrying on a new one", type(exc).__name__)
    fresh = httpx.AsyncClient(
        timeout=client.timeout,
        limits=httpx.Limits(max_keepalive_connections=0),
        cookies=no_cookies(),
    )
    return await fresh.send(request, stream=True)


def no_cookies() -> CookieJar:
    """A cookie jar that keeps nothing. One client serves every user: a cookie a provider
    sets on one user's answer (a load balancer's, a session's) would otherwise go out with
    every later request of every user. The client still gets the provider's Set-Cookie."""
    return CookieJar(DefaultCookiePolicy(allowed_domains=[]))


def readable(sock: socket.socket | None) -> bool:
    """Whether `sock` has something to read now (or is gone), as httpcore asks it."""
    fd = -1 if sock is None else sock.fileno()
    if fd < 0:
        return True  # as httpcore: a closed socket reads as its end
    if sys.platform == "win32" or not hasattr(select, "poll"):
        return bool(select.select([fd], [], [], 0)[0])
    poll = select.poll()
    poll.register(fd, select.POLLIN)
    return bool(poll.poll(0))


class SocketKeepingStream(httpcore.AsyncNetworkStream):
    """A network stream that answers "is_readable" from the socket it kept at the start."""

    def __init__(self, stream: httpcore.AsyncNetworkStream) -> None:
        self._stream = stream
        self._socket: socket.socket | None = stream.get_extra_info("socket")

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return await self._stream.read(max_bytes, timeout)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        await self._stream.write(buffer, timeout)

    async def aclose(self) -> None:
        await self._stream.aclose()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.AsyncNetworkStream:
        tls = await self._stream.start_tls(ssl_context, server_hostname, timeout)
        return SocketKeepingStream(tls)

    def get_extra_info(self, info: str) -> Any:
        if info == "is_readable":
            return readable(self._socket)
        return self._stream.get_extra_info(info)


class SocketKeepingBackend(httpcore.AsyncNetworkBackend):
    """httpcore's backend, its streams wrapped in `SocketKeepingStream`."""

    def __init__(self, backend: httpcore.AsyncNetworkBackend) -> None:
        self._backend = backend

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[SocketOption] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        stream = await self._backend.connect_tcp(host, port, timeout, local_address, socket_options)
        return SocketKeepingStream(stream)

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[SocketOption] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        stream = await self._backend.connect_unix_socket(path, timeout, socket_options)
        return SocketKeepingStream(stream)

    async def sleep(self, seconds: float) -> None:
        await self._backend.sleep(seconds)
