"""proxy/writer.py: turns are stored, then indexed batch by batch, and progress shows it.

The embedder here is the deterministic test embedder behind a gate, so the test decides
when each indexing batch may run; SQLite, the journal and the memory layer are real.
"""

import asyncio
import os
import sys
import threading
import time
from contextlib import closing
from dataclasses import replace

import pytest
import sqlean

from memory import Journal, MemoryLayer, Settings, StoreUnavailable, Turn
from proxy.writer import _BATCH, Writer
from tests.memory.hash_embedder import HashEmbedder


class GatedEmbedder(HashEmbedder):
    """Each `embed_documents` call (one message's chunks) waits for a permit."""

    def __init__(self):
        self.permits = threading.Semaphore(0)
        self.waiting = threading.Event()

    def embed_documents(self, texts):
        self.waiting.set()
        assert self.permits.acquire(timeout=10), "the test never released this batch"
        self.waiting.clear()
        return super().embed_documents(texts)


# Messages of one chunk each that one indexing pass takes (memory.index_slice_chunks).
PASS = min(_BATCH, Settings().index_slice_chunks)


def turn(k):
    return Turn(
        user_id="u",
        session_id=f"s{k}",
        model="gpt-4o-mini",
        messages=({"role": "user", "content": f"question number {k}"},),
        reply={"role": "assistant", "content": f"answer number {k}"},
        created_at=time.time(),
    )


async def until(condition, seconds=10.0):
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.01)


