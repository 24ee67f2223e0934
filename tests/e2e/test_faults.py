"""Upstream faults through the real proxy: moim answers fast, relays faithfully, never breaks.

CONTRACT.md, "Errors": the provider's own status and body for provider errors, OpenAI's shape
for what moim answers itself. STYLE.md 12: a stream that breaks or is left still has its
turn stored, marked partial; one the provider breaks off breaks off at the client too, as
called directly (more in `tests/e2e/test_break_off.py`). After every fault the store passes
SQLite's integrity check.

Faults the session's fake upstream cannot produce come from `faulty`, a tiny provider defined
here whose model name picks the fault.

Nothing leaks: after each fault the proxy holds at most its one idle keep-alive connection
to each provider (its own sockets, counted in /proc/self/net/tcp: the proxy runs in this
process), and no thread beyond its pools. A client that leaves, streamed or not, does not
hang the proxy.
"""

import asyncio
import json
import os
import socket
import sys
import threading
import time
from contextlib import closing
from urllib.parse import urlsplit

import httpx
import openai
import pytest
import sqlean
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from proxy.config import ModelRoute
from proxy.runtime import WORKER_THREADS
from tests.conftest import serve_app

STALL = 5.0  # how long the faulty upstream goes quiet; every timeout here is far shorter
SLOW_JSON = 1.0  # how long the faulty upstream thinks before a non-streamed answer
READ_TIMEOUT = 0.5
USER = {"x-memory-user-id": "fault-user"}


def _chunk(content):
    event = {
        "id": "chatcmpl-fault",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "fault",
        "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": None}],
    }
    return f"data: {json.dumps(event)}\n\n".encode()


GARBAGE_SSE = [
    _chunk("Hello, "),
    b"this line is not an event at all\n\n",
    b": a comment line\n\ndata: {not json\n\n",
    b"data: [1, 2, 3]\n\nevent: ping\nid: 7\n\n",
    _chunk("world"),
    b"\x00\xff binary junk \xfe\n\n",
    b"data: [DONE]\n\n",
]
TRUNCATED_JSON = b'{"id": "chatcmpl-fault", "object": "chat.completion", "choices": [{"ind'


