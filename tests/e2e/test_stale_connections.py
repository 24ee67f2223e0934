"""A kept-alive upstream connection that dies as it is reused: moim sends the request once more,
on a new connection, so the client never sees a 502 for it (proxy/upstream_client.py, `send`).

The stand-in upstream is a few lines of raw asyncio on a loopback port, in its own thread: it
answers the first request on each connection with keep-alive, and on the second reads the
request and resets the connection without a word (SO_LINGER 0), as a server whose keep-alive
timeout fires just as the pooled connection is reused. It records every request it read, with
the connection it came on.
"""

import asyncio
import json
import logging
import socket
import struct
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing, contextmanager

import httpx
import pytest

HELLO = [{"role": "user", "content": "Hello"}]
CHAT = {
    "id": "chatcmpl-stale",
    "object": "chat.completion",
    "created": 1,
    "model": "gpt-4o-mini",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "Hi there"},
            "finish_reason": "stop",
        }
    ],
    "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3},
}
EMBEDDINGS = {
    "object": "list",
    "data": [{"object": "embedding", "index": 0, "embedding": [0.5, 0.25]}],
    "model": "embed",
    "usage": {"prompt_tokens": 1, "total_tokens": 1},
}


class ResetOnReuse:
    """Answers `answered` requests per connection (one); resets the connection on the next.

    The first answers wait until `together` requests have arrived, so that many clients at
    once leave the proxy's pool that many kept-alive connections.
    """

    def __init__(self, answered: int = 1, together: int = 1) -> None:
        self.answered = answered
        self.together = together
        self.gathered: asyncio.Event | None = None
        self.seen: list[tuple[int, str, bytes]] = []  # (connection, path, body)
        self.connections = 0
        self.tasks: set[asyncio.Task[None]] = set()
        self.writers: set[asyncio.StreamWriter] = set()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.tasks.add(task)
        self.writers.add(writer)
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.connections += 1
        connection = self.connections
        try:
            for number in range(self.answered + 1):
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                length = next(
                    int(line.split(":", 1)[1])
                    for line in lines
                    if line.lower().startswith("content-length:")
                )
                body = await reader.readexactly(length)
                path = lines[0].split(" ")[1]
                self.seen.append((connection, path, body))
                if number == self.answered:
                    break
                await self.gather()
                payload = json.dumps(EMBEDDINGS if path.endswith("/embeddings") else CHAT)
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                    b"content-length: %d\r\n\r\n%s" % (len(payload), payload.encode())
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()  # the client left: nothing to answer
            return
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()  # a reset, no response

    async def gather(self) -> None:
        """Wait until `together` requests have arrived (at once for later ones)."""
        if self.gathered is None:
            self.gathered = asyncio.Event()
        if len(self.seen) >= self.together:
            self.gathered.set()
        await self.gathered.wait()


@contextmanager
def serving(handler: ResetOnReuse, host: str = "127.0.0.1") -> Iterator[str]:
    """Run `handler` on a loopback port in a thread of its own; yield its base URL (`…/v1`)."""
    loop = asyncio.new_event_loop()
    started = threading.Event()
    box: dict[str, asyncio.Server] = {}

    async def start() -> None:
        box["server"] = await asyncio.start_server(handler.handle, host, 0)
        started.set()

    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(start(), loop).result(5)
    started.wait(5)
    port = box["server"].sockets[0].getsockname()[1]
    try:
        yield f"http://{host}:{port}/v1"
    finally:

        async def stop() -> None:
            box["server"].close()
            for writer in handler.writers:
                writer.transport.abort()
            await asyncio.gather(*handler.tasks, return_exceptions=True)
            await box["server"].wait_closed()

        asyncio.run_coroutine_threadsafe(stop(), loop).result(5)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()


def test_a_reset_on_a_reused_connection_is_retried_on_a_new_one(make_proxy):
    upstream = ResetOnReuse()
    with serving(upstream) as url:
        proxy = make_proxy(upstream_base_url=url)
        with proxy.client() as client:
            first = client.chat.completions.create(model="gpt-4o-mini", messages=HELLO)
            second = client.chat.completions.create(
                model="gpt-4o-mini", messages=[{"role": "user", "content": "Again"}]
            )

    assert first.choices[0].message.content == second.choices[0].message.content == "Hi there"
    connections = [(connection, path) for connection, path, _ in upstream.seen]
    assert connections == [
        (1, "/v1/chat/completions"),
        (1, "/v1/chat/completions"),  # the reused connection, reset
        (2, "/v1/chat/completions"),  # the same request again, on a new one
    ]
    assert upstream.seen[1][2] == upstream.seen[2][2]
    assert b"Again" in upstream.seen[2][2]