def test_progress_advances_with_each_indexing_batch(tmp_path):
    gate = GatedEmbedder()
    layer = MemoryLayer(Settings(db_path=tmp_path / "m.db"), embedder_factory=lambda _: gate)
    turns = 100  # two messages each: 200 messages, four batches

    async def scenario():
        writer = Writer(layer, Journal(tmp_path / "journal"))
        await writer.start()
        await until(lambda: writer.recovered)
        for k in range(turns):
            writer.submit(turn(k))
        await until(gate.waiting.is_set)  # all stored; the first message waits for its permit
        assert layer.store.count_unindexed() == 2 * turns
        assert writer.pending == turns

        gate.permits.release(PASS)  # one pass: its messages, one chunk each
        await until(lambda: writer.pending == turns - PASS // 2)
        assert layer.store.count_unindexed() == 2 * turns - PASS

        gate.permits.release(1000)
        assert await writer.flush(timeout=10)
        assert writer.pending == 0
        assert layer.store.count_unindexed() == 0
        await writer.stop()

    asyncio.run(scenario())


def test_turns_finished_during_a_batch_are_stored_before_the_next_one(tmp_path):
    gate = GatedEmbedder()
    layer = MemoryLayer(Settings(db_path=tmp_path / "m.db"), embedder_factory=lambda _: gate)

    async def scenario():
        writer = Writer(layer, Journal(tmp_path / "journal"))
        await writer.start()
        await until(lambda: writer.recovered)
        for k in range(40):
            writer.submit(turn(k))
        await until(gate.waiting.is_set)  # the first pass (of 80 messages) is embedding
        writer.submit(turn(99))  # finishes while the pass runs

        gate.permits.release(PASS)
        await until(lambda: len(layer.store.messages("u")) == 82)  # stored before pass two
        await until(gate.waiting.is_set)  # pass two waits for its first permit
        assert layer.store.count_unindexed() == 82 - PASS

        gate.permits.release(1000)
        assert await writer.flush(timeout=10)
        await writer.stop()

    asyncio.run(scenario())


def test_indexing_goes_on_while_turns_keep_arriving(tmp_path):
    layer = MemoryLayer(
        Settings(db_path=tmp_path / "m.db"), embedder_factory=lambda _: HashEmbedder()
    )

    async def scenario():
        writer = Writer(layer, Journal(tmp_path / "journal"))
        await writer.start()
        await until(lambda: writer.recovered)
        indexed_while_arriving = 0
        deadline = time.monotonic() + 30  # generous: CI machines can be busy
        k = 0
        # stored, then unindexed: a turn stored between the two reads makes the difference
        # an underestimate (even negative), never a false positive
        while time.monotonic() < deadline and indexed_while_arriving <= 0:
            writer.submit(turn(k))  # a new turn at every turn of the event loop
            k += 1
            await asyncio.sleep(0)
            if k % 20 == 0:
                stored = len(layer.store.messages("u"))
                indexed_while_arriving = stored - layer.store.count_unindexed()
        assert indexed_while_arriving > 0, "the writer only stored; it never got to index"
        assert await writer.flush(timeout=120)  # the backlog of a busy machine
        assert layer.store.count_unindexed() == 0
        await writer.stop()

    asyncio.run(scenario())


def test_ready_once_the_journal_is_stored_while_a_backlog_is_still_indexing(tmp_path):
    gate = GatedEmbedder()
    layer = MemoryLayer(Settings(db_path=tmp_path / "m.db"), embedder_factory=lambda _: gate)
    journal = Journal(tmp_path / "journal")
    for k in range(3):
        layer.store_only(turn(k))  # a backlog: stored, never indexed (e.g. a model change)
    journal.append(turn(99))  # and a turn a killed process left in the journal only

    async def scenario():
        writer = Writer(layer, journal)
        await writer.start()
        await until(lambda: writer.recovered)
        assert len(layer.store.messages("u")) == 8  # the journal's turn is in SQLite
        assert layer.store.count_unindexed() == 8  # the first message waits for its permit
        assert writer.pending == 1
        gate.permits.release(1000)
        assert await writer.flush(timeout=10)
        assert layer.store.count_unindexed() == 0
        await writer.stop()

    asyncio.run(scenario())


def test_pending_after_a_crash_counts_every_turn_the_journal_holds(tmp_path):
    """A killed process left five turns in the journal, and the store is locked when the new
    one replays them: all five are pending (it said 1), and none once stored."""
    layer = MemoryLayer(
        Settings(db_path=tmp_path / "m.db", busy_timeout=0.05),
        embedder_factory=lambda _: HashEmbedder(),
    )
    journal = Journal(tmp_path / "journal")
    for k in range(5):
        journal.append(turn(k))
    lock = sqlean.connect(str(tmp_path / "m.db"), isolation_level=None, timeout=10)
    lock.execute("BEGIN IMMEDIATE")

    async def scenario():
        writer = Writer(layer, journal)
        assert writer.pending == 5
        await writer.start()
        await until(lambda: "store failing" in (writer.problem or ""))
        assert writer.pending == 5 and not writer.recovered
        writer.submit(turn(5))
        assert writer.pending == 6
        lock.execute("ROLLBACK")
        assert await writer.flush(timeout=10)
        assert writer.pending == 0 and len(user_texts(layer)) == 6
        await writer.stop()

    with closing(lock):
        asyncio.run(scenario())


class NicenessProbe(HashEmbedder):
    """Records the OS priority (nice value) of the thread that embeds each batch."""

    def __init__(self):
        self.niceness = []

    def embed_documents(self, texts):
        self.niceness.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
        return super().embed_documents(texts)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice is Linux's")
def test_indexing_runs_at_a_lower_priority_than_requests(tmp_path):
    probe = NicenessProbe()
    layer = MemoryLayer(Settings(db_path=tmp_path / "m.db"), embedder_factory=lambda _: probe)
    mine = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    async def scenario():
        writer = Writer(layer, Journal(tmp_path / "journal"))
        await writer.start()
        writer.submit(turn(1))
        assert await writer.flush(timeout=10)
        await writer.stop()

    asyncio.run(scenario())
    assert probe.niceness and all(n == min(19, mine + 10) for n in probe.niceness)
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == mine  # not the caller's


def test_the_writer_merges_the_fts_index_when_idle(tmp_path):
    from memory.store import fts_upkeep

    settings = Settings(db_path=tmp_path / "m.db", fts_merge_after=10)
    layer = MemoryLayer(settings, embedder_factory=lambda _: HashEmbedder())

    async def scenario():
        writer = Writer(layer, Journal(tmp_path / "journal"))
        await writer.start()
        for k in range(20):  # 40 messages, 40 chunks
            writer.submit(turn(k))
        assert await writer.flush(timeout=10)
        await until(lambda: not fts_upkeep.tidy_due(layer.store, 10))
        started = time.monotonic()
        await writer.stop()
        assert time.monotonic() - started < 5

    asyncio.run(scenario())
    rows = layer.store.read("SELECT value FROM meta WHERE key = 'fts_merged_at_chunk'")
    newest = layer.store.read("SELECT max(id) FROM chunks")[0][0]
    assert rows and int(rows[0][0]) == newest


def stored_messages(layer):
    return layer.store.read("SELECT count(*) FROM messages")[0][0]


async def soon(condition, seconds=10.0):
    """`until`, polling every millisecond: for windows that last a fraction of a second."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.001)


def test_a_full_queue_sends_turns_to_the_journal_only_and_loses_none(tmp_path):
    layer = MemoryLayer(
        Settings(db_path=tmp_path / "m.db"), embedder_factory=lambda _: HashEmbedder()
    )

    async def scenario():
        journal = Journal(tmp_path / "journal")
        writer = Writer(layer, journal, maxsize=2)
        await writer.start()
        await until(lambda: writer.recovered)
        for k in range(10):  # all before the writer runs again: two queued, eight spilled
            writer.submit(turn(k))
        assert (writer.queued, writer.queue_peak, writer.spilled) == (2, 2, 8)
        assert len(journal.replay()) == 10  # every one is durable
        assert await writer.flush(timeout=10)
        assert (writer.queued, writer.queue_peak, writer.spilled, writer.pending) == (0, 2, 8, 0)
        assert stored_messages(layer) == 20 and layer.store.count_unindexed() == 0
        assert journal.size() == 0
        await writer.stop()

    asyncio.run(scenario())


def test_turns_that_arrive_while_the_journal_is_replayed_are_stored_and_counted_once(tmp_path):
    """Turns queued while the replay reads the journal may be read by it too (stored once,
    counted once); a turn that spills while the replay runs is in the journal only and must
    survive the journal being emptied afterwards."""
    layer = MemoryLayer(
        Settings(db_path=tmp_path / "m.db"), embedder_factory=lambda _: HashEmbedder()
    )
    backlog = 400  # turns spilled at once: replaying them takes a good part of a second
    lock = sqlean.connect(str(tmp_path / "m.db"), isolation_level=None, timeout=10)

    async def scenario():
        journal = Journal(tmp_path / "journal")
        writer = Writer(layer, journal, maxsize=2)
        await writer.start()
        await until(lambda: writer.recovered)
        lock.execute("BEGIN IMMEDIATE")  # the writer's next store waits for it
        for k in range(backlog):
            writer.submit(turn(k))  # two queued, the rest spilled
        assert (writer.queued, writer.spilled) == (2, backlog - 2)
        lock.execute("ROLLBACK")
        await soon(lambda: stored_messages(layer) > 4)  # the two stored: the replay is under way
        for k in (1000, 1001, 1002, 1003):
            writer.submit(turn(k))  # two queued, two spilled, while the replay runs
        assert stored_messages(layer) < 2 * backlog, "the replay ended before the test's turns"
        assert await writer.flush(timeout=30)
        assert writer.pending == 0
        stored = {m.content for m in layer.store.messages("u") if m.role == "user"}
        assert {f"question number {k}" for k in range(1000, 1004)} <= stored
        assert stored_messages(layer) == 2 * (backlog + 4)
        assert journal.size() == 0
        await writer.stop()

    with closing(lock):
        asyncio.run(scenario())


def test_a_turn_that_cannot_be_encoded_is_reported_and_flush_still_returns(tmp_path):
    layer = MemoryLayer(
        Settings(db_path=tmp_path / "m.db"), embedder_factory=lambda _: HashEmbedder()
    )
    broken = Turn(
        user_id="u",
        session_id="s-broken",
        model="gpt-4o-mini",
        messages=({"role": "user", "content": "half a pair \ud83d"},),
        reply=None,
        created_at=time.time(),
    )

    async def scenario():
        writer = Writer(layer, Journal(tmp_path / "journal"))
        await writer.start()
        await until(lambda: writer.recovered)
        error = writer.submit(broken)  # never raises: the journal refuses it, and so does SQLite
        assert writer.submit(turn(1)) is None
        assert await writer.flush(timeout=10)
        assert error == "memory write failed (UnicodeEncodeError): this turn cannot be stored"
        assert writer.dropped == 1 and writer.failures == 2 and writer.problem is None
        assert [m.content for m in layer.store.messages("u")] == [
            "question number 1",
            "answer number 1",
        ]
        await writer.stop()

    asyncio.run(scenario())


# -- failures in the write path: survived, retried, reported -----------------------------------


def full_disk(path):
    """Make `path` name /dev/full: every write to it fails with ENOSPC, even for root."""
    link = path.with_name(path.name + ".link")
    link.symlink_to("/dev/full")
    os.replace(link, path)


def user_texts(layer):
    return sorted(m.content for m in layer.store.messages("u") if m.role == "user")


def test_a_journal_on_a_full_disk_is_reported_per_turn_and_its_turns_are_still_stored(tmp_path):
    layer = MemoryLayer(
        Settings(db_path=tmp_path / "m.db"), embedder_factory=lambda _: HashEmbedder()
    )
    path = tmp_path / "journal"

    async def scenario():
        writer = Writer(layer, Journal(path))
        await writer.start()
        await until(lambda: writer.recovered)
        full_disk(path)
        errors = [writer.submit(turn(k)) for k in range(3)]
        assert (
            errors == ["memory journal failed (ENOSPC): this turn is held in RAM until stored"] * 3
        )
        assert await writer.flush(timeout=10)  # SQLite works: stored from RAM
        assert user_texts(layer) == [f"question number {k}" for k in range(3)]
        assert "journal failing" in writer.problem and "ENOSPC" in writer.journal_problem()

        path.unlink()  # space again
        assert writer.submit(turn(3)) is None
        await until(lambda: writer.problem is None)
        assert await writer.flush(timeout=10)
        assert len(user_texts(layer)) == 4 and path.stat().st_size == 0
        await writer.stop()

    asyncio.run(scenario())


def test_turns_a_failing_store_refused_stay_queued_and_are_stored_with_no_new_turn(tmp_path):
    layer = MemoryLayer(
        Settings(db_path=tmp_path / "m.db", busy_timeout=0.05),
        embedder_factory=lambda _: HashEmbedder(),
    )
    lock = sqlean.connect(str(tmp_path / "m.db"), isolation_level=None, timeout=10)

    async def scenario():
        writer = Writer(layer, Journal(tmp_path / "journal"))
        await writer.start()
        await until(lambda: writer.recovered)
        lock.execute("BEGIN IMMEDIATE")
        writer.submit(turn(0))
        writer.submit(turn(1))
        await until(lambda: "store failing" in (writer.problem or ""))
        assert not await writer.flush(timeout=0.3)  # not stored: flush does not say it is
        assert (writer.queued, writer.pending) == (2, 2)

        lock.execute("ROLLBACK")  # nothing else is submitted: the retry timer stores them
        await until(lambda: writer.pending == 0)
        assert writer.problem is None and writer.queued == 0
        assert user_texts(layer) == ["question number 0", "question number 1"]
        await writer.stop()

    with closing(lock):
        asyncio.run(scenario())


def test_turns_neither_store_nor_journal_took_are_held_and_journaled_once_it_works(tmp_path):
    layer = MemoryLayer(
        Settings(db_path=tmp_path / "m.db", busy_timeout=0.05),
        embedder_factory=lambda _: HashEmbedder(),
    )
    path = tmp_path / "journal"
    lock = sqlean.connect(str(tmp_path / "m.db"), isolation_level=None, timeout=10)

    async def scenario():
        writer = Writer(layer, Journal(path), maxsize=1)
        await writer.start()
        await until(lambda: writer.recovered)
        lock.execute("BEGIN IMMEDIATE")
        full_disk(path)
        for k in range(3):  # past the queue's size: not spilled, the journal does not hold them
            assert writer.submit(turn(k)) is not None
        assert (writer.queued, writer.unjournaled, writer.spilled) == (3, 3, 0)

        path.unlink()  # the journal works again: the held turns are written to it
        await until(lambda: writer.unjournaled == 0)
        assert sorted(t.messages[0]["content"] for t in Journal(path).turns()) == [
            f"question number {k}" for k in range(3)
        ]
        assert "store failing" in writer.problem and "journal" not in writer.problem

        lock.execute("ROLLBACK")
        await until(lambda: writer.pending == 0)
        assert len(user_texts(layer)) == 3 and path.stat().st_size == 0
        assert writer.problem is None
        await writer.stop()

    with closing(lock):
        asyncio.run(scenario())


def test_forget_takes_a_users_stored_turns_out_of_a_journal_not_yet_emptied(tmp_path):
    """The journal is emptied only when a drain ends with the queue empty; under load it keeps
    stored turns, and a restart or a spill replays them. A forgotten user's must not be."""
    gate = GatedEmbedder()
    layer = MemoryLayer(Settings(db_path=tmp_path / "m.db"), embedder_factory=lambda _: gate)
    journal = Journal(tmp_path / "journal")

    async def scenario():
        writer = Writer(layer, journal)
        await writer.start()
        await until(lambda: writer.recovered)
        writer.submit(replace(turn(1), user_id="bob"))
        await until(gate.waiting.is_set)  # bob's turn is stored; its indexing waits
        # Alice's turn, stored in an earlier drain that ended with a turn queued (so the
        # journal was not emptied), and a turn of carol's queued now.
        journal.append(replace(turn(2), user_id="alice"))
        writer.submit(replace(turn(3), user_id="carol"))
        assert [t.user_id for t in journal.replay()] == ["alice", "carol"]

        writer.forget("alice")

        assert [t.user_id for t in journal.replay()] == ["carol"]
        gate.permits.release(1000)
        assert await writer.flush(timeout=10)
        await writer.stop()

    with closing(layer):
        asyncio.run(scenario())
        assert layer.stats("carol").messages == 2


class FrontierFails(MemoryLayer):
    """Reading how far indexing got fails while `failing` is set (a store that cannot be
    read); everything else is the real layer."""

    failing = False

    def index_frontier(self):
        if self.failing:
            raise StoreUnavailable("database is locked")
        return super().index_frontier()


def test_a_flush_that_cannot_read_how_far_indexing_got_says_why(tmp_path):
    """The memory API's flush answers 503 with `writer` while indexing fails, 504 when only
    late; a failure reading the indexing position left `problem` unset: a 504, no reason."""
    gate = GatedEmbedder()
    layer = FrontierFails(Settings(db_path=tmp_path / "m.db"), embedder_factory=lambda _: gate)

    async def scenario():
        writer = Writer(layer, Journal(tmp_path / "journal"))
        await writer.start()
        await until(lambda: writer.recovered)
        writer.submit(turn(1))
        await until(gate.waiting.is_set)  # stored; its indexing waits
        layer.failing = True
        gate.permits.release(1000)

        assert not await writer.flush(timeout=10)
        assert writer.problem.startswith("index failing for ")
        assert "StoreUnavailable" in writer.problem and writer.pending == 1

        layer.failing = False  # the retry (after 1 s) reads it: done, and nothing failing
        assert await writer.flush(timeout=10)
        assert writer.problem is None and writer.pending == 0
        await writer.stop()

    with closing(layer):
        asyncio.run(scenario())


def test_a_turn_behind_a_journal_the_writer_will_not_replay_in_time_is_not_waited_for(tmp_path):
    """While the model loads the writer has not started; a turn said then is waited for (the
    writer's first: seconds), but not one behind the turns a previous process left in the
    journal, which the writer replays first at its pace (here ~100 s of them): the request
    would wait its whole `recall_wait` for nothing, as it does not once the writer runs."""
    journal = Journal(tmp_path / "journal")
    for k in range(2000):
        journal.append(turn(k))
    layer = MemoryLayer(Settings(db_path=tmp_path / "m.db"), embedder_factory=HashEmbedder)

    async def scenario():
        writer = Writer(layer, Journal(tmp_path / "journal"))  # not started: the model loads
        writer.submit(replace(turn(2000), user_id="kim"))
        asked = [{"role": "user", "content": "what did I say?"}]
        waiting = writer.searchable("kim", "other", None, asked, timeout=60.0)
        return await asyncio.wait_for(waiting, 10.0)

    assert asyncio.run(scenario()) == 1  # not found yet, said at once
    layer.close()
