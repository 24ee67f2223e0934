"""What is failing in the write path right now: the writer's side of readiness and `/metrics`.

The writer (proxy/writer.py, its queue proxy/writer_queue.py) reports each failure under the
part of the write path it hit, and each recovery:

    journal   appending a turn, emptying or trimming the journal (a full disk, EIO, a path
              that is no longer a writable file)
    store     storing a turn in SQLite (a lock held past `busy_timeout`, a full disk)
    index     chunking or embedding (the model failing)
    task      the writer's own task crashed and is being restarted
    content   a turn no retry could store (text that is not valid Unicode): counted only,
              it is dropped and the writer goes on

While any part is failing the writer is not healthy: `/health/readiness` answers 503 with
the reason and `moim_writer_up` is 0. One exception: on a store shared by replicas
(PostgreSQL), the database being unreachable (`StoreUnavailable` while storing or indexing)
is every replica's failure, not this one's, and readiness stays 200 ("degraded"): a balancer
that drained every replica at once would stop chat, which goes on without memory meanwhile.

A part recovers when the operation that failed succeeds again (the journal: when a write to
it does). The first failure of a part is logged at ERROR, repeats at most once a minute, the
recovery at WARNING.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from memory import MemoryLayerError, StoreUnavailable, describe

logger = logging.getLogger(__name__)

# While a part keeps failing, its failures are logged at most this often (seconds).
_LOG_EVERY = 60.0
# The parts of the write path that reach the store, and what its being unreachable is called.
_STORE_PARTS = ("store", "index")
_UNREACHABLE = StoreUnavailable.__name__


@dataclass(frozen=True, slots=True)
class Failing:
    """One part of the write path that failed and has not worked since."""

    part: str
    error: str  # the exception's kind, never its text: it may hold a path
    since: float  # time.monotonic() of the first failure
    logged: float  # time.monotonic() it was last logged


class WriterHealth:
    def __init__(self) -> None:
        self._failing: dict[str, Failing] = {}
        self.counts: Counter[str] = Counter()  # failures so far, by part

    @property
    def failures(self) -> int:
        """Every failure so far, of every part (moim_memory_write_failures_total)."""
        return sum(self.counts.values())

    def count(self, part: str, failures: int = 1) -> None:
        """Count failures that leave nothing failing (a turn dropped for its content)."""
        self.counts[part] += failures

    def failed(self, part: str, exc: BaseException, traceback: bool = False) -> str:
        """Note a failure of `part`; return a one-line description without paths.

        `traceback` logs the exception's, unless it is one the memory layer raises on purpose
        (the store, the embedder: its line says it all; an unreachable embedding service
        printed 30 lines of frames at every retry's log line)."""
        self.counts[part] += 1
        now = time.monotonic()
        error = describe(exc)
        before = self._failing.get(part)
        if before is None or now - before.logged >= _LOG_EVERY:
            logger.error(
                "memory writer: %s failed (%s: %s); turns are kept and retried",
                part,
                type(exc).__name__,
                exc,
                exc_info=exc if traceback and not isinstance(exc, MemoryLayerError) else None,
            )
            logged = now
        else:
            logged = before.logged
        self._failing[part] = Failing(part, error, before.since if before else now, logged)
        return f"memory {part} failed ({error})"

    def recovered(self, part: str) -> None:
        """`part` worked again (nothing happens when it was not failing)."""
        before = self._failing.pop(part, None)
        if before is not None:
            seconds = time.monotonic() - before.since
            logger.warning("memory writer: %s works again after %.1f s", part, seconds)

    def failing(self, part: str) -> Failing | None:
        return self._failing.get(part)

    @property
    def problem(self) -> str | None:
        """What is failing, for `/health/readiness` (None when nothing is)."""
        return _described(self._failing.values())

    def local_problem(self, store_shared: bool) -> str | None:
        """What is failing that makes this process unready: all of `problem`, but for the
        store being unreachable when it is `store_shared` by replicas (None when nothing is)."""
        return _described(
            f
            for f in self._failing.values()
            if not (store_shared and f.part in _STORE_PARTS and f.error == _UNREACHABLE)
        )


def _described(failing: Iterable[Failing]) -> str | None:
    """The failing parts in one line, the oldest failure first (None when there is none)."""
    now = time.monotonic()
    lines = [
        f"{f.part} failing for {now - f.since:.0f} s ({f.error})"
        for f in sorted(failing, key=lambda f: f.since)
    ]
    return "; ".join(lines) or None


def say_stopped(
    done: bool,
    lost: int,
    pending: int,
    unstored: int,
    failing: str | None,
    started: bool,
    logger: logging.Logger,
) -> None:
    """The writer's last log line: what a stop left (`pending` turns not yet indexed, of
    them `unstored` not stored, `lost` neither stored nor journaled), and where it is."""
    if done and not lost:
        logger.info("memory writer stopped: every finished turn is stored and indexed")
        return
    if not lost and failing is not None and unstored == 0:  # stored, the indexing failed
        logger.warning(
            "memory writer stopped: every finished turn is stored, %d not yet indexed "
            "(%s): the next start indexes the rest",
            pending,
            failing,
        )
        return
    when = (
        "at the shutdown timeout (server.shutdown_timeout)"
        if started
        else "before it started (the embedding model was loading)"
    )
    reason = f" ({failing})" if failing else ""
    if lost:
        logger.error(
            "memory writer stopped %s with %d turns not yet stored or indexed%s, %d of "
            "them lost: neither stored nor journaled",
            when,
            pending,
            reason,
            lost,
        )
        return
    logger.warning(
        "memory writer stopped %s with %d turns not yet stored or indexed%s: the journal "
        "keeps those not stored, and the next start stores and indexes them",
        when,
        pending,
        reason,
    )
