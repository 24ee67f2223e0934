"""`kill -9` at any moment loses no answered turn and leaves a sound, fully indexed store.

`moim serve` runs as a real subprocess in front of the fake upstream. A few threads each send
sequential chat turns through the openai SDK, every one with distinct content, half of them
streamed (consumed to the end) and half not, and record every turn whose response completed
(a non-streamed reply received, or a stream read through its finish and `[DONE]`) with the
reply the client saw. The process is killed with SIGKILL at a random moment (the first time
while the model loads, then within two seconds of readiness, while recovery and the first
turns are being written) and restarted, several times. After the last restart and a flush:

- every completed turn's user message and assistant reply are in the store, in the same
  conversation, the reply whole (not marked partial) and as the client received it;
- SQLite's integrity check passes (FTS5's own check too);
- startup recovery has indexed everything: no message is left unindexed, every user and
  assistant message has its chunks, every chunk has exactly one FTS row and one vector.

Then, with the proxy stopped, `moim reindex` (the CLI, a subprocess) rebuilds the derived
tables from the message log, and the same coverage holds again.

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
import openai
import pytest

from memory.store.store import Store

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

    def __init__(self, db, upstream_url, log, **environment):
        self.port = free_port()
        self.root = f"http://127.0.0.1:{self.port}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("MOIM_")}
        env.update(
            MOIM_DB=str(db),
            MOIM_UPSTREAM_BASE_URL=upstream_url,
            PYTHONPATH=str(REPO) + os.pathsep + env.get("PYTHONPATH", ""),
            **environment,
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
    """Sends turn after turn until stopped, streamed or not; remembers which ones were
    answered, as (user text, the reply the client received)."""

    def __init__(self, root, name, stream):
        super().__init__(daemon=True)
        self.root, self.name, self.stream, self.number = root, name, stream, 0
        self.completed: list[tuple[str, str]] = []
        self.stopping = threading.Event()

    def run(self):
        with openai.OpenAI(
            base_url=self.root + "/v1",
            api_key="sk-client",
            max_retries=0,
            timeout=10,
            default_headers={"x-memory-user-id": USER},
        ) as client:
            while not self.stopping.is_set():
                text = f"Turn {self.name}.{self.number}: parcel {self.name}.{self.number} is blue"
                self.number += 1
                messages = [{"role": "user", "content": text}]
                try:
                    reply = self._ask(client, messages)
                except (openai.APIConnectionError, httpx.HTTPError):
                    return  # the process is gone (a stream cut off raises httpx's error)
                except openai.APIStatusError:
                    continue  # not answered; nothing is promised about it
                if reply is not None:
                    self.completed.append((text, reply))

    def _ask(self, client, messages):
        """The reply, once the whole response has arrived; None if it did not end properly."""
        if not self.stream:
            completion = client.chat.completions.create(model="gpt-4o-mini", messages=messages)
            return completion.choices[0].message.content
        parts, finished = [], False
        for chunk in client.chat.completions.create(
            model="gpt-4o-mini", messages=messages, stream=True
        ):  # the SDK stops at `[DONE]`; a stream cut off before it raises instead
            for choice in chunk.choices:
                parts.append(choice.delta.content or "")
                finished = finished or choice.finish_reason == "stop"
        return "".join(parts) if finished else None


def index_coverage(store):
    """How completely the derived tables cover the message log, and the store's soundness."""

    def count(sql):
        return store.read(sql)[0][0]

    return {
        "unindexed": store.count_unindexed(),
        "messages without chunks": count(
            "SELECT count(*) FROM messages m WHERE m.role IN ('user', 'assistant') "
            "AND NOT EXISTS (SELECT 1 FROM chunks c WHERE c.message_id = m.id)"
        ),
        "chunks without a vector": count(
            "SELECT count(*) FROM chunks WHERE id NOT IN (SELECT chunk_id FROM chunk_vectors)"
        ),
        "vectors - chunks": count("SELECT count(*) FROM chunk_vectors")
        - count("SELECT count(*) FROM chunks"),
        "fts rows - chunks": count("SELECT count(*) FROM chunks_fts")
        - count("SELECT count(*) FROM chunks"),
        "integrity": store.integrity_ok(),
    }


COVERED = {
    "unindexed": 0,
    "messages without chunks": 0,
    "chunks without a vector": 0,
    "vectors - chunks": 0,
    "fts rows - chunks": 0,
    "integrity": True,
}


def missing_turns(store, completed):
    """Completed turns whose user message or whole reply is not in the log, in one session."""
    log = {(m.session_id, m.role, m.content, m.partial) for m in store.messages(USER)}
    sessions = {content: session for session, role, content, _ in log if role == "user"}
    missing = []
    for text, reply in completed:
        session = sessions.get(text)
        if session is None or (session, "assistant", reply, False) not in log:
            missing.append((text, reply))
    return missing


def reindex(db, log):
    """`moim reindex` on the stopped proxy's database, as an operator would run it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MOIM_")}
    env.update(MOIM_DB=str(db), PYTHONPATH=str(REPO) + os.pathsep + env.get("PYTHONPATH", ""))
    with open(log, "ab") as output:
        done = subprocess.run(
            [sys.executable, "-m", "proxy.cli", "reindex"],
            env=env,
            cwd=db.parent,
            stdout=subprocess.PIPE,
            stderr=output,
            timeout=300,
        )
    assert done.returncode == 0, f"moim reindex exited with {done.returncode}; see {log}"
    return done.stdout.decode()


@pytest.mark.slow
def test_kill_9_loses_no_answered_turn_and_recovery_indexes_everything(tmp_path, upstream):
    db = tmp_path / "moim.db"
    log = tmp_path / "moim.log"
    seed = random.randrange(10**6)
    rng = random.Random(seed)
    completed: list[tuple[str, str]] = []
    sent = streamed = 0
    for kill in range(KILLS):
        with Server(db, upstream.url, log) as server:
            server.wait("/health")  # turns start while the model loads and recovery runs
            drivers = [Driver(server.root, f"{kill}-{n}", n % 2 == 1) for n in range(DRIVERS)]
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
            streamed += len(driver.completed) if driver.stream else 0

    with Server(db, upstream.url, log) as server:
        server.wait("/health/readiness")
        flushed = httpx.post(server.root + "/v1/memory/flush", timeout=60)
        assert flushed.status_code == 200, flushed.text
        store = Store(db)
        lost = missing_turns(store, completed)
        recovered = index_coverage(store)
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
    lost_for_good = missing_turns(Store(db), completed)
    said = reindex(db, log)
    rebuilt = index_coverage(Store(db))

    assert completed, f"no turn completed before any kill (seed {seed}); see {log}"
    print(
        f"seed {seed}: {sent} turns sent, {len(completed)} completed ({streamed} streamed), "
        f"{len(lost)} missing after the flush, {len(lost_for_good)} after a graceful stop; "
        f"{said.splitlines()[-1]}"
    )
    outcome = {
        "missing after flush": len(lost),
        "missing after stop": len(lost_for_good),
        "after recovery": recovered,
        "after moim reindex": rebuilt,
    }
    assert outcome == {
        "missing after flush": 0,
        "missing after stop": 0,
        "after recovery": COVERED,
        "after moim reindex": COVERED,
    }, (
        f"seed {seed}: {len(completed)} turns completed across {KILLS} kills; {outcome}; "
        f"e.g. {lost[:3]}"
    )
    assert ask.status_code == 200
    assert ask.headers.get("x-memory-error") is None
    messages = Store(db).read("SELECT count(*) FROM messages")[0][0]
    assert said.splitlines()[-1] == f"re-indexed {messages} messages"
