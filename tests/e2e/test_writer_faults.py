"""The write path fails and comes back: nothing answered is lost, and a stuck writer shows.

README, "Durability": a turn whose journal append fails (a full disk, EIO) is held in RAM and
retried, and that request's own response says so in `x-memory-error`, no other request's;
a store that fails keeps its turns queued and retries them by itself; meanwhile
`/health/readiness` answers 503 with the reason and `/metrics` says `moim_writer_up 0`.

The full disk is real as far as moim can tell: the journal's path is swapped for a symlink to
/dev/full, where every write fails with ENOSPC, even for root (a read-only file would not
stop root). The locked store is a second SQLite connection holding the write lock.
"""

import asyncio
import os
import shutil
import time
from contextlib import closing

import httpx
import pytest
import sqlean

ALICE = {"x-memory-user-id": "alice"}
BOB = {"x-memory-user-id": "bob"}
ENOSPC_HELD = "memory journal failed (ENOSPC): this turn is held in RAM until stored"
ENOSPC_AHEAD = "memory journal failing (ENOSPC): turn to be held in RAM until stored"


def journal_of(proxy):
    return proxy.config.db_path.with_name(proxy.config.db_path.name + ".journal")


def fill_disk(path):
    """Swap the journal for /dev/full, in one atomic step (as the disk filling up would)."""
    link = path.with_name(path.name + ".link")
    link.symlink_to("/dev/full")
    os.replace(link, path)


def metrics(proxy):
    text = httpx.get(proxy.root + "/metrics").text
    samples = (line.split(" ") for line in text.splitlines() if not line.startswith("#"))
    return {name: float(value) for name, value in samples}


def readiness(proxy):
    response = httpx.get(proxy.root + "/health/readiness")
    return response.status_code, response.json()


def eventually(check, seconds=30.0):
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.05)


def text_of(n):
    return f"Turn {n}: the vault word is pelican{n}z"


async def ask(proxy, n, headers=ALICE):
    """One turn, streamed when `n` is odd: (status, reply the client received, x-memory-error)."""
    messages = [{"role": "user", "content": text_of(n)}]
    async with proxy.async_client(default_headers=headers, timeout=30) as client:
        if n % 2 == 0:
            raw = await client.chat.completions.with_raw_response.create(
                model="gpt-4o-mini", messages=messages
            )
            reply = raw.parse().choices[0].message.content
            return raw.status_code, reply, raw.headers.get("x-memory-error")
        stream = await client.chat.completions.create(
            model="gpt-4o-mini", messages=messages, stream=True
        )
        parts = [c.choices[0].delta.content or "" async for c in stream if c.choices]
        return (
            stream.response.status_code,
            "".join(parts),
            stream.response.headers.get("x-memory-error"),
        )


def search(proxy, query, headers=ALICE):
    found = httpx.get(
        proxy.root + "/v1/memory/search", params={"q": query, "k": 10}, headers=headers
    )
    return {hit["text"] for hit in found.json()["results"]}


def test_a_journal_on_a_full_disk_loses_no_turn_and_readiness_says_so_until_it_is_freed(proxy):
    fill_disk(journal_of(proxy))
    answers = [asyncio.run(ask(proxy, n)) for n in range(5)]
    eventually(lambda: readiness(proxy)[0] == 503)
    during, broken = metrics(proxy), readiness(proxy)[1]

    journal_of(proxy).unlink()  # space again
    proxy.flush()
    eventually(lambda: readiness(proxy)[0] == 200)
    after = metrics(proxy)

    # every turn answered; a whole response says its own journal write failed, a streamed one
    # (headers sent before its turn ends) says up front that the journal is failing
    assert answers[0] == (200, f"echo: {text_of(0)}", ENOSPC_HELD)
    assert answers[1:] == [
        (200, f"echo: {text_of(n)}", ENOSPC_HELD if n % 2 == 0 else ENOSPC_AHEAD)
        for n in range(1, 5)
    ]
    assert broken["status"] == "failing" and "journal failing" in broken["writer"]
    assert "ENOSPC" in broken["writer"] and "/" not in broken["writer"]  # no path
    assert during["moim_writer_up"] == 0 and during["moim_memory_write_failures_total"] >= 5
    assert during['moim_writer_failures_total{part="journal"}'] >= 5
    assert after["moim_writer_up"] == 1 and after["moim_writer_unjournaled"] == 0
    assert after["moim_ingest_pending"] == 0 and after["moim_writer_restarts_total"] == 0
    for n in range(5):  # nothing lost: stored, indexed and searchable
        assert {text_of(n), f"echo: {text_of(n)}"} <= search(proxy, f"pelican{n}z"), n
    assert journal_of(proxy).is_file() and journal_of(proxy).stat().st_size == 0


@pytest.fixture
def impatient(make_proxy):
    """A proxy whose store gives up on a lock after 0.2 s (memory.busy_timeout)."""
    return make_proxy(settings={"busy_timeout": 0.2})


