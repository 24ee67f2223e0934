"""Slow clients cannot hold the server: a head or a body that does not arrive in time is a
408 in OpenAI's shape and the connection closes (proxy/serving.py, proxy/limits.py).

Before, uvicorn waited for a head, and moim for a body, as long as a client liked: 1,500
slow connections were each held 40 s, as long as the clients chose. The clients here are
raw sockets, so they can stop anywhere; each test gives the server a short limit and the
socket ten seconds to see the answer (the test fails on a socket that is still waiting).
"""

import http.client
import json
import logging
import socket
import time
from contextlib import closing
from urllib.parse import urlsplit

import httpx
import pytest

LIMIT = 0.3  # seconds: server.header_timeout and server.body_timeout here
PATIENCE = 10.0  # seconds a socket waits for the server's answer before the test fails
CHAT = json.dumps(
    {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Hi"}]}
).encode()


@pytest.fixture(params=["h11", "httptools"])
def proxy(make_proxy, request):
    """Both of uvicorn's parsers: each has its own protocol class (proxy/serving.py)."""
    return make_proxy(header_timeout=LIMIT, body_timeout=LIMIT, http_parser=request.param)


def connect(proxy):
    address = urlsplit(proxy.root)
    sock = socket.create_connection((address.hostname, address.port), timeout=PATIENCE)
    return closing(sock)


def head(path, length=None, user="slow"):
    lines = [f"POST {path} HTTP/1.1", "host: localhost", f"x-memory-user-id: {user}"]
    if length is not None:
        lines += ["content-type: application/json", f"content-length: {length}"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def answer(sock):
    """The response on `sock`: (status, JSON body)."""
    response = http.client.HTTPResponse(sock)
    response.begin()
    return response.status, json.loads(response.read())


def assert_timed_out(sock):
    """The server answers 408 in OpenAI's shape, then closes the connection; the error."""
    status, body = answer(sock)
    assert status == 408, (status, body)
    assert set(body["error"]) == {"message", "type", "param", "code"}
    assert (body["error"]["type"], body["error"]["code"]) == (
        "invalid_request_error",
        "request_timeout",
    )
    assert sock.recv(1) == b""  # closed
    return body["error"]


# -- the head ----------------------------------------------------------------------------------


def test_a_head_that_stops_halfway_is_a_408_and_the_connection_closes(proxy):
    with connect(proxy) as sock:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nhost: localhost\r\n")
        assert_timed_out(sock)


def test_a_head_dripped_a_byte_at_a_time_is_cut_at_the_limit(proxy):
    """The limit is for the whole head, not between bytes: a trickle does not reset it."""
    with connect(proxy) as sock:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nx-pad: ")
        sock.settimeout(0.05)
        deadline = time.monotonic() + PATIENCE
        while time.monotonic() < deadline:
            try:
                sock.sendall(b"a")
                if sock.recv(1, socket.MSG_PEEK):
                    break
            except TimeoutError:
                continue
        sock.settimeout(PATIENCE)
        assert_timed_out(sock)


def test_a_client_still_sending_its_head_after_the_408_reads_it_and_a_clean_close(proxy):
    """The 408 was written and the socket closed at once: bytes of the head the client sent
    meanwhile, unread, made the kernel answer with a reset instead of FIN, and the client's
    next read raised ECONNRESET (the dripped-head test above, once in CI). The server now
    closes its side after the 408 and reads on, discarding, until the client closes."""
    with connect(proxy) as sock:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nx-pad: ")
        assert sock.recv(1, socket.MSG_PEEK)  # the 408 is there
        sock.sendall(b"a" * 1_000_000)  # the rest of a long head, as a slow client sends it
        assert_timed_out(sock)


def test_a_connection_that_sends_nothing_is_closed_without_a_word(proxy):
    with connect(proxy) as sock:
        assert sock.recv(1) == b""


def test_a_kept_alive_connection_s_next_head_has_the_same_limit(proxy):
    with connect(proxy) as sock:
        sock.sendall(head("/v1/chat/completions", len(CHAT)) + CHAT)
        status, body = answer(sock)
        assert status == 200, body
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\n")
        assert_timed_out(sock)


# -- the body ----------------------------------------------------------------------------------

BODY_PATHS = [
    "/v1/chat/completions",
    "/v1/memory/facts",
    "/v1/memory/import",
    "/v1/embeddings",
]


@pytest.mark.parametrize("path", BODY_PATHS)
def test_a_body_that_stops_is_a_408_and_nothing_is_stored(proxy, upstream, path):
    with connect(proxy) as sock:
        sock.sendall(head(path, len(CHAT)) + CHAT[:10])
        error = assert_timed_out(sock)
    assert "server.body_timeout" in error["message"]
    assert upstream.requests == []
    proxy.flush()
    stats = httpx.get(proxy.root + "/v1/memory/stats", headers={"x-memory-user-id": "slow"})
    assert (stats.json()["messages"], stats.json()["facts"]) == (0, 0)


def test_a_streamed_pass_through_body_that_stops_is_a_408(proxy, upstream):
    """A non-JSON upload is streamed on to the provider; a stall there is refused as well."""
    lines = [
        "POST /v1/files HTTP/1.1",
        "host: localhost",
        "content-type: application/octet-stream",
        "content-length: 1000",
    ]
    with connect(proxy) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + b"x" * 10)
        error = assert_timed_out(sock)
    assert "server.body_timeout" in error["message"]


def test_a_body_dripped_below_the_minimum_rate_is_a_408(proxy, upstream):
    """A byte every 50 ms never stalls for the limit, but falls far behind 1 KiB/s."""
    with connect(proxy) as sock:
        sock.sendall(head("/v1/chat/completions", 100_000))
        sock.settimeout(0.05)
        deadline = time.monotonic() + PATIENCE
        while time.monotonic() < deadline:
            try:
                sock.sendall(b" ")
                if sock.recv(1, socket.MSG_PEEK):
                    break
            except TimeoutError:
                continue
        sock.settimeout(PATIENCE)
        assert_timed_out(sock)
    assert upstream.requests == []


def test_a_client_that_leaves_mid_body_is_one_log_line_without_a_traceback(proxy, caplog):
    caplog.set_level(logging.INFO)
    with connect(proxy) as sock:
        sock.sendall(head("/v1/chat/completions", 1000) + CHAT[:10])
    deadline = time.monotonic() + PATIENCE
    while time.monotonic() < deadline and not left(caplog):
        time.sleep(0.01)
    httpx.get(proxy.root + "/health")  # anything logged after the line is in by now
    assert [r.getMessage() for r in left(caplog)] == [
        "POST /v1/chat/completions: the client left while sending its body (10 of 1000 bytes read)"
    ]
    assert [
        r.getMessage() for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR
    ] == []


def left(caplog):
    return [r for r in caplog.records if "left while sending" in r.getMessage()]
