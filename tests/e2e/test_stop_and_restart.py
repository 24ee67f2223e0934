"""An operator's stop and start of `moim serve`, as a real subprocess in front of the fake
upstream: `docker stop` (SIGTERM) or Ctrl-C ends it with exit status 0 once every finished turn
is stored, or at `server.shutdown_timeout` with the rest in the journal, and a start after a
crash or such a stop says in its log that it stored what the journal held.
"""

import signal
import sqlite3
import time

import httpx
import pytest

from memory import Journal, Turn
from tests.e2e.test_crash import Server


def turn(k):
    return Turn(
        user_id="ops",
        session_id=f"s{k}",
        model="gpt-4o-mini",
        messages=({"role": "user", "content": f"parcel {k} went to Porto"},),
        reply={"role": "assistant", "content": f"noted {k}"},
        created_at=time.time(),
    )


def stored_user_texts(db):
    with sqlite3.connect(db) as conn:
        return sorted(
            row[0] for row in conn.execute("SELECT content FROM messages WHERE role = 'user'")
        )


def test_a_start_after_a_crash_says_it_stored_what_the_journal_held(tmp_path, upstream):
    """What `kill -9` left in the journal was stored at the next start without a word."""
    db = tmp_path / "moim.db"
    journal = Journal(tmp_path / "moim.db.journal")  # as a process killed before storing left it
    for k in range(3):
        journal.append(turn(k))

    with Server(db, upstream.url, tmp_path / "log") as server:
        server.wait("/health/readiness")
        server.stop()

    log = (tmp_path / "log").read_text()
    path = (tmp_path / "moim.db.journal").resolve()
    assert f"journal replayed: 3 turns a previous run left in {path} are stored" in log, log
    assert stored_user_texts(db) == [f"parcel {k} went to Porto" for k in range(3)]


def test_sigterm_stops_with_exit_status_zero_once_the_turns_are_stored(tmp_path, upstream):
    """uvicorn re-raised SIGTERM after its clean shutdown, so moim died of it: exit status
    143 for `docker stop` (-15 here), as if it had been killed mid-work."""
    db = tmp_path / "moim.db"
    with Server(db, upstream.url, tmp_path / "log") as server:
        server.wait("/health/readiness")
        said = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "my bike is red"}]}
        reply = httpx.post(server.root + "/v1/chat/completions", json=said, timeout=30)
        assert reply.status_code == 200
        server.process.send_signal(signal.SIGTERM)
        status = server.process.wait(timeout=30)
        server.log.close()

    assert status == 0, (tmp_path / "log").read_text()
    assert stored_user_texts(db) == ["my bike is red"]


def test_a_stop_says_in_the_log_what_the_writer_left(tmp_path, upstream):
    """The log ended with uvicorn's and the MCP manager's lines: nothing said whether the
    finished turns were stored."""
    db = tmp_path / "moim.db"
    with Server(db, upstream.url, tmp_path / "log") as server:
        server.wait("/health/readiness")
        said = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "my bike is red"}]}
        assert httpx.post(server.root + "/v1/chat/completions", json=said, timeout=30).is_success
        server.stop()

    log = (tmp_path / "log").read_text()
    assert "memory writer stopped: every finished turn is stored and indexed" in log, log


def test_a_stop_while_the_model_loads_says_the_journal_keeps_the_turns(tmp_path, upstream):
    """The writer starts once the embedding model is loaded: a stop before that said nothing
    of the turns waiting, and the next start is what stores them."""
    backlog = 1000
    db = tmp_path / "moim.db"
    journal = Journal(tmp_path / "moim.db.journal")
    for k in range(backlog):
        journal.append(turn(k))

    with Server(db, upstream.url, tmp_path / "log") as server:
        server.wait("/health")  # serving; the model is loading
        server.stop()
    assert server.process.returncode == 0
    log = (tmp_path / "log").read_text()
    assert (
        f"memory writer stopped before it started (the embedding model was loading) with "
        f"{backlog} turns not yet stored or indexed: the journal keeps those not stored"
    ) in log, log

    with Server(db, upstream.url, tmp_path / "log2", MOIM_SHUTDOWN_TIMEOUT="0.1") as server:
        server.wait("/health/readiness")  # what the journal holds is stored
        server.stop()  # not waiting for the indexing
    log = (tmp_path / "log2").read_text()
    path = (tmp_path / "moim.db.journal").resolve()
    assert f"journal replayed: {backlog} turns a previous run left in {path} are stored" in log
    assert stored_user_texts(db) == sorted(f"parcel {k} went to Porto" for k in range(backlog))


def test_a_stop_with_a_backlog_ends_at_the_shutdown_timeout(tmp_path, upstream):
    """A stop waited 10 s for the indexing, whatever `docker stop` or Kubernetes allowed,
    then for the store under way, however long it took; now `server.shutdown_timeout`, from
    the signal, and the next start indexes the rest."""
    backlog = 200
    db = tmp_path / "moim.db"
    journal = Journal(tmp_path / "moim.db.journal")
    for k in range(backlog):
        journal.append(turn(k))

    with Server(db, upstream.url, tmp_path / "log", MOIM_SHUTDOWN_TIMEOUT="0.1") as server:
        server.wait("/health/readiness")  # the backlog is stored and being indexed
        server.stop()
    assert server.process.returncode == 0
    log = (tmp_path / "log").read_text()
    assert "memory writer stopped at the shutdown timeout (server.shutdown_timeout)" in log, log
    assert "every finished turn is stored" not in log

    with Server(db, upstream.url, tmp_path / "log2") as server:
        server.wait("/health/readiness")
        flushed = httpx.post(server.root + "/v1/memory/flush", timeout=120)
        server.stop()
    assert flushed.json() == {"flushed": True, "pending": 0}
    assert stored_user_texts(db) == sorted(f"parcel {k} went to Porto" for k in range(backlog))


def test_a_reply_streaming_past_the_shutdown_timeout_is_cut_and_its_turn_kept(tmp_path, upstream):
    """A stop waited for a reply as long as the provider streamed it (here a chunk every
    10 s: minutes), past any supervisor's patience; now it is cut at `shutdown_timeout`, and
    what the user said is stored at the next start."""
    db = tmp_path / "moim.db"
    upstream.script.append({"content": "The tide turns at noon. " * 8, "delay": 10.0})
    said = {
        "model": "gpt-4o-mini",
        "stream": True,
        "messages": [{"role": "user", "content": "when does the tide turn"}],
    }
    with Server(db, upstream.url, tmp_path / "log", MOIM_SHUTDOWN_TIMEOUT="1") as server:
        server.wait("/health/readiness")
        with httpx.stream("POST", server.root + "/v1/chat/completions", json=said) as reply:
            lines = reply.iter_lines()
            assert next(lines).startswith("data: ")  # under way
            server.process.send_signal(signal.SIGTERM)
            with pytest.raises(httpx.RemoteProtocolError):  # cut, with no [DONE]
                list(lines)
        status = server.process.wait(timeout=30)
        server.log.close()
    assert status == 0
    log = (tmp_path / "log").read_text()
    assert "memory writer stopped at the shutdown timeout" in log, log

    with Server(db, upstream.url, tmp_path / "log2", MOIM_SHUTDOWN_TIMEOUT="1") as server:
        server.wait("/health/readiness")
        server.stop()
    assert stored_user_texts(db) == ["when does the tide turn"]