async def _wait_or_leave(request, seconds):
    """Sleep, but return early once the client (moim) hangs up, so shutdown is quick."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if await request.is_disconnected():
            return
        await asyncio.sleep(0.05)


async def _faulty(request: Request) -> Response:
    body = json.loads(await request.body())
    model = body["model"]
    if model == "stall-before-headers":
        await _wait_or_leave(request, STALL)
        return Response(b"{}", media_type="application/json")
    if model == "stall-mid-stream":

        async def events():
            yield _chunk("Hello, ")
            yield _chunk("world")
            await asyncio.sleep(STALL)  # cancelled by Starlette when moim hangs up
            yield _chunk(" never sent")
            yield b"data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")
    if model == "garbage-sse":

        async def garbage():
            for part in GARBAGE_SSE:
                yield part

        return StreamingResponse(garbage(), media_type="text/event-stream")
    if model == "truncated-json":
        return Response(TRUNCATED_JSON, media_type="application/json")
    if model == "slow-json":
        await _wait_or_leave(request, SLOW_JSON)
        reply = {"role": "assistant", "content": "Thought about it"}
        choice = {"index": 0, "message": reply, "finish_reason": "stop"}
        completion = {
            "id": "chatcmpl-slow",
            "object": "chat.completion",
            "created": 1,
            "model": model,
            "choices": [choice],
        }
        return Response(json.dumps(completion).encode(), media_type="application/json")
    return Response(b'{"error": "unknown fault"}', status_code=404)


@pytest.fixture(scope="module")
def faulty():
    app = Starlette(routes=[Route("/v1/chat/completions", _faulty, methods=["POST"])])
    with serve_app(app) as root:
        yield root + "/v1"


def chat_body(model, text="Tell me something", stream=False):
    return {"model": model, "stream": stream, "messages": [{"role": "user", "content": text}]}


def post(proxy, body, **kwargs):
    return httpx.post(
        proxy.url + "/chat/completions", json=body, headers=USER, timeout=30, **kwargs
    )


def assert_openai_error(response, status, code=None):
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    if code is not None:
        assert error["code"] == code


def stored(proxy, user="fault-user"):
    proxy.flush()
    assert proxy.layer.store.integrity_ok()
    return [(m.role, m.content, m.partial) for m in proxy.layer.store.messages(user)]


def wait_for(predicate, seconds=5.0):
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


# -- before any byte of the answer -------------------------------------------------------------


def test_connection_refused_is_a_fast_openai_shaped_502(make_proxy):
    proxy = make_proxy(upstream_base_url="http://127.0.0.1:9/v1")
    post(proxy, chat_body("gpt-4o-mini"))  # the first request loads tiktoken's tables (~1 s)
    for stream in (False, True):
        started = time.monotonic()
        response = post(proxy, chat_body("gpt-4o-mini", stream=stream))
        assert time.monotonic() - started < 1.0
        assert_openai_error(response, 502, "upstream_unreachable")
        assert response.headers["x-request-id"]
    assert stored(proxy) == []


def test_no_headers_before_the_read_timeout_is_a_504_soon_after_it(make_proxy, faulty):
    proxy = make_proxy(upstream_base_url=faulty, read_timeout=READ_TIMEOUT)
    for stream in (False, True):
        started = time.monotonic()
        response = post(proxy, chat_body("stall-before-headers", stream=stream))
        elapsed = time.monotonic() - started
        assert_openai_error(response, 504, "upstream_timeout")
        assert READ_TIMEOUT <= elapsed < 2.0
    assert stored(proxy) == []


# -- provider errors ---------------------------------------------------------------------------


@pytest.mark.parametrize("model", ["error-500", "error-429", "error-400", "error-401"])
@pytest.mark.parametrize("stream", [False, True])
def test_provider_errors_keep_their_status_body_and_retry_after(proxy, upstream, model, stream):
    body = chat_body(model, stream=stream)
    direct = httpx.post(upstream.url + "/chat/completions", json=body)
    response = post(proxy, body)
    assert response.status_code == direct.status_code == int(model[-3:])
    assert response.content == direct.content
    assert response.headers["content-type"] == "application/json"
    assert response.headers.get("retry-after") == ("7" if model == "error-429" else None)
    assert response.headers["x-memory-mode"] == "auto"
    assert proxy.layer.store.integrity_ok()


def test_the_sdk_sees_the_providers_rate_limit_error(proxy):
    with proxy.client() as client, pytest.raises(openai.RateLimitError) as caught:
        client.chat.completions.create(**chat_body("error-429"))
    assert caught.value.response.headers["retry-after"] == "7"
    assert caught.value.body["code"] == "rate_limit_exceeded"


# -- during the answer -------------------------------------------------------------------------


def said_before_it_broke(client, body):
    """What a streamed chat said before the SDK raised, and what it raised (it must raise)."""
    said = []
    with pytest.raises((openai.APIConnectionError, httpx.TransportError)) as caught:
        for chunk in client.chat.completions.create(**body):
            said.append(chunk.choices[0].delta.content or "")
    return "".join(said), caught.value


def test_a_stream_that_stalls_breaks_off_at_the_client_with_its_part_stored_partial(
    make_proxy, faulty
):
    proxy = make_proxy(upstream_base_url=faulty, read_timeout=READ_TIMEOUT)
    body = chat_body("stall-mid-stream", "Greet me", True)
    # called directly with moim's read timeout, the SDK times out mid-stream
    with openai.OpenAI(
        base_url=faulty, api_key="sk-up", max_retries=0, timeout=READ_TIMEOUT
    ) as client:
        direct, direct_error = said_before_it_broke(client, body)
    assert isinstance(direct_error, httpx.ReadTimeout)
    started = time.monotonic()
    with proxy.client(default_headers=USER) as client:  # the SDK's timeout: minutes
        said, error = said_before_it_broke(client, body)
    assert time.monotonic() - started < 2.0
    assert said == direct == "Hello, world"
    assert isinstance(error, httpx.RemoteProtocolError)  # moim timed out: the stream broke off
    assert stored(proxy) == [("user", "Greet me", False), ("assistant", "Hello, world", True)]


def test_a_stream_whose_connection_drops_breaks_off_at_the_client_and_is_stored_partial(
    proxy, upstream
):
    body = chat_body("broken", "Count for me", stream=True)
    with openai.OpenAI(base_url=upstream.url, api_key="sk-up", max_retries=0) as client:
        direct, direct_error = said_before_it_broke(client, body)
    with proxy.client(default_headers=USER) as client:
        said, error = said_before_it_broke(client, body)
    assert said == direct == "tick 00 tick 01 tick 02 "
    assert type(error) is type(direct_error) is httpx.RemoteProtocolError
    assert stored(proxy) == [
        ("user", "Count for me", False),
        ("assistant", "tick 00 tick 01 tick 02 ", True),
    ]


def test_garbage_between_events_is_relayed_as_sent_and_the_valid_events_are_stored(
    make_proxy, faulty
):
    proxy = make_proxy(upstream_base_url=faulty)
    with httpx.stream(
        "POST",
        proxy.url + "/chat/completions",
        headers=USER,
        timeout=10,
        json=chat_body("garbage-sse", "Say hello", stream=True),
    ) as response:
        assert response.status_code == 200
        data = b"".join(response.iter_raw())
    assert data == b"".join(GARBAGE_SSE)
    assert stored(proxy) == [("user", "Say hello", False), ("assistant", "Hello, world", False)]


def test_a_truncated_json_body_is_relayed_as_sent(make_proxy, faulty):
    proxy = make_proxy(upstream_base_url=faulty)
    response = post(proxy, chat_body("truncated-json", "Answer briefly"))
    assert response.status_code == 200
    assert response.content == TRUNCATED_JSON
    assert stored(proxy) == [("user", "Answer briefly", False)]


def test_a_body_cut_off_by_a_dropped_connection_is_an_openai_shaped_502(proxy):
    response = post(proxy, chat_body("broken", "Count for me"))
    assert_openai_error(response, 502, "upstream_broken")
    assert proxy.layer.store.integrity_ok()
    assert httpx.get(proxy.root + "/health").status_code == 200


# -- the client leaves -------------------------------------------------------------------------


def pooled_threads(prefix):
    return [t for t in threading.enumerate() if t.name.startswith(prefix)]


def unpooled_threads():
    """Live threads, but for the bounded pools: anyio's workers and recall's lexical search."""
    pooled = pooled_threads("AnyIO worker thread") + pooled_threads("moim-lexical")
    return len(threading.enumerate()) - len(pooled)


def test_a_client_that_leaves_mid_stream_closes_the_upstream_and_leaks_nothing(proxy, upstream):
    body = chat_body("slow", "Take your time", stream=True)
    with proxy.client(default_headers=USER) as client:  # warm every pool and worker thread
        list(client.chat.completions.create(**chat_body("gpt-4o-mini", "Warm up", stream=True)))
    proxy.flush()
    baseline = unpooled_threads()

    leave_after_three_ticks(proxy, body)
    assert wait_for(lambda: upstream.disconnects == 1), "moim kept the upstream stream open"

    messages = stored(proxy)
    assert messages[:2] == [("user", "Warm up", False), ("assistant", "echo: Warm up", False)]
    assert messages[2] == ("user", "Take your time", False)
    role, content, partial = messages[3]
    assert (role, partial) == ("assistant", True)
    assert content.startswith("tick 00 tick 01 tick 02 ") and len(content) < len("tick 00 ") * 40
    # the pools may have grown by a thread meanwhile (anyio starts workers on demand), but
    # never past their bounds; any other thread left behind is a leak
    assert wait_for(lambda: unpooled_threads() <= baseline), threading.enumerate()
    assert len(pooled_threads("moim-lexical")) <= 4
    assert len(pooled_threads("AnyIO worker thread")) <= WORKER_THREADS
    metrics = httpx.get(proxy.root + "/metrics").text
    assert "moim_ingest_pending 0" in metrics
    assert "moim_memory_write_failures_total 0" in metrics


# -- nothing leaks ------------------------------------------------------------------------------

FAULT_MODELS = (
    "stall-before-headers",
    "stall-mid-stream",
    "garbage-sse",
    "truncated-json",
    "slow-json",
)


def provider_sockets(url):
    """This process's open TCP connections to the provider at `url`: established, or closed
    by the provider but not yet by us (CLOSE_WAIT). The proxy under test runs in this process,
    and its pool is the only client of the providers here once each test's own calls end."""
    port = urlsplit(url).port
    ours = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # closed meanwhile
            continue
        if target.startswith("socket:["):
            ours.add(target[len("socket:[") : -1])
    count = 0
    for table in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        with open(table) as rows:
            for row in list(rows)[1:]:
                fields = row.split()  # sl local rem st ... inode (the tenth)
                remote_port = int(fields[2].rsplit(":", 1)[1], 16)
                if remote_port == port and fields[3] in ("01", "08") and fields[9] in ours:
                    count += 1
    return count


