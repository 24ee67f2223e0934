"""A question's model run keeps its core: moim's other Python threads stay off it (Linux).

A question's onnxruntime run (~4.5 ms, `memory/embedding.py`) lets the GIL go, and a thread
that was waiting for it (the lexical side, the loop's worker, the event loop) was woken onto
the run's own core and took it, while the other core ran something else: inside the proxy the
run was preempted ~2.2 times against ~0.6 alone, its wall ~1 ms longer for the same CPU
(docs/performance.md, "Seventeenth pass"). So while a question runs, the threads that said
they run Python beside it (`runs_beside`) may use every core of the process but the ones
question runs are on; when every core has one, they may use all, as before.

Off until the server turns it on (`fence_question_runs`: the memory package changes nothing
about a process that imports it). Nothing happens where the OS cannot tell a thread's core or
set its affinity (macOS, Windows), on one core, or once a call is refused.
"""

from __future__ import annotations

import ctypes
import logging
import os
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager

logger = logging.getLogger(__name__)


def _core_reader() -> Callable[[], int] | None:
    """glibc's / musl's `sched_getcpu` (Python 3.11 has no `os.sched_getcpu`), called with the
    GIL held (`PyDLL`): a call that let the GIL go would wake a waiting thread, the very
    hand-off this module keeps off the core. None where there is none."""
    if not hasattr(os, "sched_setaffinity"):
        return None
    try:
        getcpu = ctypes.PyDLL(None).sched_getcpu
    except (AttributeError, OSError):
        return None
    getcpu.restype, getcpu.argtypes = ctypes.c_int, []
    reader: Callable[[], int] = getcpu
    return reader


class _Fence:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cores: frozenset[int] | None = None  # the process's cores; None: off
        self._core_of: Callable[[], int] | None = None
        # Each beside thread and the cores it was last given (a thread starts with them all).
        self._beside: dict[threading.Thread, frozenset[int]] = {}
        self._held: Counter[int] = Counter()  # core -> question runs on it
        self._running: Counter[threading.Thread] = Counter()  # never fenced off its own core

    def enable(self) -> None:
        core_of = _core_reader()
        if core_of is None:
            return
        cores = frozenset(os.sched_getaffinity(0))
        if len(cores) < 2:
            return
        with self._lock:
            self._cores, self._core_of = cores, core_of
            self._beside = dict.fromkeys(self._beside, cores)

    def join(self) -> None:
        thread = threading.current_thread()
        if thread not in self._beside:
            with self._lock:
                self._beside.setdefault(thread, self._cores or frozenset())

    @contextmanager
    def run(self) -> Iterator[None]:
        core_of = self._core_of
        core = core_of() if core_of is not None and self._beside else -1
        if core < 0:
            yield
            return
        thread = threading.current_thread()
        with self._lock:
            self._held[core] += 1
            self._running[thread] += 1
            self._apply()
        try:
            yield
        finally:
            with self._lock:
                self._held -= Counter({core: 1})
                self._running -= Counter({thread: 1})
                self._apply()

    def _apply(self) -> None:
        """Give each beside thread the cores no question runs on (all when none is free); a
        thread running a question itself keeps what it has until its run ends."""
        cores = self._cores
        if cores is None:
            return
        allowed = (cores - self._held.keys()) or cores
        for thread, given in list(self._beside.items()):
            if given == allowed or thread in self._running:
                continue
            tid = thread.native_id
            if not thread.is_alive() or tid is None:
                del self._beside[thread]
                continue
            try:
                os.sched_setaffinity(tid, allowed)
            except ProcessLookupError:
                del self._beside[thread]
                continue
            except OSError:  # refused (a sandbox, a cpuset changed): give back, stop trying
                logger.debug("cannot set a thread's cores; the fence is off", exc_info=True)
                self._off(cores)
                return
            self._beside[thread] = allowed

    def _off(self, cores: frozenset[int]) -> None:
        self._cores = self._core_of = None
        for thread, given in self._beside.items():
            if given != cores and thread.native_id is not None:
                try:
                    os.sched_setaffinity(thread.native_id, cores)
                except OSError:
                    pass


_FENCE = _Fence()


def fence_question_runs() -> None:
    """From now on, a question's model run keeps the beside threads off its core (the server
    calls it once; where the OS cannot, nothing changes)."""
    _FENCE.enable()


def runs_beside() -> None:
    """Say that the calling thread runs Python beside a question's model run (once is
    enough; cheap when said again)."""
    _FENCE.join()


def question_run() -> AbstractContextManager[None]:
    """While in it, the beside threads stay off the calling thread's core."""
    return _FENCE.run()
