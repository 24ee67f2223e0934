"""Step 7's driver: one background writer that stores and indexes turns, off the request path.

Responses hand their finished turn to `submit`, which never blocks. One task drains the
queue and runs `MemoryLayer.remember` in a worker thread, so SQLite has one writer and the
event loop never waits on it. `flush` returns once every turn submitted before the call is
stored and indexed.

When the queue is full (a burst beyond `ingest_queue_size` turns), a turn is stored by a
thread of its own without waiting for the queue; its indexing then happens with the next
turn, or at the next start, from the message log. A turn is never dropped.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque

import anyio.to_thread

from memory import MemoryLayer, MemoryLayerError, Turn

logger = logging.getLogger(__name__)


class Writer:
    def __init__(self, layer: MemoryLayer, maxsize: int = 10_000) -> None:
        self._layer = layer
        self._queue: deque[Turn] = deque()
        self._maxsize = maxsize
        self._wakeup = asyncio.Event()
        self._progress = asyncio.Condition()
        self._submitted = 0
        self._stored = 0
        self._indexed = 0
        self._task: asyncio.Task[None] | None = None
        self.failures = 0
        self.last_error: str | None = None
        self.overflow = 0

    @property
    def pending(self) -> int:
        """Turns received but not yet stored and indexed."""
        return self._submitted - self._indexed

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="moim-writer")
        # Work a crash interrupted is resumed from the message log.
        self._wakeup.set()

    async def stop(self) -> None:
        if self._task is not None:
            await self.flush(timeout=10.0)
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass

    def submit(self, turn: Turn) -> None:
        """Hand over a finished turn. Never blocks, never raises."""
        self._submitted += 1
        if len(self._queue) >= self._maxsize:
            self.overflow += 1
            asyncio.get_running_loop().run_in_executor(None, self._store_only, turn)
            self._stored += 1
            return
        self._queue.append(turn)
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
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            while self._queue:
                turn = self._queue.popleft()
                await self._guarded(self._layer.store_only, turn)
                self._stored += 1
            stored = self._stored
            await self._guarded(self._layer.index_pending)
            async with self._progress:
                self._indexed = stored
                self._progress.notify_all()

    async def _guarded(self, work: object, *args: object) -> None:
        started = time.perf_counter()
        try:
            await anyio.to_thread.run_sync(work, *args)  # type: ignore[arg-type]
        except MemoryLayerError as exc:
            self._fail(exc)
        except Exception as exc:  # a bug must not stop the writer: log, count, go on
            logger.exception("memory writer failed")
            self._fail(exc)
        logger.debug("writer step took %.1f ms", (time.perf_counter() - started) * 1000)

    def _fail(self, exc: BaseException) -> None:
        self.failures += 1
        self.last_error = f"{type(exc).__name__}: {exc}"[:200]
        logger.error("memory write failed: %s", self.last_error)

    def _store_only(self, turn: Turn) -> None:
        try:
            self._layer.store_only(turn)
        except Exception as exc:  # runs in a thread: nobody else would see it
            logger.exception("memory write failed")
            self._fail(exc)