def leave_at_once(proxy, body):
    """Send a chat request on a raw socket and hang up before any byte of the answer."""
    payload = json.dumps(body).encode()
    head = (
        "POST /v1/chat/completions HTTP/1.1\r\nhost: localhost\r\n"
        "content-type: application/json\r\n"
        f"x-memory-user-id: fault-user\r\ncontent-length: {len(payload)}\r\n\r\n"
    )
    where = urlsplit(proxy.root)
    with socket.create_connection((where.hostname, where.port)) as sock:
        sock.sendall(head.encode() + payload)
        time.sleep(0.1)  # the request is under way: moim has called the provider


def leave_after_three_ticks(proxy, body):
    with httpx.stream(
        "POST", proxy.url + "/chat/completions", json=body, headers=USER, timeout=10
    ) as response:
        received = b""
        for part in response.iter_raw():
            received += part
            if received.count(b"tick") >= 3:
                break


def read_all(proxy, body):
    with httpx.stream(
        "POST", proxy.url + "/chat/completions", json=body, headers=USER, timeout=10
    ) as response:
        b"".join(response.iter_raw())


def read_broken(proxy, body):
    """Read a stream the provider breaks off: it breaks off at the client too."""
    with pytest.raises(httpx.RemoteProtocolError):
        read_all(proxy, body)


