"""The upstream client (proxy/upstream_client.py) and its transport
(proxy/aiohttp_transport.py): what reaches the provider and what comes back is what httpx's own
transport sends and returns, byte for byte; failures are httpx's errors; connections are reused
only when whole.

The server here is a few lines of asyncio on a free loopback port, so a test sees the exact
bytes a request arrives as and decides when a connection is closed under the client.
"""

import asyncio
import gzip
from collections.abc import AsyncIterator, Awaitable, Callable

import httpx
import pytest

from proxy.aiohttp_transport import AiohttpTransport
from proxy.config import Config
from proxy.upstream_client import proxy_in_environment, send, upstream_client

OK = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-type: text/plain\r\n\r\nok"
Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def read_request(reader: asyncio.StreamReader) -> bytes | None:
    """One whole HTTP/1.1 request (head and body, length or chunked), or None at the end."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    lowered = head.lower()
    if b"transfer-encoding: chunked" in lowered:
        body = b""
        while not body.endswith(b"0\r\n\r\n"):
            body += await reader.read(65536)
        return head + body
    length = 0
    for line in lowered.split(b"\r\n"):
        if line.startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    return head + await reader.readexactly(length)


class Recorder:
    """Answers every request on a connection with `answer`, keeping the bytes it got."""

    def __init__(self, answer: bytes = OK) -> None:
        self.answer = answer
        self.requests: list[bytes] = []
        self.connections = 0
        self.closed = asyncio.Event()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        while (request := await read_request(reader)) is not None:
            self.requests.append(request)
            writer.write(self.answer)
            await writer.drain()
        writer.close()
        self.closed.set()


async def serve(handle: Handler) -> tuple[asyncio.Server, str]:
    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"


def aiohttp_client() -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=AiohttpTransport(ssl_context=httpx.create_ssl_context()))


async def exchange(client: httpx.AsyncClient, request: httpx.Request) -> httpx.Response:
    response = await client.send(request, stream=True)
    await response.aread()
    return response


async def streamed() -> AsyncIterator[bytes]:
    yield b'{"a":'
    yield b"1}"


HEADERS = [
    ("Authorization", "Bearer sk-x"),
    ("X-Trace", "1"),
    ("x-trace", "2"),
    ("Content-Type", "application/json"),
    ("User-Agent", "OpenAI/Python 1.0"),
]


@pytest.mark.anyio
@pytest.mark.parametrize("body", ["bytes", "streamed", "streamed with a length"])
async def test_the_provider_receives_the_bytes_httpx_itself_would_send(body: str):
    recorder = Recorder()
    server, base = await serve(recorder.handle)
    async with server:
        for client in (httpx.AsyncClient(), aiohttp_client()):
            async with client:
                headers = HEADERS + ([("Content-Length", "7")] if body.endswith("length") else [])
                content = b'{"a":1}' if body == "bytes" else streamed()
                url = f"{base}/v1/chat/completions?q=%2F&r=a b"
                await exchange(
                    client, client.build_request("POST", url, headers=headers, content=content)
                )
    direct, ours = recorder.requests
    # The one difference: a name sent twice in two spellings goes as the first spelling.
    assert ours == direct.replace(b"x-trace: 2", b"X-Trace: 2")
    assert b"X-Trace: 1\r\nX-Trace: 2\r\n" in ours


@pytest.mark.anyio
async def test_the_client_gets_the_provider_s_header_lines_and_undecoded_body():
    packed = gzip.compress(b'{"ok": true}')
    answer = (
        b"HTTP/1.1 201 Created\r\nX-Dup: a\r\nx-dup: b\r\nSet-Cookie: s=1\r\n"
        b"Content-Encoding: gzip\r\ncontent-length: %d\r\n\r\n" % len(packed)
    ) + packed
    server, base = await serve(Recorder(answer).handle)
    async with server, aiohttp_client() as client:
        response = await client.send(client.build_request("GET", f"{base}/x"), stream=True)
        raw = b"".join([chunk async for chunk in response.aiter_raw()])
        await response.aclose()
        decoded = await client.get(f"{base}/x")
    assert (response.status_code, response.reason_phrase) == (201, "Created")
    assert response.headers.raw[:3] == [(b"X-Dup", b"a"), (b"x-dup", b"b"), (b"Set-Cookie", b"s=1")]
    assert raw == packed
    assert decoded.json() == {"ok": True}


@pytest.mark.anyio
async def test_a_whole_answer_returns_its_connection_and_one_cut_short_closes_it():
    recorder = Recorder()
    server, base = await serve(recorder.handle)
    async with server, upstream_client(Config()) as client:
        await client.get(f"{base}/a")
        await client.get(f"{base}/b")
    assert recorder.connections == 1

    ended = asyncio.Event()

    async def endless(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n")
        await writer.drain()
        if await reader.read(1) == b"":  # the client closed the connection
            ended.set()
        writer.close()

    server, base = await serve(endless)
    async with server, upstream_client(Config()) as client:
        response = await client.send(client.build_request("GET", f"{base}/c"), stream=True)
        async for _ in response.aiter_raw():
            break
        await response.aclose()
        await asyncio.wait_for(ended.wait(), 5)


@pytest.mark.anyio
async def test_a_kept_alive_connection_the_server_closed_is_not_reused():
    """A connection the server closed while idle must not carry the next request."""

    class OneAnswer(Recorder):
        async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.connections += 1
            await reader.readuntil(b"\r\n\r\n")
            writer.write(OK)
            await writer.drain()
            writer.close()
            await writer.wait_closed()
            self.closed.set()

    answers = OneAnswer()
    server, base = await serve(answers.handle)
    async with server, upstream_client(Config()) as client:
        first = await client.get(f"{base}/a")
        await answers.closed.wait()
        await asyncio.sleep(0.05)  # the FIN reaches the client's socket
        second = await client.get(f"{base}/b")
    assert (first.status_code, second.status_code) == (200, 200)
    assert answers.connections == 2


async def _cut_mid_body(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await read_request(reader)
    writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n")
    await writer.drain()
    writer.close()


async def _no_answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await read_request(reader)
    writer.close()


async def _silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await read_request(reader)
    await reader.read(1)  # until the client gives up
    writer.close()


@pytest.mark.anyio
async def test_failures_are_httpx_errors():
    async with aiohttp_client() as client:
        server, base = await serve(_cut_mid_body)
        async with server:
            response = await client.send(client.build_request("GET", f"{base}/"), stream=True)
            with pytest.raises(httpx.RemoteProtocolError):
                async for _ in response.aiter_raw():
                    pass
            await response.aclose()
        server, base = await serve(_no_answer)
        async with server:
            with pytest.raises(httpx.RemoteProtocolError):
                await client.get(f"{base}/")
        server, base = await serve(_silent)
        async with server:
            with pytest.raises(httpx.ReadTimeout):
                await client.get(f"{base}/", timeout=httpx.Timeout(5, read=0.2))
        with pytest.raises(httpx.ConnectError):
            await client.get(base)  # the server is gone: refused


@pytest.mark.anyio
async def test_send_retries_a_request_the_server_closed_unanswered_on_a_new_connection():
    answered = Recorder()
    calls = 0

    async def first_drops(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            await _no_answer(reader, writer)
        else:
            await answered.handle(reader, writer)

    server, base = await serve(first_drops)
    async with server, upstream_client(Config()) as client:
        response = await send(client, client.build_request("POST", f"{base}/", content=b"{}"))
        body = await response.aread()
        await response.aclose()
        await asyncio.wait_for(answered.closed.wait(), 5)  # a one-shot connection
    assert (response.status_code, body, calls) == (200, b"ok", 2)


def test_a_proxy_in_the_environment_keeps_httpx_s_own_transport():
    assert proxy_in_environment({"HTTPS_PROXY": "http://proxy:3128"})
    assert proxy_in_environment({"all_proxy": "socks5://proxy:1080"})
    assert not proxy_in_environment({"NO_PROXY": "localhost", "HTTP_PROXY": ""})


@pytest.mark.anyio
async def test_a_header_value_that_is_not_utf8_arrives_as_its_bytes():
    """aiohttp writes header text as UTF-8; such a request goes out on httpx's own transport."""
    recorder = Recorder()
    server, base = await serve(recorder.handle)
    async with server, aiohttp_client() as client:
        response = await client.get(f"{base}/x", headers=[(b"X-App", b"Caf\xe9 1.0")])
    assert response.status_code == 200
    assert b"\r\nX-App: Caf\xe9 1.0\r\n" in recorder.requests[0]
