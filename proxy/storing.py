"""Storing turns in SQLite for the writer (proxy/writer.py), and which failures to retry.

`store_run` runs in a worker thread and stores turns one by one, one transaction each
(`MemoryLayer.store_only`), until one fails for a reason that can pass: the store's own
errors (`MemoryLayerError`: a lock held past `busy_timeout`, a full disk) and `OSError`.
The writer keeps that turn and the ones after it and tries again later. Anything else a
store raises comes from the turn's content (text that is not valid Unicode): no retry could
store it, so the turn is dropped, logged with its traceback, and counted. A stop past
`server.shutdown_timeout` cuts a run short between two turns (`HALTED`): the rest stay in
the journal for the next start.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from memory import MemoryLayer, MemoryLayerError, Turn

logger = logging.getLogger(__name__)

# What a store raises when trying again may succeed.
TRANSIENT = (MemoryLayerError, OSError)
# The progress mark of a dropped turn: nothing of it waits to be indexed.
DROPPED = 0
# The part a run reports when a stop cut it short: not a failure, nothing to retry now.
HALTED = "halted"


@dataclass(frozen=True, slots=True)
class Stored:
    """What storing a run of turns did: per turn taken (stored or dropped) its progress mark
    (the newest message id once it was stored), then the failure that stopped the run and
    the part of the write path it hit ("store", or "journal" when reading it failed)."""

    marks: list[int]
    error: Exception | None = None
    part: str = "store"

    @property
    def dropped(self) -> int:
        return self.marks.count(DROPPED)


def store_run(
    layer: MemoryLayer, turns: Iterable[Turn], halted: Callable[[], bool] = lambda: False
) -> Stored:
    """Store `turns` in order until one fails for a reason that may pass, or `halted()` says
    a stop ran out of time (part `HALTED`, no error). `turns` may be a journal being read
    (`Journal.turns`): an OSError reading it stops the run too, and so does the store failing
    under it (a replica's journal rows in an unreachable PostgreSQL: the writer's loop
    crashed on it, and readiness said its task failed, not the store)."""
    marks: list[int] = []
    source = iter(turns)
    while True:
        if halted():
            return Stored(marks, None, HALTED)
        try:
            turn = next(source, None)
        except OSError as exc:
            return Stored(marks, exc, "journal")
        except MemoryLayerError as exc:  # a replica's journal rows in PostgreSQL, unreachable
            return Stored(marks, exc, "store")
        if turn is None:
            return Stored(marks)
        try:
            marks.append(_store_one(layer, turn))
        except TRANSIENT as exc:
            return Stored(marks, exc, "store")


def _store_one(layer: MemoryLayer, turn: Turn) -> int:
    """Store a turn: its progress mark, or `DROPPED` (logged) when its content is refused."""
    try:
        layer.store_only(turn)
    except TRANSIENT:
        raise
    except Exception:  # the turn's own content: no retry can store it
        logger.exception("memory write failed: a turn that cannot be stored was dropped")
        return DROPPED
    newest, _ = layer.index_frontier()
    return newest
