"""Step 7's driver: one background writer that stores and indexes turns, off the request path.

A finished turn is handed to `submit`, which appends it to the write-ahead journal (an
append to a file, no database) and queues it (`proxy/writer_queue.py`, which also stores
them); that happens before the client gets the last byte of its response, so a crash after a
completed response loses nothing. One task alternates, in worker threads: store every queued
turn (`MemoryLayer.store_only`, fast), index one pass (`index_pending`: embedding, slow, a
bounded amount of work), and again. So SQLite has one writer, the event loop never waits on
it, turns reach SQLite within one pass's time even under a backlog, and progress (`pending`,
`flush`) advances pass by pass. With replicas on Postgres, turns may also wait behind
messages another replica is indexing; the writer then looks again every second until they
are done.

Failures never stop the writer (proxy/writer_health.py names the parts that can fail; the
queue's module says what storing and the journal do with theirs):

- A turn a store refused for a reason that can pass stays queued: the writer tries again
  when the next turn arrives, or after 1 s, 2 s, 4 s … (at most a minute) when none does.
- A failed indexing pass leaves the messages unindexed in SQLite for the next pass, and
  their turns `pending` (a flush waiting on them returns, saying not all is indexed).
- When no message waits to be indexed, a pass re-embeds a batch of chunks after a change of
  embedding model (`MemoryLayer.rebuild_vectors`); it fails and is retried as indexing is.
- The loop runs under `supervise`: should it raise anyway, the crash is logged with its
  traceback, and the loop restarts, reading the journal again first.

While any of these fails, `problem` says what: `/health/readiness` answers 503 (200,
"degraded", when it is only a shared store being unreachable: `local_problem`) and
`moim_writer_up` is 0. `flush` returns once every turn submitted before the call is stored
and indexed; while storing fails it waits (the memory API's flush times out with a 504).

Indexing runs on a thread of its own at a lower OS priority (nice +10, where the platform
allows it): when the cores are all busy, requests (their recall embeds a question too) go
first and indexing catches up when they are not. With cores to spare it makes no difference.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import anyio.to_thread

from memory import Journal, MemoryLayer, Turn
from proxy.storing import TRANSIENT
from proxy.supervisor import supervise
from proxy.thread_priority import lower_priority
from proxy.writer_forgotten import ForgottenUsers
from proxy.writer_health import WriterHealth, say_stopped
from proxy.writer_progress import Progress
from proxy.writer_queue import TurnQueue, left_in
from proxy.writer_recent import RecentTurns

logger = logging.getLogger(__name__)

# Messages looked at per indexing pass; between passes the writer stores newly finished turns.
_BATCH = 64
# After a failed cycle the writer tries again after this many seconds, doubling up to the
# maximum, even when no new turn arrives to wake it.
_RETRY_FIRST = 1.0
_RETRY_MAX = 60.0
# With replicas: how often to look again while our stored turns wait behind messages
# another replica has claimed (no new turn may come to wake us when it is done).
_OTHERS_POLL = 1.0


class Writer:
    def __init__(self, layer: MemoryLayer, journal: Journal, maxsize: int = 10_000) -> None:
        self._layer = layer
        self._wakeup = asyncio.Event()
        left = left_in(journal)
        self._progress = Progress(left)
        self._health = WriterHealth()
        self._turns = TurnQueue(layer, journal, maxsize, self._progress, self._health, left)
        self._task: asyncio.Task[None] | None = None
        self._indexer: ThreadPoolExecutor | None = None
        self._stopping = False
        self.restarts = 0  # times the writer's task crashed and was restarted
        self._forgotten = ForgottenUsers()
        self._recent = RecentTurns()
        self._recent.add_left(journal, left)

    # -- what it reports -------------------------------------------------------------------

    @property
    def pending(self) -> int:
        """Turns received but not yet stored and indexed."""
        return self._progress.pending

    @property
    def queued(self) -> int:
        """Turns waiting in the queue now (at most `maxsize`, plus turns held unjournaled)."""
        return len(self._turns)

    @property
    def unjournaled(self) -> int:
        """Queued turns the journal does not hold: a crash now would lose them."""
        return self._turns.unjournaled

    @property
    def capacity(self) -> int:
        """The most turns the queue may hold (`memory.ingest_queue_size`)."""
        return self._turns.capacity

    @property
    def spilled(self) -> int:
        """Turns that went to the journal only, the queue being full."""
        return self._turns.spilled

    @property
    def queue_peak(self) -> int:
        """The most turns the queue has held at once."""
        return self._turns.queue_peak

    @property
    def dropped(self) -> int:
        """Turns SQLite refused for their content."""
        return self._turns.dropped

    @property
    def failures(self) -> int:
        """Failures of every part of the write path so far, dropped turns included."""
        return self._health.failures

    def failures_by_part(self) -> dict[str, int]:
        """The same, by part of the write path (proxy/writer_health.py names them)."""
        return dict(self._health.counts)

    @property
    def recovered(self) -> bool:
        """What a previous process left in the journal is stored in SQLite.

        Not "indexed": after a crash that is seconds, but after an embedding-model change
        every message is re-embedded, which can take hours, and recall works meanwhile on
        what is indexed. `flush` waits for the indexing too.
        """
        return self._turns.replayed

    @property
    def problem(self) -> str | None:
        """What is failing now (None when nothing is): readiness says it, `moim_writer_up` 0."""
        if self._task is not None and self._task.done() and not self._stopping:
            return "the writer task has ended"
        return self._health.problem

    @property
    def local_problem(self) -> str | None:
        """What is failing of this process's own: readiness says 503 while it is set. The
        same as `problem`, but for a shared (Postgres) store being unreachable."""
        if self._task is not None and self._task.done() and not self._stopping:
            return "the writer task has ended"
        return self._health.local_problem(self._layer.shared)

    @property
    def up(self) -> bool:
        """Running, and nothing in the write path failing."""
        return self._task is not None and not self._task.done() and self.problem is None

    @property
    def oldest_unstored_seconds(self) -> float:
        """How long the oldest turn not yet in SQLite has waited (0 when none waits)."""
        return self._turns.oldest_unstored_seconds()

    def journal_problem(self) -> str | None:
        """While journal writes fail, what a streamed response says up front: its own turn
        is appended after its headers are sent, and will most likely be held in RAM too."""
        failing = self._health.failing("journal")
        if failing is None:
            return None
        return f"memory journal failing ({failing.error}): turn to be held in RAM until stored"

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        self._indexer = ThreadPoolExecutor(
            1, thread_name_prefix="moim-indexer", initializer=lower_priority
        )
        running = supervise("memory writer", self._run, self._crashed)
        self._task = asyncio.create_task(running, name="moim-writer")
        self._wakeup.set()

    async def stop(self, timeout: float = 10.0) -> int:
        """Store and index what was submitted, for at most `timeout` seconds (what is left of
        `server.shutdown_timeout`); past it, store no more turns (the one being stored is
        finished, as is an indexing pass under way): the journal keeps the rest for the next
        start. The log's last line says which it was. Returns how many turns are lost:
        neither stored nor journaled (the journal could not be written)."""
        self._stopping = True
        done = False
        if self._task is not None:
            done = await self.flush(timeout=timeout)
            self._turns.halted = True
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        lost = 0
        if self.unjournaled:
            try:
                self._turns.journal_held()
            except OSError:
                lost = self.unjournaled
        if self._indexer is not None:
            self._indexer.shutdown(wait=True)
        say_stopped(
            done or (self.pending == 0 and self.problem is None),
            lost,
            self.pending,
            self._progress.unstored,
            self.problem,
            self._task is not None,
            logger,
        )
        return lost

    def submit(self, turn: Turn) -> str | None:
        """Make a finished turn durable in the journal and queue it. Never raises.

        Returns None, or what went wrong for this turn, for its own response to say: a
        journal that cannot be written (the turn is then held in RAM until stored).
        """
        self._progress.submit()
        self._recent.add(turn, self._progress.submitted)
        error = self._turns.add(turn)
        self._wakeup.set()
        return error

    def session_with(self, user_id: str, hashes: Collection[str]) -> str | None:
        """The session of a turn not yet stored that holds one of these messages
        (`TurnQueue.session_with`)."""
        return self._turns.session_with(user_id, hashes)

    async def flush(self, timeout: float | None = None) -> bool:
        """Wait until every turn submitted so far is stored and indexed, and found by its words
        too (a pass under a backlog may hold the lexical commit back while later turns wait);
        False on timeout, and once an indexing pass fails (its turns stay `pending`, not found
        by recall yet: `problem` says why; a flush does not hang on a model or an index that
        keeps failing)."""
        target = self._progress.submitted
        self._wakeup.set()
        if not await self._progress.reached(target, timeout):
            return False
        try:
            await anyio.to_thread.run_sync(self._layer.make_searchable)
        except Exception as exc:  # the lexical index: stored, but not found by their words
            self._health.failed("index", exc, traceback=True)
            return False
        return self._health.failing("index") is None

    async def searchable(
        self,
        user_id: str,
        session_id: str,
        continues: str | None,
        messages: Sequence[Mapping[str, Any]],
        timeout: float,
    ) -> int | None:
        """Wait, `timeout` seconds at most, until recall finds every finished turn of
        `user_id` that a request in `session_id` does not carry (proxy/writer_recent.py):
        None when there was none to wait for, else how many it still cannot find."""
        awaited = self._recent.awaited(user_id, session_id, continues, messages)
        if not awaited:
            return None
        place = awaited[-1]
        self._wakeup.set()
        # the writer starts once the model is loaded (a first start: seconds), these turns
        # its first: wait it all; not while a part fails, nor behind a backlog the writer
        # would not index in time at its pace (the journal a previous process left, which it
        # replays first, too): the answer comes now, saying what recall missed
        loading = self._task is None and not self._stopping
        waits = (loading or self._task is not None) and self._health.problem is None
        expected = self._progress.seconds_until(place)
        # nor past thrice that (2 s at least: one turn may be a whole history): a stalled writer
        # (a store another process holds locked) would otherwise hold each the whole wait
        limit = timeout if loading else min(timeout, max(2.0, 3 * expected))
        if waits and expected <= timeout and await self._progress.reached(place, limit):
            try:  # found by their words too (a pass under a backlog holds the commit back)
                await anyio.to_thread.run_sync(self._layer.make_searchable)
            except Exception:  # the index's failure is the writer's and flush's to report
                logger.debug("lexical commit before a recall failed", exc_info=True)
            return 0
        return sum(1 for turn in awaited if turn > self._progress.indexed)

    def forget(self, user_id: str) -> None:
        """Remove a forgotten user's turns from the journal, which may still hold them once
        stored (it is emptied only when the queue is), so no replay stores them again.
        Synchronous on the event loop, as `submit` and the journal's tidying are: no append
        slips in between. A journal that cannot be rewritten counts as failing. Requests of
        theirs under way now are not to be stored either (`forgotten_since`)."""
        self._forgotten.add(user_id)
        self._turns.forget(user_id)
        self._recent.forget(user_id)

    def forget_session(self, user_id: str, session_id: str) -> None:
        """`forget`, for one session of the user: its turns out of the journal, and requests
        of it under way now not stored (`forgotten_since` with their session)."""
        self._forgotten.add((user_id, session_id))
        self._turns.forget(user_id, session_id)

    def forget_mark(self) -> int:
        """A mark of this moment, taken as a request arrives (`forgotten_since`)."""
        return self._forgotten.mark()

    def forgotten_since(self, user_id: str, mark: int, session_id: str | None = None) -> bool:
        """Whether `user_id` (or their `session_id`) was forgotten after `forget_mark` gave
        `mark`: the turn of a request that arrived before is not stored (a reply streaming
        while its user was forgotten would bring back, when it ends, the whole history its
        request resent; proxy/writer_forgotten.py)."""
        if self._forgotten.forgotten_since(user_id, mark):
            return True
        return session_id is not None and self._forgotten.forgotten_since(
            (user_id, session_id), mark
        )

    def scrub_soon(self) -> None:
        """Wake the writer after a user was forgotten: once no turn waits, it erases their
        words from the database's files (memory/store/scrub.py) before tidying the index."""
        self._wakeup.set()

    # -- the loop ------------------------------------------------------------------------------

    async def _run(self) -> None:
        retry: float | None = None  # after a failed cycle, seconds until the next try
        while True:
            await self._wait(retry)
            self._wakeup.clear()
            while True:
                started, indexed = time.monotonic(), self._progress.indexed
                await self._turns.drain()
                worked = await self._index(_BATCH)
                await self._advance(failed=worked is None)
                self._progress.worked(time.monotonic() - started, indexed)
                if not worked:  # nothing left (or indexing failed): wait for new turns
                    break
            self._health.recovered("task")
            if self._health.problem is not None or self._turns.journal_only:
                retry = min(2 * retry, _RETRY_MAX) if retry else _RETRY_FIRST
            elif self._layer.shared and self._progress.pending:
                retry = _OTHERS_POLL  # another replica indexes what our turns wait behind
            else:
                retry = None
            await self._tidy()

    def _crashed(self, exc: Exception) -> None:
        """The loop raised (a bug): count it; the restarted loop reads the journal again."""
        self._health.failed("task", exc)
        self.restarts += 1
        self._turns.reread_journal()
        self._wakeup.set()

    async def _wait(self, timeout: float | None) -> None:
        """Until a turn is submitted; after a failed cycle, `timeout` seconds at most, so a
        turn whose store failed (a lock another process held) is stored once the store is
        back, not only when the next turn arrives."""
        try:
            await asyncio.wait_for(self._wakeup.wait(), timeout)
        except TimeoutError:
            pass

    async def _advance(self, failed: bool) -> None:
        """Count as indexed every stored turn whose messages all are (see writer_progress); a
        failed pass leaves its turns pending, and says so to a flush waiting on them. So does
        a failure to read how far indexing got, counted under "index": a flush then answers
        503 with why (the contract's "storing or indexing fails"), not 504 as if it were late."""
        if not failed:
            try:
                _, oldest = await anyio.to_thread.run_sync(self._layer.index_frontier)
            except TRANSIENT as exc:
                self._health.failed("index", exc)
                failed = True  # not known to be indexed: still pending
            else:
                self._health.recovered("index")  # indexed, and known to be
                await self._progress.indexed_below(oldest)
                self._recent.indexed(self._progress.indexed)
        if failed:
            await self._progress.pass_failed()

    async def _tidy(self) -> None:
        """Merge the FTS index while no turn waits and the writer is not stopping."""
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self._indexer, self._layer.tidy_index, self._busy)
        except Exception:  # upkeep only: nothing is lost, the next idle time tries again
            logger.exception("FTS index merge failed")

    def _busy(self) -> bool:
        return bool(len(self._turns)) or self._stopping

    async def _index(self, batch: int) -> int | None:
        """Index one pass of at most `batch` messages on the indexing thread: how many were
        worked on, or None when it failed (logged, counted, retried next cycle)."""
        loop = asyncio.get_running_loop()
        try:
            work = self._layer.index_pending
            worked = int(await loop.run_in_executor(self._indexer, work, batch, 1))
            if worked == 0:  # no turn waits: re-embed a batch after a change of model
                rebuild = self._layer.rebuild_vectors
                worked = int(await loop.run_in_executor(self._indexer, rebuild))
        except Exception as exc:  # the model, the store: the messages wait in SQLite
            self._health.failed("index", exc, traceback=True)
            return None
        return worked  # "index" recovers once `_advance` knows how far it got
