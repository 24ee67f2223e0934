"""`kill -9` at any moment loses no answered turn and leaves a sound, fully indexed store.

`moim serve` runs as a real subprocess in front of the fake upstream. A few threads each send
sequential chat turns, every one with distinct content, and record every turn whose response
completed (a non-streamed 200 received). The process is killed with SIGKILL at a random
moment (the first time while the model loads, then within two seconds of readiness, while
recovery and the first turns are being written) and restarted, several times. After the
last restart and a flush:

- every completed turn's user message is in the store (none lost);
- SQLite's integrity check passes;
- startup recovery has indexed everything: no message is left unindexed, and every user
  and assistant message has its chunks.

The default suite kills three times; `MOIM_CRASH_KILLS` asks for more.
"""

import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from memory.store import Store

REPO = Path(__file__).resolve().parents[2]
KILLS = int(os.environ.get("MOIM_CRASH_KILLS", "3"))
DRIVERS = 4  # clients sending turns at once, so the writer is often busy when the kill lands
USER = "crash-user"


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    """One `moim serve` process on a free port, with its output in a log file."""

    def __init__(self, db, upstream_url, log):
        self.port = free_port()
        self.root = f"http://127.0.0.1:{self.port}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("MOIM_")}
        env.update(
            MOIM_DB=str(db),
            MOIM_UPSTREAM_BASE_URL=upstream_url,
            PYTHONPATH=str(REPO) + os.pathsep + env.get("PYTHONPATH", ""),
        )
        self.log = open(log, "ab")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "proxy.cli", "serve", "--port", str(self.port)],
            env=env,
            cwd=db.parent,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )

    def wait(self, path, seconds=60.0):
        """Until `path` answers 200: `/health` once it listens, `/health/readiness` once the
        embedding model is loaded."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            assert self.process.poll() is None, f"moim exited with {self.process.returncode}"
            try:
                if httpx.get(self.root + path, timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        raise AssertionError("moim did not become ready")

    def kill(self):
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)
        self.log.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        if self.process.poll() is None:  # the test failed half-way: leave no process behind
            self.kill()

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()


class Driver(threading.Thread):
    """Sends turn after turn until stopped; remembers which ones were answered."""

    def __init__(self, root, name):
        super().__init__(daemon=True)
        self.root, self.name, self.number = root, name, 0
        self.completed: list[str] = []
        self.stopping = threading.Event()

    def run(self):
        with httpx.Client(base_url=self.root, timeout=10) as http:
            while not self.stopping.is_set():
                text = f"Turn {self.name}.{self.number}: parcel {self.name}.{self.number} is blue"
                self.number += 1
                body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": text}]}
                try:
                    response = http.post(
                        "/v1/chat/completions", json=body, headers={"x-memory-user-id": USER}
                    )
                except httpx.HTTPError:
                    return  # the process is gone
                if response.status_code == 200:
                    self.completed.append(text)


@pytest.mark.slow
def test_kill_9_loses_no_answered_turn_and_recovery_indexes_everything(tmp_path, upstream):
    db = tmp_path / "moim.db"
    log = tmp_path / "moim.log"
    seed = random.randrange(10**6)
    rng = random.Random(seed)
    completed: list[str] = []
    sent = 0
    for kill in range(KILLS):
        with Server(db, upstream.url, log) as server:
            server.wait("/health")  # turns start while the model loads and recovery runs
            drivers = [Driver(server.root, f"{kill}-{n}") for n in range(DRIVERS)]
            for driver in drivers:
                driver.start()
            if kill > 0:  # the first kill lands while the model loads; the others after it
                server.wait("/health/readiness")
            time.sleep(rng.uniform(0.0, 2.0))
            server.kill()
        for driver in drivers:
            driver.stopping.set()
            driver.join(timeout=15)
            completed += driver.completed
            sent += driver.number

    with Server(db, upstream.url, log) as server:
        server.wait("/health/readiness")
        flushed = httpx.post(server.root + "/v1/memory/flush", timeout=60)
        assert flushed.status_code == 200, flushed.text
        store = Store(db)
        stored = {m.content for m in store.messages(USER) if m.role == "user"}
        lost = [text for text in completed if text not in stored]
        unindexed = store.count_unindexed()
        without_chunks = store.read(
            "SELECT count(*) FROM messages m WHERE m.role IN ('user', 'assistant') "
            "AND NOT EXISTS (SELECT 1 FROM chunks c WHERE c.message_id = m.id)"
        )[0][0]
        integrity = store.read("PRAGMA integrity_check")[0][0]
        # the restarted proxy still answers, and remembers
        ask = httpx.post(
            server.root + "/v1/chat/completions",
            timeout=10,
            headers={"x-memory-user-id": USER},
            json={
                "model": "gpt-4o-mini",
                "messages": [{"role": "user", "content": "Which parcel is blue?"}],
            },
        )
        server.stop()
    # what a graceful stop (which drains the writer) leaves: tells lost from late
    stored = {m.content for m in Store(db).messages(USER) if m.role == "user"}
    lost_for_good = [text for text in completed if text not in stored]

    assert completed, f"no turn completed before any kill (seed {seed}); see {log}"
    print(
        f"seed {seed}: {sent} turns sent, {len(completed)} completed, {len(lost)} missing "
        f"after the flush, {len(lost_for_good)} after a graceful stop"
    )
    outcome = {
        "missing after flush": len(lost),
        "missing after stop": len(lost_for_good),
        "unindexed": unindexed,
        "without_chunks": without_chunks,
        "integrity": integrity,
    }
    assert outcome == {
        "missing after flush": 0,
        "missing after stop": 0,
        "unindexed": 0,
        "without_chunks": 0,
        "integrity": "ok",
    }, (
        f"seed {seed}: {len(completed)} turns completed across {KILLS} kills; {outcome}; "
        f"e.g. {lost[:3]}"
    )
    assert ask.status_code == 200
    assert ask.headers.get("x-memory-error") is None