def test_with_a_proxy_in_the_environment_the_retry_goes_through_it_too(make_proxy, monkeypatch):
    """HTTP_PROXY routes moim's upstream requests (an egress the network requires, or
    audits): the retry on a new connection went straight to the provider's address."""
    forward = ResetOnReuse()  # the forward proxy, which answers in the provider's name
    direct = ResetOnReuse()  # the provider's own address: nothing may reach it directly
    with serving(forward) as via, serving(direct, "127.0.0.2") as url:
        for name in ("HTTPS_PROXY", "ALL_PROXY", "https_proxy", "all_proxy", "http_proxy"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("HTTP_PROXY", via.removesuffix("/v1"))
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")  # moim itself, for the test's clients
        monkeypatch.delenv("no_proxy", raising=False)
        proxy = make_proxy(upstream_base_url=url)
        with proxy.client() as client:
            for text in ("Hello", "Again"):
                messages = [{"role": "user", "content": text}]
                reply = client.chat.completions.create(model="gpt-4o-mini", messages=messages)
                assert reply.choices[0].message.content == "Hi there"

    assert direct.seen == []
    assert [(c, p) for c, p, _ in forward.seen] == [(1, url + "/chat/completions")] * 2 + [
        (2, url + "/chat/completions")
    ]


def test_the_retry_never_takes_another_pooled_connection(make_proxy):
    """Two kept-alive connections, both stale: the pool would hand the retry the other one,
    as stale, so it goes on a connection of its own."""
    upstream = ResetOnReuse(together=2)
    with serving(upstream) as url:
        proxy = make_proxy(upstream_base_url=url)
        with ThreadPoolExecutor(2) as pool, proxy.client() as client:

            def ask(text: str) -> str | None:
                messages = [{"role": "user", "content": text}]
                reply = client.chat.completions.create(model="gpt-4o-mini", messages=messages)
                return reply.choices[0].message.content

            assert list(pool.map(ask, ["one", "two"])) == ["Hi there", "Hi there"]
            assert ask("three") == "Hi there"

    assert upstream.connections == 3
    assert [connection for connection, _, body in upstream.seen if b"three" in body][-1] == 3


def test_a_pass_through_request_is_retried_on_a_new_connection(make_proxy):
    """`POST /v1/embeddings` goes out through the pass-through, its body read whole."""
    upstream = ResetOnReuse()
    with serving(upstream) as url:
        proxy = make_proxy(upstream_base_url=url)
        with proxy.client() as client:
            for text in ("one", "two"):
                result = client.embeddings.create(model="embed", input=text)
                assert result.data[0].embedding == [0.5, 0.25]

    assert [(c, p) for c, p, _ in upstream.seen] == [
        (1, "/v1/embeddings"),
        (1, "/v1/embeddings"),
        (2, "/v1/embeddings"),
    ]


def test_a_connection_that_fails_again_is_a_502_after_one_retry(make_proxy):
    """The retry is one: an upstream that resets every request is the client's 502, as before,
    after two attempts, each on a connection of its own."""
    upstream = ResetOnReuse(answered=0)
    with serving(upstream) as url:
        proxy = make_proxy(upstream_base_url=url)
        response = httpx.post(
            proxy.url + "/chat/completions",
            json={"model": "gpt-4o-mini", "messages": HELLO},
            timeout=10,
        )

    assert response.status_code == 502
    assert response.json()["error"]["code"] == "upstream_unreachable"
    assert [connection for connection, _, _ in upstream.seen] == [1, 2]


def test_a_refused_connection_is_not_retried(make_proxy, caplog):
    """A connect error means the upstream is down: one attempt, a 502 at once."""
    with closing(socket.socket()) as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # bound, never listening: connections are refused
        proxy = make_proxy(upstream_base_url=f"http://127.0.0.1:{port}/v1")
        caplog.set_level(logging.INFO, logger="proxy.upstream_client")
        response = httpx.post(
            proxy.url + "/chat/completions",
            json={"model": "gpt-4o-mini", "messages": HELLO},
            timeout=10,
        )

    assert response.status_code == 502
    assert response.json()["error"]["code"] == "upstream_unreachable"
    assert "ConnectError" in response.json()["error"]["message"]
    assert not [r for r in caplog.records if "retrying" in r.getMessage()]


@pytest.fixture(autouse=True)
def _no_upstream_requests_elsewhere(upstream):
    """The session's fake upstream is not used here: nothing may reach it."""
    yield
    assert upstream.requests == []
