"""Process-wide tuning that only the server does, in one place.

The memory package is a library and changes nothing about the process that imports it;
`moim serve` calls `tune_malloc()` first, before it opens the store, and the app's lifespan
calls `tune_process()` once, before the worker threads exist. Each setting says what it
changes and the measurement behind it:

- one BLAS thread for numpy's vector scans (threadpoolctl, at run time, so it no longer
  depends on an environment variable being set before numpy loads);
- at most two glibc malloc arenas (`memory.limit_arenas`), and a fixed mmap threshold
  (`memory.fix_mmap_threshold`);
- a 1 ms GIL switch interval;
- a bounded pool of anyio worker threads;
- no transparent huge pages for numpy's arrays;
- once the embedding model is loaded, the objects alive then kept out of the cyclic garbage
  collector's full passes (`freeze_startup_objects`).

Where moim relies on a dependency's internals (tiktoken's Python rank table in
`memory/block/tokens.py`, sqlite-vec's shadow tables in `memory/store/vector_table.py`,
numpy's huge-page switch here),
a test in `tests/proxy/test_runtime.py` pins the reliance and fails when it changes.
"""

from __future__ import annotations

import gc
import os
import sys

import anyio.to_thread
import threadpoolctl
from numpy._core.multiarray import _set_madvise_hugepage  # type: ignore[attr-defined]

from memory import fix_mmap_threshold, limit_arenas

# Recall runs its lexical search beside the dense scan; a two-thread OpenBLAS gemv on two busy
# cores measured 7.9 ms for a 10k x 384 scan against 0.7 ms with one thread.
BLAS_THREADS = 1
# How long a thread may hold the GIL while another waits for it (CPython: 5 ms). Recall and
# the writer run on worker threads and take the GIL back after every SQLite step, onnxruntime
# run and numpy call; with the event loop busy serving other requests, each take-back could
# wait the full interval. A 10k-chunk recall beside a busy Python thread: 51 ms p50 at 5 ms,
# 36 ms at 1 ms (docs/benchmarks.md, "Latency, throughput, load").
GIL_SWITCH_INTERVAL = 0.001
# Blocking work (recall, storing turns, the memory API) runs on anyio's worker threads, and
# each thread opens its own SQLite connection with its own page cache. anyio allows 40; on a
# small machine that many only contend for the cores and hold memory.
WORKER_THREADS = min(40, max(8, 4 * (os.cpu_count() or 1)))
# glibc arenas: 435 MB RSS by default against 304 MB with two (memory/heap.py).
MALLOC_ARENAS = 2
# Blocks from this size up are mapped on their own and returned when freed (memory/heap.py:
# 372 MB against 336 after 320 searches of a 100k-chunk user by 8 threads).
MMAP_THRESHOLD = 1 << 20
# numpy asks the kernel for 2 MB pages (madvise) for every array of 4 MB or more. A user's
# vectors grow in blocks of 4,096 rows (6 MB, memory/recall/vectors.py): the first row written
# into a new block made a whole huge page resident, so each small user that recalled and was
# then indexed cost ~1-2 MB instead of a few kB (32 such blocks with 40 rows each: +30 MB
# against +2). Gathering 2,000 float16 rows of 100k and scanning their codes measured the
# same either way (2.1-2.3 ms p50).
NUMPY_HUGE_PAGES = False


def tune_malloc() -> None:
    """glibc's arena limit and mmap threshold; call before any thread allocates.

    glibc gives each thread that allocates while no limit is set an arena of its own, up to
    eight, and a limit set later only stops new ones. `moim serve` opens the store before
    the app starts, and the lexical index's writer (tantivy) starts its threads there: set
    in the app's lifespan, the limit of two came after eight arenas existed, and every later
    thread shared those eight (docs/performance.md, "Load, tenth pass").
    """
    limit_arenas(MALLOC_ARENAS)
    fix_mmap_threshold(MMAP_THRESHOLD)


def tune_process() -> None:
    """Apply the server's process-wide settings; call once, in the event loop's thread."""
    tune_malloc()  # again, for an app started without `moim serve`: affects new threads
    threadpoolctl.threadpool_limits(BLAS_THREADS, user_api="blas")
    sys.setswitchinterval(GIL_SWITCH_INTERVAL)
    anyio.to_thread.current_default_thread_limiter().total_tokens = WORKER_THREADS
    _set_madvise_hugepage(NUMPY_HUGE_PAGES)


def freeze_startup_objects() -> None:
    """Keep every object alive now (modules, the tokenizer, the model's Python side, ~230k
    objects) out of the cyclic GC's full passes (`gc.freeze`); call once the embedding model
    is loaded.

    A full pass walks every tracked object, and it runs on whichever thread allocates,
    holding the GIL: a 1k-chunk user's recall measured one every ~600 requests, 184 ms of
    moim's own work for that request (and every thread waiting), against 5 ms with the
    startup objects frozen (load 5.5). What is created later is collected as before.
    Freezing moves lists, it walks nothing (no `gc.collect` first: a full pass on the event
    loop, ~0.2 s, for the little garbage a start leaves). Once per process: another app
    started in it (tests start hundreds) would also freeze what the ones before left as
    cyclic garbage, and frozen garbage is never collected.
    """
    if gc.get_freeze_count() == 0:
        gc.freeze()
