"""The database file removed under a running `moim serve` (proxy/store_file.py): the stop's
last line and exit status say what became of the turns, never that they were stored.

SQLite kept writing into the file it had opened, nameless once removed, and gone when the
process ended; the writer emptied the journal and said at the stop `every finished turn is
stored and indexed`, exit status 0.
"""

import os
import shutil
import time

import httpx

from tests.e2e.test_crash import Server
from tests.e2e.test_stop_and_restart import stored_user_texts


def say(server, text):
    said = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": text}]}
    reply = httpx.post(server.root + "/v1/chat/completions", json=said, timeout=30)
    assert reply.status_code == 200, reply.text
    return reply


def unready(server, seconds=30.0):
    """`/health/readiness`'s body once it answers 503 (the writer has found the failure)."""
    deadline = time.monotonic() + seconds
    while (answer := httpx.get(server.root + "/health/readiness")).status_code != 503:
        assert time.monotonic() < deadline, answer.text
        time.sleep(0.05)
    return answer.json()


def test_a_removed_database_file_keeps_the_turns_in_the_journal_for_the_next_start(
    tmp_path, upstream
):
    db = tmp_path / "moim.db"
    with Server(db, upstream.url, tmp_path / "log", MOIM_SHUTDOWN_TIMEOUT="1") as server:
        server.wait("/health/readiness")
        say(server, "my bike is red")
        assert httpx.post(server.root + "/v1/memory/flush", timeout=60).json()["flushed"]
        os.unlink(db)  # `rm moim.db` under it
        say(server, "my car is blue")
        readiness = unready(server)
        server.stop()
    assert server.process.returncode == 0  # nothing lost: the journal holds the turn
    # ENOENT, whichever thread stored: one that connected after the removal made an empty
    # file in its place and the reason was SQLite's "no such table"
    assert "store failing" in readiness["writer"] and "(ENOENT)" in readiness["writer"]
    assert not db.exists()  # no file made at the path, least of all one readable by all
    log = (tmp_path / "log").read_text()
    assert "every finished turn is stored" not in log, log
    assert "memory writer stopped at the shutdown timeout (server.shutdown_timeout) with 1 " in log
    assert "the journal keeps those not stored, and the next start stores" in log

    with Server(db, upstream.url, tmp_path / "log2") as server:
        server.wait("/health/readiness")
        server.stop()
    assert "journal replayed: 1 turns" in (tmp_path / "log2").read_text()
    assert db.stat().st_mode & 0o777 == 0o600  # made by moim at the next start, private
    assert stored_user_texts(db) == ["my car is blue"]  # the bike went with the removed file


def test_a_removed_directory_loses_the_turns_and_the_stop_says_so(tmp_path, upstream):
    """Its journal gone too, a turn is held in RAM only: lost at the stop, which says so in
    its last line and exits with status 1 (a supervisor records a failure)."""
    home = tmp_path / "data"
    home.mkdir()
    db = home / "moim.db"
    with Server(db, upstream.url, tmp_path / "log", MOIM_SHUTDOWN_TIMEOUT="1") as server:
        server.wait("/health/readiness")
        say(server, "my bike is red")
        assert httpx.post(server.root + "/v1/memory/flush", timeout=60).json()["flushed"]
        remove(home)
        reply = say(server, "my car is blue")
        server.stop()
    assert "memory journal failed (ENOENT)" in reply.headers["x-memory-error"]
    assert server.process.returncode == 1
    log = (tmp_path / "log").read_text()
    assert "every finished turn is stored" not in log, log
    last = [line for line in log.splitlines() if "memory writer stopped" in line]
    assert len(last) == 1 and last[0].endswith("1 of them lost: neither stored nor journaled")


def remove(home):
    """Remove `home` under the running server, which may be writing in it at that moment (the
    lexical index merges its segments in the background after a commit): a file created
    between rmtree's listing and its rmdir fails it with ENOTEMPTY, so it tries again."""
    for _ in range(50):
        try:
            shutil.rmtree(home)
            return
        except OSError:
            time.sleep(0.05)
    shutil.rmtree(home)
