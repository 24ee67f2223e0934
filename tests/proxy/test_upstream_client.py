"""The upstream client's idle-connection check (proxy/upstream_client.py): same answers as
httpcore's own, from the socket the stream kept.

The server here is a few lines of asyncio on a free loopback port, so a test decides exactly
when a kept-alive connection is closed under the client.
"""

import asyncio
import socket

import pytest

from proxy.config import Config
from proxy.upstream_client import SocketKeepingBackend, readable, upstream_client

OK = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-type: text/plain\r\n\r\nok"


class OneAnswerServer:
    """Answers one request per connection, keep-alive, then closes the connection."""

    def __init__(self) -> None:
        self.connections = 0
        self.closed = asyncio.Event()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        await reader.readuntil(b"\r\n\r\n")
        writer.write(OK)
        await writer.drain()
        writer.close()
        await writer.wait_closed()
        self.closed.set()


@pytest.mark.anyio
async def test_a_kept_alive_connection_the_server_closed_is_not_reused():
    """httpcore asks an idle connection whether its socket is readable before reusing it; a
    wrong answer would send the second request down a closed socket, and it would fail."""
    answers = OneAnswerServer()
    server = await asyncio.start_server(answers.handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server, upstream_client(Config()) as client:
        first = await client.get(f"http://127.0.0.1:{port}/a")
        await answers.closed.wait()
        await asyncio.sleep(0.05)  # the FIN reaches the client's socket
        second = await client.get(f"http://127.0.0.1:{port}/b")

    assert (first.status_code, second.status_code) == (200, 200)
    assert answers.connections == 2


@pytest.mark.anyio
async def test_the_client_pool_uses_the_socket_keeping_backend():
    """The hook is httpx's private pool: a later httpx that moves it fails here, not silently."""
    async with upstream_client(Config()) as client:
        backend = client._transport._pool._network_backend  # type: ignore[attr-defined]
    assert isinstance(backend, SocketKeepingBackend)


def test_readable_is_false_while_nothing_came_and_true_once_the_peer_closed():
    left, right = socket.socketpair()
    with left, right:
        quiet = readable(left)
        right.close()
        closed = readable(left)
    assert (quiet, closed) == (False, True)
    assert readable(None) is True