FAULT_CASES = {
    "provider 500": lambda p: post(p, chat_body("error-500")),
    "provider 500, streamed": lambda p: post(p, chat_body("error-500", stream=True)),
    "provider 429": lambda p: post(p, chat_body("error-429")),
    "dropped mid-stream": lambda p: read_broken(p, chat_body("broken", stream=True)),
    "dropped mid-body": lambda p: post(p, chat_body("broken")),
    "no headers in time": lambda p: post(p, chat_body("stall-before-headers")),
    "no headers in time, streamed": lambda p: post(
        p, chat_body("stall-before-headers", stream=True)
    ),
    "stalls mid-stream": lambda p: read_broken(p, chat_body("stall-mid-stream", stream=True)),
    "garbage events": lambda p: read_all(p, chat_body("garbage-sse", stream=True)),
    "truncated JSON": lambda p: post(p, chat_body("truncated-json")),
    "answer after the timeout": lambda p: post(p, chat_body("slow-json")),
    "client leaves mid-stream": lambda p: leave_after_three_ticks(
        p, chat_body("slow", stream=True)
    ),
    "client leaves at once, streamed": lambda p: leave_at_once(p, chat_body("slow", stream=True)),
    "client leaves at once": lambda p: leave_at_once(p, chat_body("slow-json")),
    "a plain turn": lambda p: post(p, chat_body("gpt-4o-mini", "Still fine?")),
}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads Linux's /proc")
def test_after_every_fault_the_proxy_holds_only_its_idle_provider_connections(
    make_proxy, upstream, faulty
):
    routes = {m: ModelRoute(m, api_base=faulty, openai_compatible=True) for m in FAULT_MODELS}
    proxy = make_proxy(routes=routes, read_timeout=READ_TIMEOUT)
    providers = {"fake": upstream.url, "faulty": faulty}
    post(proxy, chat_body("gpt-4o-mini", "Warm up"))  # tiktoken, the pool, worker threads
    proxy.flush()
    baseline = unpooled_threads()

    def held():
        return {name: provider_sockets(url) for name, url in providers.items()}

    def settled():  # one connection at a time, each kept alive at most: one idle per provider
        return all(count <= 1 for count in held().values())

    leftovers = {}
    for case, run in FAULT_CASES.items():
        run(proxy)
        if not wait_for(settled, 3.0):
            leftovers[case] = held()
    assert leftovers == {}, f"connections held after these faults: {leftovers}"
    # requests overlapped (a client that left, the next case): the worker pool may have grown,
    # within its bound; anything else is back to what it was
    assert wait_for(lambda: unpooled_threads() <= baseline), threading.enumerate()
    assert len(pooled_threads("AnyIO worker thread")) <= WORKER_THREADS
    proxy.flush()
    assert proxy.layer.store.integrity_ok()
    assert httpx.get(proxy.root + "/health", timeout=1).status_code == 200


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads Linux's /proc")
def test_a_client_that_leaves_a_non_streamed_request_does_not_hang_the_proxy(make_proxy, faulty):
    """The provider thinks for a second; the client gives up after a fraction of it. moim
    goes on serving others meanwhile, ends the provider's call when the client leaves (as the
    client's closed connection would called directly), stores what the client said (as for a
    stream the client left before its first event), and holds nothing after."""
    proxy = make_proxy(upstream_base_url=faulty)
    post(proxy, chat_body("truncated-json", "Warm up"))
    proxy.flush()
    baseline = unpooled_threads()
    counted = 'moim_chat_requests_total{status="499"} '

    def left():
        metrics = httpx.get(proxy.root + "/metrics").text
        return int(float(metrics.split(counted)[1].split()[0])) if counted in metrics else 0

    started = time.monotonic()
    with pytest.raises(httpx.ReadTimeout):  # the client gives up and hangs up
        httpx.post(
            proxy.url + "/chat/completions",
            json=chat_body("slow-json", "Think it over"),
            headers=USER,
            timeout=0.2,
        )
    meanwhile = httpx.get(proxy.root + "/health", timeout=1)
    elapsed = time.monotonic() - started
    assert meanwhile.status_code == 200 and elapsed < SLOW_JSON  # not held up by it

    assert wait_for(lambda: left() == 1, SLOW_JSON + 3.0), "the request never finished"
    assert stored(proxy) == [
        ("user", "Warm up", False),  # its provider's answer was cut off: nothing to store
        ("user", "Think it over", False),  # the provider's call ended with the client's
    ]
    assert wait_for(lambda: provider_sockets(faulty) <= 1), provider_sockets(faulty)
    assert wait_for(lambda: unpooled_threads() <= baseline), threading.enumerate()


# -- the check every test above relies on ------------------------------------------------------


def test_the_integrity_check_reports_the_store_as_it_is_now(proxy):
    """`integrity_ok()` runs on its caller's long-lived connection; while other connections
    (the writer's) add chunks and merge FTS5 segments, it must not report a sound store as
    malformed (SQLite's FTS5 integrity check trusts that connection's cached structure)."""
    store = proxy.layer.store
    checks = [store.integrity_ok()]
    with proxy.client() as client:
        for turn in range(24):
            client.chat.completions.create(
                model="gpt-4o-mini",
                messages=[
                    {"role": "user", "content": f"Plant number {turn} on my balcony is a fern"}
                ],
            )
            if turn % 4 == 3:
                proxy.flush()
                checks.append(store.integrity_ok())
    with closing(sqlean.connect(str(proxy.config.db_path))) as fresh:
        assert fresh.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    assert checks == [True] * 7
