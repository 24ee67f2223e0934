"""The writer's intake (proxy/writer.py): turns received and not yet stored, and storing them.

A finished turn is appended to the write-ahead journal (an append to a file, no database) and
queued in RAM; `drain` stores the queued turns in SQLite (`MemoryLayer.store_only`, in a worker
thread), then whatever only the journal holds, and tidies the journal. The writer's loop
alternates a drain with an indexing pass; the indexing, the loop and what it reports stay in
`proxy/writer.py`.

Back-pressure: the queue holds at most `maxsize` turns. Past that, turns go to the journal
only (RAM stays bounded) and are stored from it when the queue has drained; `spilled`
counts them and `queue_peak` is the most the queue has held (both in `/metrics`).

Failures (proxy/writer_health.py names the parts):

- A turn leaves the queue only once it is stored. A store that fails for a reason that can
  pass (a lock held past `busy_timeout`, a full disk: `MemoryLayerError`, `OSError`) leaves
  it and the turns after it queued, for the writer's next cycle. A turn SQLite refuses for
  what it holds (text that is not valid Unicode) is dropped, logged and counted (`dropped`):
  no retry could store it.
- A turn whose journal append fails is queued whatever the queue's size and held in RAM
  until stored; `add` returns the error, for that turn's own response (`x-memory-error`) and
  no other. Once the journal takes writes again, held turns are written to it.
- A journal that cannot be emptied keeps turns already stored (storing them again is
  harmless); the next drain tries again.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections import deque
from collections.abc import Collection, Iterable
from contextlib import closing
from dataclasses import dataclass, replace

import anyio.to_thread

from memory import Journal, MemoryLayer, Turn, content_hash
from proxy.store_file import StoreFile
from proxy.storing import HALTED, TRANSIENT, Stored, store_run
from proxy.writer_health import WriterHealth
from proxy.writer_progress import UNKNOWN, Progress

logger = logging.getLogger(__name__)

# Past this size the journal is cut down to the turns still queued (see Journal.keep_last).
_JOURNAL_TRIM_BYTES = 4 * 1024 * 1024


def left_in(journal: Journal) -> int:
    """The turns a previous process left in the journal, counted before this one serves a
    request (so none of its own are among them; a replica's `pending_turns` rows are none, its
    liveness key being new). A journal that cannot be read counts none here; its replay says
    why."""
    try:
        return journal.count()
    except OSError:
        return 0


@dataclass(frozen=True, slots=True)
class _Held:
    """A queued turn: whether the journal holds it, and when it was submitted."""

    turn: Turn
    journaled: bool
    since: float  # time.monotonic()


class TurnQueue:
    """Turns not yet stored: queued in RAM and journaled, or in the journal only."""

    def __init__(
        self,
        layer: MemoryLayer,
        journal: Journal,
        maxsize: int,
        progress: Progress,
        health: WriterHealth,
        left: int = 0,
    ) -> None:
        self._layer = layer
        self._left = left  # turns a previous process left in the journal (`left_in`)
        self._journal = journal
        self._queue: deque[_Held] = deque()
        self._maxsize = maxsize
        self._progress = progress
        self._health = health
        # Since when turns are in the journal that the queue does not hold (None: none are).
        self._journal_only_since: float | None = time.monotonic()
        self.replayed = False  # what a previous process left in the journal is stored
        self.spilled = 0  # turns that went to the journal only, the queue being full
        self.queue_peak = 0  # the most turns the queue has held at once
        self.dropped = 0  # turns SQLite refused for their content
        self.halted = False  # a stop ran out of time: store no more turns (see `store_run`)
        self._file = StoreFile(layer)  # stores into a removed database file are lost

    # -- what it holds -----------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._queue)

    @property
    def capacity(self) -> int:
        return self._maxsize

    @property
    def unjournaled(self) -> int:
        """Queued turns the journal does not hold: a crash now would lose them."""
        return sum(1 for held in self._queue if not held.journaled)

    @property
    def journal_only(self) -> bool:
        """The journal holds turns the queue does not (a spill, a restart, a crashed loop)."""
        return self._journal_only_since is not None

    def oldest_unstored_seconds(self) -> float:
        """How long the oldest turn not yet in SQLite has waited (0 when none waits)."""
        times = [held.since for held in itertools.islice(self._queue, 1)]
        if self._journal_only_since is not None:
            times.append(self._journal_only_since)
        return time.monotonic() - min(times) if times else 0.0

    def session_with(self, user_id: str, hashes: Collection[str]) -> str | None:
        """The session of `user_id`'s newest queued turn holding a message with one of these
        content hashes: the conversation a request continues may not be stored yet
        (`MemoryLayer.continue_session`). Called from worker threads, so it reads a copy."""
        wanted = set(hashes)
        for held in reversed(self._queue.copy()):
            turn = held.turn
            if turn.user_id != user_id:
                continue
            said = [*turn.messages, *([turn.reply] if turn.reply is not None else [])]
            if any(content_hash(message) in wanted for message in said):
                return turn.session_id
        return None

    # -- taking turns in -----------------------------------------------------------------------

    def add(self, turn: Turn) -> str | None:
        """Journal a turn and queue it (the journal only, when the queue is full). Never
        raises: None, or what went wrong for this turn (its response says it)."""
        error = None
        try:
            self._journal.append(turn)
        except OSError as exc:  # a full disk, EIO, a path that is no longer a writable file
            error = self._health.failed("journal", exc) + ": this turn is held in RAM until stored"
        except ValueError as exc:  # text that is not valid Unicode: SQLite will refuse it too
            self._health.count("content")
            error = f"memory write failed ({type(exc).__name__}): this turn cannot be stored"
        if error is None and len(self._queue) >= self._maxsize:
            self.spilled += 1
            self._journal_only_since = self._journal_only_since or time.monotonic()
        else:
            if error is None and turn.messages_json is not None:  # journaled: not held twice
                turn = replace(turn, messages_json=None)
            self._queue.append(_Held(turn, error is None, time.monotonic()))
            self.queue_peak = max(self.queue_peak, len(self._queue))
        return error

    def reread_journal(self) -> None:
        """Read the whole journal at the next drain (the writer's loop crashed and restarts)."""
        self._journal_only_since = self._journal_only_since or time.monotonic()

    def forget(self, user_id: str, session_id: str | None = None) -> None:
        """Remove a forgotten user's turns (of one session, when named) from the journal (see
        `Writer.forget`)."""
        try:
            self._journal.drop_user(user_id, session_id)
        except OSError as exc:
            self._health.failed("journal", exc)

    # -- storing -------------------------------------------------------------------------------

    async def drain(self) -> None:
        """Store the queued turns, then whatever only the journal holds; tidy the journal."""
        failed = await self._store_queued()
        if failed is None and self._journal_only_since is not None:
            failed = await self._replay()
        if failed != "store":
            self._health.recovered("store")
        self._tidy_journal()

    async def _store_queued(self) -> str | None:
        """Store the turns queued when the drain starts, oldest first, each leaving the queue
        once stored; None, or the part that failed (the failed turn and the rest stay).

        Only those turns: under sustained load new turns keep arriving, and draining "until
        empty" would never get to indexing.
        """
        turns = [held.turn for held in itertools.islice(self._queue, len(self._queue))]
        if not turns:
            return None
        outcome = await self._store(turns)
        for mark in outcome.marks:
            self._queue.popleft()
            self._progress.stored(mark)
        return self._account(outcome)

    async def _replay(self) -> str | None:
        """Store every turn in the journal (those stored already are skipped: idempotent);
        None, or the part that failed. The queued turns it holds are then stored too and
        leave the queue; those whose append failed stay."""
        # Lowered before the journal is read: a turn that spills meanwhile raises it again.
        since, self._journal_only_since = self._journal_only_since, None
        submitted, queued = self._progress.submitted, len(self._queue)
        with closing(self._journal.turns()) as turns:  # read as stored: one turn in RAM
            outcome = await self._store(turns)
        failed = self._account(outcome)
        if failed is not None:
            self._journal_only_since = since
            return failed
        kept = [held for held in itertools.islice(self._queue, queued) if not held.journaled]
        for _ in range(queued):
            self._queue.popleft()
        self._queue.extendleft(reversed(kept))
        try:
            newest, _ = await anyio.to_thread.run_sync(self._layer.index_frontier)
        except TRANSIENT:  # the store is failing: these turns wait for everything indexed
            newest = UNKNOWN
        self._progress.stored_all(submitted - len(kept), newest)
        if not self.replayed and self._left:  # what a crash left: the operator is told
            logger.info(
                "journal replayed: %d turns a previous run left in %s are stored",
                self._left,
                self._journal.path,
            )
        self.replayed = True
        return None

    async def _store(self, turns: Iterable[Turn]) -> Stored:
        """`store_run` in a worker thread; a run into a database file no longer at its path
        (proxy/store_file.py) stored nothing that will last: it failed, whole."""
        outcome = await anyio.to_thread.run_sync(store_run, self._layer, turns, self._halted)
        # A run that failed is asked too: a thread that connects after the file is gone
        # cannot open it (memory/store/database.py), and the reason is the file, not SQLite.
        lost = self._file.problem() if outcome.marks or outcome.error is not None else None
        return outcome if lost is None else Stored([], lost, "store")

    def _halted(self) -> bool:
        return self.halted

    def _account(self, outcome: Stored) -> str | None:
        self.dropped += outcome.dropped
        self._health.count("content", outcome.dropped)
        if outcome.part == HALTED:
            return HALTED  # not stored, not failing: the journal keeps the rest
        if outcome.error is None:
            return None
        self._health.failed(outcome.part, outcome.error)
        return outcome.part

    def _tidy_journal(self) -> None:
        """Empty the journal once everything in it is stored, or cut it down when it has
        grown; while it is failing, write to it again. A failure here leaves stored turns
        in it (storing them again is harmless) and is tried again next cycle."""
        try:
            whole = self._journal_only_since is None  # every turn in it is stored or queued
            if whole and not self._queue:
                self._journal.clear()  # no await since the check: no append slips in between
            elif whole and self._journal.size() > _JOURNAL_TRIM_BYTES:
                self._journal.keep_last(len(self._queue))  # at least the queued turns
            if self._health.failing("journal") is not None:
                self.journal_held()
        except OSError as exc:
            self._health.failed("journal", exc)
        else:
            self._health.recovered("journal")

    def journal_held(self) -> None:
        """Write to the journal: an empty line, then the held turns it lacks. Raises OSError
        while it still cannot be written."""
        self._journal.probe()
        for index in range(len(self._queue)):
            held = self._queue[index]
            if not held.journaled:
                try:
                    self._journal.append(held.turn)
                except ValueError:
                    continue  # text that is not valid Unicode: held until SQLite drops it
                self._queue[index] = replace(held, journaled=True)