def test_turns_neither_the_journal_nor_the_store_took_are_held_in_ram_and_stored_later(impatient):
    proxy = impatient
    lock = sqlean.connect(str(proxy.config.db_path), isolation_level=None, timeout=10)
    with closing(lock):
        lock.execute("BEGIN IMMEDIATE")
        fill_disk(journal_of(proxy))
        answers = [asyncio.run(ask(proxy, n)) for n in (0, 2, 4)]
        eventually(lambda: "store failing" in readiness(proxy)[1].get("writer", ""))
        during = metrics(proxy)
        journal_of(proxy).unlink()
        lock.execute("ROLLBACK")

    # no new turn: the writer retries by itself
    eventually(lambda: readiness(proxy)[0] == 200 and metrics(proxy)["moim_ingest_pending"] == 0)
    assert [error for _, _, error in answers] == [ENOSPC_HELD] * 3
    assert during["moim_writer_unjournaled"] == 3 and during["moim_writer_up"] == 0
    assert during["moim_writer_oldest_unstored_seconds"] > 0
    stored = [m.content for m in proxy.layer.store.messages("alice") if m.role == "user"]
    assert sorted(stored) == [text_of(n) for n in (0, 2, 4)]


def test_a_write_failure_is_reported_to_its_own_request_only(impatient, upstream):
    """Alice's turn fails to be stored (the store is locked past its busy timeout) after her
    response went out; Bob's next request must not carry her failure."""
    proxy = impatient
    lock = sqlean.connect(str(proxy.config.db_path), isolation_level=None, timeout=10)
    with closing(lock):
        lock.execute("BEGIN IMMEDIATE")
        alice = asyncio.run(ask(proxy, 0, ALICE))
        eventually(lambda: metrics(proxy)["moim_memory_write_failures_total"] >= 1)
        status, body = readiness(proxy)  # one process's own file: unready (unlike Postgres)
        lock.execute("ROLLBACK")
    bob = asyncio.run(ask(proxy, 2, BOB))
    proxy.flush()

    assert (status, body["status"]) == (503, "failing")
    assert "store failing" in body["writer"] and "(StoreUnavailable)" in body["writer"]
    assert alice == (200, f"echo: {text_of(0)}", None)  # journaled: stored once the lock is gone
    assert bob == (200, f"echo: {text_of(2)}", None)
    assert [m.content for m in proxy.layer.store.messages("alice")] == [
        text_of(0),
        f"echo: {text_of(0)}",
    ]


def test_a_failed_journal_write_is_reported_on_that_users_response_and_not_the_next(proxy):
    fill_disk(journal_of(proxy))
    alice = asyncio.run(ask(proxy, 0, ALICE))
    journal_of(proxy).unlink()
    proxy.flush()
    eventually(lambda: readiness(proxy)[0] == 200)
    bob = asyncio.run(ask(proxy, 2, BOB))

    assert alice == (200, f"echo: {text_of(0)}", ENOSPC_HELD)
    assert bob == (200, f"echo: {text_of(2)}", None)


def test_stats_pending_counts_every_users_unstored_turns_until_flush(proxy):
    """CONTRACT.md: `pending` is the turns received, for any user, not yet indexed; a flush
    returns once they are. The store is held by another connection meanwhile."""

    def pending(headers):
        response = httpx.get(proxy.root + "/v1/memory/stats", headers=headers)
        return response.json()["pending"]

    lock = sqlean.connect(str(proxy.config.db_path), isolation_level=None, timeout=10)
    with closing(lock):
        lock.execute("BEGIN IMMEDIATE")
        answers = [asyncio.run(ask(proxy, n)) for n in (0, 2)]
        eventually(lambda: pending(BOB) == 2)  # Alice's turns, counted on Bob's stats too
        lock.execute("ROLLBACK")
    proxy.flush()

    assert [status for status, _, _ in answers] == [200, 200]
    assert (pending(ALICE), pending(BOB)) == (0, 0)
    for n in (0, 2):
        assert text_of(n) in search(proxy, f"pelican{n}z")


def test_a_store_whose_directory_is_removed_answers_with_x_memory_error_and_stops(
    make_proxy, tmp_path
):
    """The database's directory removed under a running moim: every chat still answers and
    says its memory failed, and the store still lets go at the stop (the lexical index's
    writer raised there, at last a tantivy panic: a traceback at every stop)."""
    (tmp_path / "data").mkdir()
    proxy = make_proxy(settings={"db_path": tmp_path / "data" / "moim.db"})
    assert asyncio.run(ask(proxy, 0))[0] == 200
    proxy.flush()
    # Moved away in one step (tantivy may be writing in it), then removed.
    (tmp_path / "data").rename(tmp_path / "gone")
    shutil.rmtree(tmp_path / "gone", ignore_errors=True)

    answers = [asyncio.run(ask(proxy, n)) for n in (1, 2, 3, 4)]
    eventually(lambda: readiness(proxy)[0] == 503)
    proxy.layer.close()

    assert [(status, reply) for status, reply, _ in answers] == [
        (200, f"echo: {text_of(n)}") for n in (1, 2, 3, 4)
    ]
    assert all(error for _, _, error in answers)
