"""Idle kept-alive connections stay open `server.keep_alive_timeout` seconds, whatever the
head timer's limit (proxy/serving.py).

uvicorn's default keeps one 5 s, exactly the openai SDK's pool expiry: a request sent on a
pooled connection just as moim closed it was reset. Behind a balancer that keeps its own
upstream connections idle longer (AWS ALB: 60 s) every such close is a 502. The clients
here are raw sockets; the server is given a short head limit and a short keep-alive.
"""

import time

import pytest

from tests.e2e.test_slow_clients import CHAT, answer, connect, head

HEAD_LIMIT = 0.3  # server.header_timeout here
KEEP_ALIVE = 2.0  # server.keep_alive_timeout here


@pytest.fixture(params=["h11", "httptools"])
def proxy(make_proxy, request):
    return make_proxy(
        header_timeout=HEAD_LIMIT, keep_alive_timeout=KEEP_ALIVE, http_parser=request.param
    )


def served(sock):
    sock.sendall(head("/v1/chat/completions", len(CHAT)) + CHAT)
    status, body = answer(sock)
    assert status == 200, body


def test_an_idle_kept_alive_connection_outlives_the_head_limit(proxy):
    """Idle past `header_timeout` after a response, it still serves the next request."""
    with connect(proxy) as sock:
        served(sock)
        time.sleep(2 * HEAD_LIMIT)
        served(sock)
        time.sleep(2 * HEAD_LIMIT)
        served(sock)


def test_a_new_connection_that_sends_nothing_is_still_closed_at_the_head_limit(proxy):
    with connect(proxy) as sock:
        time.sleep(2 * HEAD_LIMIT)
        sock.settimeout(KEEP_ALIVE / 2)  # well before the keep-alive limit
        assert sock.recv(1) == b""


def test_an_idle_connection_is_closed_past_the_keep_alive_timeout(proxy):
    with connect(proxy) as sock:
        served(sock)
        time.sleep(KEEP_ALIVE + 0.5)
        sock.settimeout(0.5)  # closed by now: uvicorn's default 5 s would still hold it
        assert sock.recv(1) == b""
