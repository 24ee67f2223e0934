"""proxy/runtime.py: the server's process-wide tuning, and a library import that changes nothing."""

import gc
import os
import subprocess
import sys
import time

import anyio.to_thread
import threadpoolctl

from proxy import runtime


def test_importing_memory_leaves_the_environment_alone():
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    code = "import os, memory; print('OPENBLAS_NUM_THREADS' in os.environ)"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.stdout.strip() == "False", out.stderr


def test_tune_process_sets_one_blas_thread_the_switch_interval_and_the_thread_pool():
    before_interval = sys.getswitchinterval()
    blas = threadpoolctl.threadpool_limits(limits=None, user_api="blas")  # restores on exit
    with blas:

        async def tune_and_read():
            runtime.tune_process()
            return anyio.to_thread.current_default_thread_limiter().total_tokens

        try:
            tokens = anyio.run(tune_and_read)
            assert tokens == runtime.WORKER_THREADS
            assert sys.getswitchinterval() == runtime.GIL_SWITCH_INTERVAL
            threads = {
                i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"
            }
            assert threads == {runtime.BLAS_THREADS}
        finally:
            sys.setswitchinterval(before_interval)


def test_tune_process_turns_numpy_huge_pages_off():
    # Relies on numpy's private switch (it returns the previous setting): a numpy that drops
    # or renames it fails here, not silently in the server's RSS.
    from numpy._core.multiarray import _set_madvise_hugepage

    before = _set_madvise_hugepage(True)
    try:

        async def tune():
            runtime.tune_process()

        anyio.run(tune)
        assert _set_madvise_hugepage(True) is False
    finally:
        _set_madvise_hugepage(before)


def _collect_what_earlier_tests_left() -> None:
    """Finalise the garbage earlier tests left frozen (litellm's unclosed client sockets), so
    that it is not finalised during this test's proxy start-up: a socket's ResourceWarning
    raised from a collection that runs while the start-up thread compiles a module import
    breaks the compile (CPython 3.11's "AST constructor recursion depth mismatch"). The
    leftovers are not this test's subject: their unraisable warnings are dropped here."""
    hook, sys.unraisablehook = sys.unraisablehook, lambda _: None
    try:
        gc.collect()
    finally:
        sys.unraisablehook = hook


def test_the_objects_alive_once_the_model_is_loaded_are_frozen(make_proxy):
    gc.unfreeze()
    _collect_what_earlier_tests_left()
    make_proxy()  # ready: the embedding model is loaded; the objects are frozen right after
    deadline = time.monotonic() + 10
    while gc.get_freeze_count() == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert gc.get_freeze_count() > 10_000
