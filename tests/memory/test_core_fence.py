"""memory/core_fence.py: while a question's model runs, the beside threads keep off its core."""

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from memory import FastEmbedder, core_fence
from memory.core_fence import _Fence

CORES = frozenset(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else frozenset()
pytestmark = pytest.mark.skipif(
    len(CORES) < 2 or core_fence._core_reader() is None,
    reason="needs a thread's core and affinity (Linux) and two cores",
)


@contextmanager
def on_core(core: int) -> Iterator[None]:
    """The calling thread pinned to `core` (so the core a run is on is known)."""
    os.sched_setaffinity(0, {core})
    try:
        yield
    finally:
        os.sched_setaffinity(0, CORES)


@contextmanager
def beside_thread(fence: _Fence) -> Iterator[int]:
    """A thread that joined `fence` as a beside thread and waits; yields its native id."""
    joined, done = threading.Event(), threading.Event()

    def wait() -> None:
        fence.join()
        joined.set()
        done.wait()

    thread = threading.Thread(target=wait)
    thread.start()
    joined.wait()
    try:
        assert thread.native_id is not None
        yield thread.native_id
    finally:
        done.set()
        thread.join()


def enabled() -> _Fence:
    fence = _Fence()
    fence.enable()
    return fence


def test_a_question_run_keeps_a_beside_thread_off_its_core_then_gives_it_back():
    fence = enabled()
    core = min(CORES)
    with beside_thread(fence) as tid, on_core(core):
        assert os.sched_getaffinity(tid) == CORES
        with fence.run():
            assert os.sched_getaffinity(tid) == CORES - {core}
        assert os.sched_getaffinity(tid) == CORES


def test_runs_on_every_core_leave_the_beside_threads_every_core():
    fence = enabled()
    first, second = sorted(CORES)[:2]
    inside, leave = threading.Barrier(3), threading.Event()

    def run_on(core: int) -> None:
        with on_core(core), fence.run():
            inside.wait()
            leave.wait()

    with beside_thread(fence) as tid:
        runs = [threading.Thread(target=run_on, args=(c,)) for c in (first, second)]
        for run in runs:
            run.start()
        inside.wait()
        try:
            assert os.sched_getaffinity(tid) == (CORES - {first, second} or CORES)
        finally:
            leave.set()
            for run in runs:
                run.join()
        assert os.sched_getaffinity(tid) == CORES


def test_a_beside_thread_that_runs_a_question_keeps_its_own_core():
    fence = enabled()
    core = min(CORES)
    fence.join()  # this thread runs beside others' questions, and now runs one itself
    with on_core(core), fence.run():
        assert os.sched_getaffinity(0) == {core}  # what on_core gave it, not CORES - {core}


def test_off_until_enabled():
    fence = _Fence()
    with beside_thread(fence) as tid, on_core(min(CORES)), fence.run():
        assert os.sched_getaffinity(tid) == CORES


def test_a_beside_thread_that_ended_is_forgotten():
    fence = enabled()
    with beside_thread(fence):
        pass
    with on_core(min(CORES)), fence.run():  # its id may be another thread's by now: untouched
        pass
    assert fence._beside == {}


def test_the_embedder_runs_a_question_inside_the_fence():
    embedder = FastEmbedder()
    core_fence.fence_question_runs()
    core = min(CORES)
    seen: list[frozenset[int]] = []
    asked = threading.Event()

    def watch() -> None:  # a beside thread reading its own cores while questions run
        core_fence.runs_beside()
        while not asked.is_set():
            seen.append(frozenset(os.sched_getaffinity(0)))
            time.sleep(0.0005)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        with on_core(core):
            for i in range(50):  # the watcher reads whenever a run lets the GIL go
                embedder.embed_query_words(f"where did we go hiking in week {i}?")
                if CORES - {core} in seen:
                    break
    finally:
        asked.set()
        watcher.join()
    assert CORES - {core} in seen
