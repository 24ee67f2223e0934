"""Step 7's driver: one background writer that stores and indexes turns, off the request path.

A finished turn is handed to `submit`, which appends it to the write-ahead journal (an
append to a file, no database) and queues it; that happens before the client gets the last
byte of its response, so a crash after a completed response loses nothing. One task
alternates, in worker threads: store every queued turn (`MemoryLayer.store_only`, fast),
index one batch of messages (`index_pending`, embedding: slow), and again. So SQLite has one
writer, the event loop never waits on it, turns reach SQLite within one batch's time even
under a backlog, and progress (`pending`, `flush`) advances batch by batch.

Back-pressure: the queue holds at most `maxsize` turns. Past that, turns go to the journal
only (RAM stays bounded) and are stored from it when the queue has drained; `spilled`
counts them and `queue_peak` is the most the queue has held (both in `/metrics`). If storing
fails (a locked or full disk), the journal keeps the turn and the writer retries from the
journal when the next turn arrives, or after 1 s, 2 s, 4 s … (at most a minute) when none
does; a failed indexing pass is retried the same way. The failure is reported once, as
`x-memory-error`.

`flush` returns once every turn submitted before the call is stored and indexed.

Indexing runs on a thread of its own at a lower OS priority (nice +10, where the platform
allows it): when the cores are all busy, requests (their recall embeds a question too) go
first and indexing catches up when they are not. With cores to spare it makes no difference.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import anyio.to_thread

from memory import Journal, MemoryLayer, Turn

logger = logging.getLogger(__name__)

# Messages indexed per pass; between passes the writer stores newly finished turns.
_BATCH = 64
# The mark of a turn whose newest message id could not be read: done when all is indexed.
_UNKNOWN = 1 << 62
# Past this size the journal is cut down to the turns still queued (see Journal.keep_last).
_JOURNAL_TRIM_BYTES = 4 * 1024 * 1024
# After a failed store or indexing pass the writer tries again after this many seconds,
# doubling up to the maximum, even when no new turn arrives to wake it.
_RETRY_FIRST = 1.0
_RETRY_MAX = 60.0
# How much nicer than the process the indexing thread is (Unix nice values, 19 at most).
_INDEXING_NICENESS = 10


def _lower_priority() -> None:
    """Make the calling thread yield the CPU to the others when they compete (Linux: the
    nice value is per thread; elsewhere, or where it is not allowed, nothing changes)."""
    if not hasattr(os, "setpriority"):
        return
    try:
        tid = threading.get_native_id()
        current = os.getpriority(os.PRIO_PROCESS, tid)
        os.setpriority(os.PRIO_PROCESS, tid, min(19, current + _INDEXING_NICENESS))
    except OSError:
        logger.debug("could not lower the indexing thread's priority", exc_info=True)


class Writer:
    def __init__(self, layer: MemoryLayer, journal: Journal, maxsize: int = 10_000) -> None:
        self._layer = layer
        self._journal = journal
        self._queue: deque[Turn] = deque()
        self._maxsize = maxsize
        self._wakeup = asyncio.Event()
        self._progress = asyncio.Condition()
        # Recovery counts as the first unit of work: until the writer has stored what a
        # previous process left in the journal and indexed what it left unindexed, `flush`
        # waits and readiness says no.
        self._submitted = 1
        self._stored = 0
        self._indexed = 0
        self._journal_only = True  # turns are in the journal that the queue does not hold
        # (turns stored so far, newest message id then): a turn counts as indexed once every
        # message up to its mark is
        self._marks: deque[tuple[int, int]] = deque()
        self._replayed = False
        self._task: asyncio.Task[None] | None = None
        self._indexer: ThreadPoolExecutor | None = None
        self._stopping = False
        self.failures = 0
        self.spilled = 0  # turns that went to the journal only, the queue being full
        self.queue_peak = 0  # the most turns the queue has held at once
        self.last_error: str | None = None

    @property
    def pending(self) -> int:
        """Turns received but not yet stored and indexed."""
        return self._submitted - self._indexed

    @property
    def queued(self) -> int:
        """Turns waiting in the queue now (at most `maxsize`)."""
        return len(self._queue)

    @property
    def capacity(self) -> int:
        """The most turns the queue may hold (`memory.ingest_queue_size`)."""
        return self._maxsize

    @property
    def recovered(self) -> bool:
        """What a previous process left in the journal is stored in SQLite.

        Not "indexed": after a crash that is seconds, but after an embedding-model change
        every message is re-embedded, which can take hours, and recall works meanwhile on
        what is indexed. `flush` waits for the indexing too.
        """
        return self._replayed

    async def start(self) -> None:
        self._indexer = ThreadPoolExecutor(
            1, thread_name_prefix="moim-indexer", initializer=_lower_priority
        )
        self._task = asyncio.create_task(self._run(), name="moim-writer")
        self._wakeup.set()

    async def stop(self) -> None:
        self._stopping = True
        if self._task is not None:
            await self.flush(timeout=10.0)
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        if self._indexer is not None:
            self._indexer.shutdown(wait=True)
        self._journal.close()

    def submit(self, turn: Turn) -> None:
        """Make a finished turn durable in the journal and queue it. Never raises."""
        self._submitted += 1
        try:
            self._journal.append(turn)
        except (OSError, ValueError) as exc:  # a full disk; text that is not UTF-8
            self._fail(exc)  # still queued: storing it fails or not, and flush goes on
        if len(self._queue) >= self._maxsize:
            self.spilled += 1
            self._journal_only = True
        else:
            self._queue.append(turn)
            self.queue_peak = max(self.queue_peak, len(self._queue))
        self._wakeup.set()

    def take_error(self) -> str | None:
        """The last write failure, reported once on the next response."""
        error, self.last_error = self.last_error, None
        return error

    async def flush(self, timeout: float | None = None) -> bool:
        """Wait until every turn submitted so far is stored and indexed; False on timeout."""
        target = self._submitted
        self._wakeup.set()

        async def reached() -> None:
            async with self._progress:
                await self._progress.wait_for(lambda: self._indexed >= target)

        try:
            await asyncio.wait_for(reached(), timeout)
        except TimeoutError:
            return False
        return True

    async def _run(self) -> None:
        retry: float | None = None  # after a failed cycle, seconds until the next try
        while True:
            await self._wait(retry)
            self._wakeup.clear()
            while True:
                await self._drain()
                indexed = await self._index(_BATCH)
                await self._advance(failed=indexed is None)
                if not indexed:  # nothing left (or indexing failed): wait for new turns
                    break
            if indexed is None or self._journal_only:  # a turn waits in the journal, or
                retry = min(2 * retry, _RETRY_MAX) if retry else _RETRY_FIRST  # in the log
            else:
                retry = None
            await self._tidy()

    async def _wait(self, timeout: float | None) -> None:
        """Until a turn is submitted; after a failed cycle, `timeout` seconds at most, so a
        turn whose store failed (a lock another process held) is stored once the store is
        back, not only when the next turn arrives."""
        try:
            await asyncio.wait_for(self._wakeup.wait(), timeout)
        except TimeoutError:
            pass

    async def _drain(self) -> None:
        """Store the queued turns, then whatever only the journal holds; empty the journal.

        Only the turns queued when the drain starts: under sustained load new turns keep
        arriving, and draining "until empty" would never get to indexing.
        """
        turns = [self._queue.popleft() for _ in range(len(self._queue))]
        clean = True
        if turns:
            failures, newest = await anyio.to_thread.run_sync(self._store_each, turns)
            for exc in failures:
                self._fail(exc)
            clean = not failures
            for mark in newest:
                self._stored += 1
                self._marks.append((self._stored, mark))
        if self._journal_only and clean:
            # Everything submitted so far is in the journal, the queued turns too; storing it
            # again is idempotent. The flag is lowered before the journal is read: a turn
            # that spills while the replay runs raises it again, for the next drain.
            self._journal_only = False
            submitted, queued = self._submitted, len(self._queue)
            replayed = self._journal.turns()  # read as it is stored: one turn in RAM at a time
            clean = await self._guarded(self._store_all, replayed)
            if clean:
                for _ in range(queued):  # stored by the replay: not again, nor counted twice
                    self._queue.popleft()
                self._stored = max(self._stored, submitted)
                self._replayed = True
                await self._mark()
        if not clean:
            self._journal_only = True  # retried from the journal: next turn or retry timer
            self._stored = self._submitted - len(self._queue)  # flush must not hang on it
            await self._mark()
        elif self._journal_only:
            pass  # a turn spilled meanwhile: the journal stays whole until it is replayed
        elif not self._queue:
            self._journal.clear()  # no await since the check: no append can slip in between
        elif self._journal.size() > _JOURNAL_TRIM_BYTES:
            self._journal.keep_last(len(self._queue))  # exactly the queued turns (not spilled)

    def _store_each(self, turns: list[Turn]) -> tuple[list[Exception], list[int]]:
        """Store turns one by one (one transaction each): the failures (logged), and per turn
        the newest message id once it is stored (its progress mark)."""
        failures: list[Exception] = []
        newest: list[int] = []
        for turn in turns:
            try:
                self._layer.store_only(turn)
                newest.append(self._layer.store.index_frontier()[0])
            except Exception as exc:  # one bad turn must not stop the others
                logger.exception("memory write failed")
                failures.append(exc)
                newest.append(_UNKNOWN)
        return failures, newest

    async def _mark(self) -> None:
        """Note the newest message id now that `self._stored` jumped (a journal replay, or a
        failure); queued turns get their marks from `_store_each`."""
        try:
            newest, _ = await anyio.to_thread.run_sync(self._layer.store.index_frontier)
        except Exception:  # the store is failing: progress falls back to whole cycles
            newest = _UNKNOWN
        self._marks.append((self._stored, newest))

    async def _advance(self, failed: bool) -> None:
        """Count as indexed every stored turn whose messages all are (ids below the frontier).

        A failed indexing pass counts everything stored as done, so `flush` cannot hang on
        an embedding model that fails; the messages stay unindexed in SQLite and the next
        pass (or `moim reindex`) picks them up.
        """
        oldest: int | None = None
        if not failed:
            try:
                _, oldest = await anyio.to_thread.run_sync(self._layer.store.index_frontier)
            except Exception:
                failed = True
        while self._marks and (failed or oldest is None or self._marks[0][1] < oldest):
            indexed = self._marks.popleft()[0]
            async with self._progress:
                self._indexed = max(self._indexed, indexed)
                self._progress.notify_all()

    def _store_all(self, turns: Iterable[Turn]) -> None:
        for turn in turns:
            self._layer.store_only(turn)

    async def _tidy(self) -> None:
        """Merge the FTS index while no turn waits and the writer is not stopping."""
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self._indexer, self._layer.tidy_index, self._busy)
        except Exception:  # upkeep only: nothing is lost, the next idle time tries again
            logger.exception("FTS index merge failed")

    def _busy(self) -> bool:
        return bool(self._queue) or self._stopping

    async def _index(self, batch: int) -> int | None:
        """Index up to `batch` messages on the indexing thread; None when it failed (logged
        and counted)."""
        loop = asyncio.get_running_loop()
        try:
            work = self._layer.index_pending
            return int(await loop.run_in_executor(self._indexer, work, batch, 1))  # one pass
        except Exception as exc:
            logger.exception("memory indexing failed")
            self._fail(exc)
            return None

    async def _guarded(self, work: Callable[..., Any], *args: Any) -> bool:
        try:
            await anyio.to_thread.run_sync(work, *args)
        except Exception as exc:  # a failed write must not stop the writer: log, count, go on
            logger.exception("memory write failed")
            self._fail(exc)
            return False
        return True

    def _fail(self, exc: BaseException) -> None:
        self.failures += 1
        self.last_error = f"memory write failed: {type(exc).__name__}"
        logger.error("%s: %s", self.last_error, exc)
