"""Two or three `moim serve` processes on one Postgres database, as replicas behind a balancer.

Real subprocesses, a real PostgreSQL (the session's `pg_server`), the fake upstream:

- turns sent through one replica are recalled through another (no replica caches vectors);
- a fact set through one is in the block of a request through another;
- `DELETE /v1/memory` through one is honoured by all, the others' inspectors too;
- `kill -9` of a replica under load loses no completed turn: the survivors store what it had
  received (its rows in `pending_turns`) and index what it left unindexed.
"""

import os
import subprocess
import sys
import time

import httpx
import openai
import pytest

from memory import MemoryLayer, Settings
from tests.e2e.test_crash import REPO, USER, Driver, Server, free_port, missing_turns


class Replica(Server):
    """`moim serve` on the Postgres database `url`, in a working directory of its own."""

    def __init__(self, url, upstream_url, home):
        home.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.root = f"http://127.0.0.1:{self.port}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("MOIM_")}
        env.update(
            MOIM_DB=url,
            MOIM_UPSTREAM_BASE_URL=upstream_url,
            PYTHONPATH=str(REPO) + os.pathsep + env.get("PYTHONPATH", ""),
        )
        self.log = open(home / "moim.log", "ab")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "proxy.cli", "serve", "--port", str(self.port)],
            env=env,
            cwd=home,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )


def chat(replica, user, text):
    response = httpx.post(
        replica.root + "/v1/chat/completions",
        json={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": text}]},
        headers={"authorization": "Bearer sk-client", "x-memory-user-id": user},
        timeout=30,
    )
    assert response.status_code == 200, response.text
    return response


def flush(replica):
    assert httpx.post(replica.root + "/v1/memory/flush", timeout=60).status_code == 200


@pytest.fixture
def replicas(pg_database, upstream, tmp_path):
    url = pg_database()
    started = []

    def start(count):
        for _ in range(count):
            started.append(Replica(url, upstream.url, tmp_path / f"replica-{len(started)}"))
        for replica in started:
            replica.wait("/health/readiness")
        return started

    start.url = url
    yield start
    for replica in started:
        replica.__exit__(None, None, None)


def test_a_turn_through_one_replica_is_recalled_and_deleted_through_the_others(replicas, upstream):
    a, b, c = replicas(3)
    chat(a, "ana", "My sailboat is called Gaivota and is moored in Lagos")
    flush(a)
    chat(b, "ana", "What is the name of my sailboat?")
    assert "Gaivota" in upstream.last_json["messages"][0]["content"]
    put = httpx.post(
        c.root + "/v1/memory/facts",
        json={"key": "home_city", "value": "Faro"},
        headers={"x-memory-user-id": "ana"},
    )
    assert put.status_code in (200, 201), put.text
    chat(a, "ana", "Where do I live?")
    assert "Faro" in upstream.last_json["messages"][0]["content"]
    deleted = httpx.delete(b.root + "/v1/memory", headers={"x-memory-user-id": "ana"})
    assert deleted.status_code == 200, deleted.text
    for replica in (a, b, c):
        chat(replica, "ana", "What is the name of my sailboat, and where do I live?")
        block = upstream.last_json["messages"][0]["content"]
        assert "Gaivota" not in block and "Faro" not in block


def test_kill_9_of_a_replica_under_load_loses_no_completed_turn(replicas, upstream):
    a, b = replicas(2)
    drivers = [Driver(r.root, f"{n}", stream=n % 2 == 1) for n, r in enumerate((a, a, b, b))]
    for driver in drivers:
        driver.start()
    time.sleep(3)
    a.kill()  # mid-load: turns received, some stored, some not indexed
    time.sleep(2)
    for driver in drivers:
        driver.stopping.set()
        driver.join(timeout=30)
    completed = [turn for driver in drivers for turn in driver.completed]
    assert completed
    layer = MemoryLayer(Settings(db_url=replicas.url))
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # the survivor adopts and indexes what a left
            flush(b)
            pending = layer.store.read("SELECT count(*) FROM pending_turns")[0][0]
            if not pending and not layer.store.count_unindexed():
                break
            time.sleep(0.5)
        assert missing_turns(layer.store, completed) == []
        assert layer.store.read("SELECT count(*) FROM pending_turns")[0][0] == 0
        assert layer.store.count_unindexed() == 0
        assert layer.store.stats(USER).chunks > 0
    finally:
        layer.close()


def test_a_second_replica_in_the_same_directory_refuses_to_share_its_journal(
    pg_database, upstream, tmp_path
):
    """Turns wait in the replica's local journal while Postgres is unreachable: two replicas
    in one directory would replay and empty each other's."""
    url = pg_database()
    first = Replica(url, upstream.url, tmp_path)
    try:
        first.wait("/health/readiness")
        second = Replica(url, upstream.url, tmp_path)
        try:
            assert second.process.wait(timeout=60) == 1
        finally:
            second.__exit__(None, None, None)
            second.log.close()
        log = (tmp_path / "moim.log").read_text()
        journal = tmp_path.resolve() / "moim.db.journal"
        assert (
            f"Error: another moim is using {journal}: process {first.process.pid} holds its lock"
            in log
        )
        assert httpx.get(first.root + "/health/readiness").status_code == 200
    finally:
        first.__exit__(None, None, None)


# A replica keeps its users' last blocks for the inspector's "why this block" (each quotes
# their memory as sent); a `DELETE /v1/memory` reaches only the replica that answers it.
SAID = "My sailboat is called Gaivota and is moored in Lagos"


def test_a_user_forgotten_through_one_replica_is_not_shown_by_anothers_inspector(
    replicas, upstream
):
    a, b = replicas(2)
    chat(a, "ana", SAID)
    flush(a)
    chat(b, "ana", "What is the name of my sailboat?")
    assert "Gaivota" in upstream.last_json["messages"][0]["content"]
    why = httpx.get(b.root + "/ui/users/ana/why", timeout=30)
    assert why.status_code == 200 and "What is the name of my sailboat" in why.text

    assert httpx.delete(a.root + "/v1/memory", headers={"x-memory-user-id": "ana"}).is_success

    for page in ("/ui/users/ana/why", "/ui"):
        shown = httpx.get(b.root + page, timeout=30)
        assert shown.status_code == 200, shown.text
        assert "Gaivota" not in shown.text and "my sailboat" not in shown.text


def test_a_reply_streaming_through_one_replica_while_its_user_is_forgotten_through_another_stores_nothing(  # noqa: E501
    replicas, upstream
):
    """The replica the stream goes through learns of the forget only from the database: it
    stored the turn when the reply ended, and with it the history the request resent."""
    a, b = replicas(2)
    chat(a, "ana", SAID)
    flush(a)
    asked = [
        {"role": "user", "content": SAID},
        {"role": "assistant", "content": "A fine name."},
        {"role": "user", "content": "Tell me a long story about my boat"},
    ]
    client = openai.OpenAI(base_url=b.root + "/v1", api_key="sk-client", max_retries=0)
    stream = client.chat.completions.create(
        model="slow",  # 40 chunks 50 ms apart
        messages=asked,
        stream=True,
        extra_headers={"x-memory-user-id": "ana"},
    )
    first = next(iter(stream))  # under way
    assert httpx.delete(a.root + "/v1/memory", headers={"x-memory-user-id": "ana"}).is_success
    assert first.choices and "".join(c.choices[0].delta.content or "" for c in stream)
    flush(b)

    export = httpx.get(a.root + "/v1/memory/export", headers={"x-memory-user-id": "ana"})
    assert export.status_code == 200 and export.text == ""


def test_a_background_reply_polled_through_one_replica_after_a_forget_through_another_is_not_stored(  # noqa: E501
    replicas, upstream
):
    """A reply written in the background is stored at the poll that finds it completed: a
    poll after its user was forgotten through another replica stored the reply, which quotes
    what was forgotten."""
    a, b = replicas(2)
    client = openai.OpenAI(base_url=b.root + "/v1", api_key="sk-client", max_retries=0)
    ana = {"x-memory-user-id": "ana"}
    queued = client.responses.create(
        model="gpt-4o-mini", input=SAID, background=True, extra_headers=ana
    )
    assert client.responses.retrieve(queued.id).status == "in_progress"
    flush(b)
    assert httpx.delete(a.root + "/v1/memory", headers=ana).is_success

    assert client.responses.retrieve(queued.id).status == "completed"
    flush(b)

    export = httpx.get(a.root + "/v1/memory/export", headers=ana)
    assert export.status_code == 200 and export.text == ""
