"""How far the writer (proxy/writer.py) has got: turns submitted, stored and indexed.

`pending` in `/v1/memory/stats` and `/metrics` is submitted minus indexed, and `flush` waits
until indexed reaches what was submitted when it was called, or an indexing pass fails (its
turns stay pending: indexed is never counted ahead of SQLite). They are counts, not turn
identities. Each stored turn leaves a mark: how many turns were stored then, and the newest
message id then. Indexing goes oldest message first (a large message a slice at a time), so
once the oldest message not yet indexed is past a mark's id, every turn stored by then is
indexed. Recovery (storing what a previous process left in the journal) counts as the first
units of work, one per turn the journal holds (one when it holds none), so `flush` waits for
it and `pending` counts the turns a crash left unstored.
"""

from __future__ import annotations

import asyncio
from collections import deque

# The mark of a turn whose newest message id could not be read: done when all is indexed.
UNKNOWN = 1 << 62
# What a turn is taken to cost the writer before it has indexed any (a short chat turn's
# two messages on one core take ~25-50 ms), and the weight of each new pass's figure.
_FIRST_SECONDS_PER_TURN = 0.05
_NEWEST_WEIGHT = 0.3


class Progress:
    def __init__(self, recovering: int = 0) -> None:
        # recovery is the first units of work: the turns the journal holds, or one
        self.submitted = max(recovering, 1)
        self._stored = 0
        self._indexed = 0
        self._marks: deque[tuple[int, int]] = deque()  # (turns stored, newest message id)
        self._failed_passes = 0  # indexing passes that failed: a flush waits for no more
        self._changed = asyncio.Condition()
        # seconds of the writer's work a turn took lately, and the work not yet paid for by a
        # turn counted indexed (a large turn is indexed a slice a pass)
        self.seconds_per_turn = _FIRST_SECONDS_PER_TURN
        self._unpaid = 0.0

    @property
    def pending(self) -> int:
        """Turns received but not yet stored and indexed."""
        return self.submitted - self._indexed

    @property
    def indexed(self) -> int:
        """How many of the turns submitted first are stored and indexed."""
        return self._indexed

    @property
    def unstored(self) -> int:
        """Turns received but not yet stored (the rest of `pending` waits to be indexed)."""
        return self.submitted - self._stored

    def submit(self) -> None:
        self.submitted += 1

    def stored(self, newest: int) -> None:
        """One more turn is stored, its messages' ids up to `newest` (0: nothing to index)."""
        self._stored += 1
        self._marks.append((self._stored, newest))

    def stored_all(self, count: int, newest: int) -> None:
        """The first `count` turns submitted are all stored (a journal replay stored them),
        their messages' ids up to `newest`."""
        self._stored = max(self._stored, count)
        self._marks.append((self._stored, newest))

    async def indexed_below(self, oldest: int | None) -> None:
        """Every message with an id below `oldest` is indexed (None: every message)."""
        while self._marks and (oldest is None or self._marks[0][1] < oldest):
            indexed = self._marks.popleft()[0]
            async with self._changed:
                self._indexed = max(self._indexed, indexed)
                self._changed.notify_all()

    def worked(self, seconds: float, indexed_before: int) -> None:
        """A cycle of the writer (store, one indexing pass) took `seconds`, starting with
        `indexed_before` turns indexed: update what a turn costs it lately."""
        self._unpaid += seconds
        done = self._indexed - indexed_before
        if done > 0:
            cost = self._unpaid / done
            self.seconds_per_turn += _NEWEST_WEIGHT * (cost - self.seconds_per_turn)
            self._unpaid = 0.0

    def seconds_until(self, target: int) -> float:
        """About how long until `target` turns are indexed, at the writer's recent pace."""
        return max(0, target - self._indexed) * self.seconds_per_turn

    async def pass_failed(self) -> None:
        """An indexing pass failed: its turns stay pending (their messages wait in SQLite for
        the next pass), and a flush waiting on them returns rather than hang on a model or an
        index that keeps failing."""
        async with self._changed:
            self._failed_passes += 1
            self._changed.notify_all()

    async def reached(self, target: int, timeout: float | None) -> bool:
        """Wait until `target` turns are indexed; False when `timeout` seconds pass first, or
        when an indexing pass fails first."""
        failed = self._failed_passes

        async def indexed() -> None:
            async with self._changed:
                await self._changed.wait_for(
                    lambda: self._indexed >= target or self._failed_passes > failed
                )

        try:
            await asyncio.wait_for(indexed(), timeout)
        except TimeoutError:
            return False
        return self._indexed >= target
