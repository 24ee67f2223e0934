"""A store another process has locked: the memory API says 503 and when to retry; chat goes on.

CONTRACT.md, "Errors": never a 5xx caused by the memory layer on chat (it fails open, with
`x-memory-error` when it must). The memory API cannot fail open: a write it cannot make is
a 503 in OpenAI's shape with `Retry-After`, and the same call succeeds once the lock is gone.
The lock is real: a second SQLite connection holding `BEGIN EXCLUSIVE` on the proxy's file.
"""

import json
import threading
import time
from contextlib import contextmanager

import httpx
import openai
import pytest
import sqlean

USER = {"x-memory-user-id": "alice"}
BUSY_TIMEOUT = 0.2  # seconds moim waits for the lock (memory.busy_timeout)


@contextmanager
def locked(path):
    """Hold SQLite's write lock on `path` from another connection until the block ends."""
    conn = sqlean.connect(str(path), isolation_level=None, timeout=0)
    try:
        conn.execute("BEGIN EXCLUSIVE")
        yield
        conn.execute("ROLLBACK")
    finally:
        conn.close()


@pytest.fixture
def proxy(make_proxy):
    return make_proxy(settings={"busy_timeout": BUSY_TIMEOUT})


def call(proxy, method, path, **kwargs):
    return httpx.request(method, proxy.root + path, headers=USER, timeout=30, **kwargs)


EXPORTED = json.dumps(
    {
        "session_id": "s1",
        "message_key": "k1",
        "content_hash": "h1",
        "role": "user",
        "content": "Hello",
        "created_at": 1_700_000_000,
    }
)
WRITES = [
    ("POST", "/v1/memory/facts", {"json": {"key": "city", "value": "Paris"}}),
    ("POST", "/v1/memory/import", {"content": EXPORTED + "\n"}),
    ("DELETE", "/v1/memory/facts/pet", {}),
    ("POST", "/v1/memory/facts/pet/pin", {}),
    ("DELETE", "/v1/memory", {}),
]


@pytest.mark.parametrize(
    ("method", "path", "kwargs"), WRITES, ids=[f"{m} {p}" for m, p, _ in WRITES]
)
def test_a_locked_store_is_a_503_with_retry_after_then_the_call_succeeds(
    proxy, method, path, kwargs
):
    assert call(proxy, "POST", "/v1/memory/facts", json={"key": "pet", "value": "a cat"}).is_success

    with locked(proxy.config.db_path):
        refused = call(proxy, method, path, **kwargs)

    assert refused.status_code == 503, refused.text
    assert refused.headers["retry-after"] == "1"
    assert refused.headers["content-type"].startswith("application/json")
    assert refused.json() == {
        "error": {
            "message": "the memory store is busy or unavailable; retry shortly",
            "type": "server_error",
            "param": None,
            "code": "memory_unavailable",
        }
    }
    retried = call(proxy, method, path, **kwargs)
    assert retried.status_code == 200, retried.text


@contextmanager
def writing(store):
    """Hold this process's write lock (and SQLite's) from another thread, as the writer does
    while it waits out another process's lock before retrying a turn."""
    holding, release = threading.Event(), threading.Event()

    def hold():
        with store.write():
            holding.set()
            release.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    holding.wait(30)
    try:
        yield release
    finally:
        release.set()
        holder.join()


@pytest.mark.parametrize(
    ("method", "path", "kwargs"), WRITES, ids=[f"{m} {p}" for m, p, _ in WRITES]
)
def test_a_write_behind_the_process_s_own_writer_waits_one_busy_timeout_then_503(
    proxy, method, path, kwargs
):
    """The wait for the process's writer counts against memory.busy_timeout: it was not
    bounded at all, so behind a writer that waited out a lock the API waited twice."""
    assert call(proxy, "POST", "/v1/memory/facts", json={"key": "pet", "value": "a cat"}).is_success

    with writing(proxy.layer.store) as release:
        refused = call(proxy, method, path, **kwargs)
        assert not release.is_set()  # answered while the writer still held the lock

    assert refused.status_code == 503, refused.text
    assert refused.headers["retry-after"] == "1"
    assert refused.json()["error"] == {
        "message": "the memory store is busy or unavailable; retry shortly",
        "type": "server_error",
        "param": None,
        "code": "memory_unavailable",
    }
    assert call(proxy, method, path, **kwargs).status_code == 200


def test_the_sdk_sees_a_locked_store_as_a_server_error(proxy):
    with proxy.client(default_headers=USER) as client, locked(proxy.config.db_path):
        with pytest.raises(openai.InternalServerError) as raised:
            client.post("/memory/facts", body={"key": "city", "value": "Paris"}, cast_to=object)
    assert raised.value.status_code == 503


def test_reads_and_chat_go_on_while_the_store_is_locked(proxy, upstream):
    call(proxy, "POST", "/v1/memory/facts", json={"key": "city", "value": "Paris"})

    with locked(proxy.config.db_path):
        facts = call(proxy, "GET", "/v1/memory/facts")
        chat = call(
            proxy,
            "POST",
            "/v1/chat/completions",
            json={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Hi"}]},
        )

    assert facts.status_code == 200
    assert [f["value"] for f in facts.json()["facts"]] == ["Paris"]
    assert chat.status_code == 200, chat.text
    assert "Paris" in upstream.last_json["messages"][0]["content"]


def metric(proxy, name):
    text = httpx.get(proxy.root + "/metrics", timeout=10).text
    return next(float(line.split()[-1]) for line in text.splitlines() if line.startswith(name))


def eventually(check, seconds=10.0):
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_a_turn_whose_store_failed_is_stored_once_the_lock_is_gone_with_no_new_turn(proxy):
    chat = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "My bike is green"}]}
    with locked(proxy.config.db_path):
        assert call(proxy, "POST", "/v1/chat/completions", json=chat).status_code == 200
        assert eventually(lambda: metric(proxy, "moim_memory_write_failures_total") >= 1)

    # Nothing else is sent: the writer tries the journal again by itself.
    def stored():
        return call(proxy, "GET", "/v1/memory/stats").json()["messages"] == 2

    assert eventually(stored), call(proxy, "GET", "/v1/memory/stats").json()
    texts = [m.content for m in proxy.layer.store.messages("alice")]
    assert texts == ["My bike is green", "echo: My bike is green"]
