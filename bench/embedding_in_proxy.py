"""The question's embedding inside the proxy against the same run alone, in one process.

Run from the repository root (a store holding a user `u1k`, e.g. one `bench/overhead.py`'s
`populate` built; it is read, not written):

    /work/venv/bin/python bench/embedding_in_proxy.py --db COPY [--user u1k] [--rounds 200]

Each round, in a fresh random order: one request through the real app (the fake upstream of
tests/upstream.py, `bench/overhead.py`'s questions and history, read mode), whose recall
embeds its question on the recall thread; and one `embed_query_words` of another fresh
question on a plain thread woken from a queue, as the recall thread is, with nothing else
running ("alone"). Same process, same embedder, same moment: the ratio is what counts on a
shared machine. Per run: wall, the thread's CPU, its voluntary and involuntary context
switches. Prints a table; asserts nothing.

With --windows FILE it also writes each run's thread id and CLOCK_MONOTONIC start and end, to
match against a scheduler trace taken meanwhile, e.g.

    perf record -e sched:sched_switch -e sched:sched_wakeup -a -k CLOCK_MONOTONIC -- \\
        python bench/embedding_in_proxy.py --db COPY --windows w.json

(`perf script -F comm,pid,tid,cpu,time,event,trace` then lists who took the run's core.)
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import random
import resource
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from proxy.runtime import tune_malloc  # noqa: E402

tune_malloc()  # as `moim serve` does, before the store's threads start

import httpx  # noqa: E402
import numpy as np  # noqa: E402
import threadpoolctl  # noqa: E402

from bench.overhead import MODEL, history, question, request  # noqa: E402
from memory import MemoryLayer, Settings  # noqa: E402
from proxy.app import build_app  # noqa: E402
from proxy.config import Config  # noqa: E402
from tests.conftest import serve_app  # noqa: E402
from tests.upstream import serve_upstream  # noqa: E402


def measured(run: Callable[..., Any], side: threading.local, rows: list[dict]) -> Callable:
    """`run` (the embedder's `embed_query_words`), recording each call's figures."""

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        before = resource.getrusage(resource.RUSAGE_THREAD)
        start, cpu = time.perf_counter(), time.thread_time()
        mono = time.clock_gettime(time.CLOCK_MONOTONIC)
        try:
            return run(*args, **kwargs)
        finally:
            end, cpu_end = time.perf_counter(), time.thread_time()
            after = resource.getrusage(resource.RUSAGE_THREAD)
            rows.append(
                {
                    "where": getattr(side, "where", "proxy"),
                    "wall": (end - start) * 1e3,
                    "cpu": (cpu_end - cpu) * 1e3,
                    "voluntary": after.ru_nvcsw - before.ru_nvcsw,
                    "involuntary": after.ru_nivcsw - before.ru_nivcsw,
                    "tid": threading.get_native_id(),
                    "start": mono,
                    "end": time.clock_gettime(time.CLOCK_MONOTONIC),
                }
            )

    return wrapped


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--db", type=Path, required=True, help="a store holding --user")
    parser.add_argument("--user", default="u1k")
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--gap-ms", type=float, default=2.0, help="pause after each step")
    parser.add_argument("--windows", type=Path, help="write each run's thread and times here")
    args = parser.parse_args()
    threadpoolctl.threadpool_limits(1, user_api="blas")
    layer = MemoryLayer(Settings(db_path=args.db))
    layer.wait_for_lexical_index()
    embedder: Any = layer.embedder
    layer.index.count(args.user)  # the user's vectors in RAM before the first request
    rows: list[dict] = []
    side = threading.local()
    embedder.embed_query_words = measured(embedder.embed_query_words, side, rows)
    jobs: queue.Queue[str | None] = queue.Queue()
    done: queue.Queue[None] = queue.Queue()

    def alone() -> None:
        side.where = "alone"
        while (text := jobs.get()) is not None:
            embedder.embed_query_words(text, owner="alone")
            done.put(None)

    threading.Thread(target=alone, daemon=True).start()
    rng, base = random.Random(5), history(np.random.default_rng(7))
    reply = "".join(f"tok{i:04d} " for i in range(8))[:64]
    started = os.getloadavg()
    with serve_upstream() as upstream:
        config = Config(upstream_base_url=upstream.url, memory=layer.settings)
        with serve_app(build_app(config, layer)) as url, httpx.Client(timeout=60) as client:
            headers = {
                "content-type": "application/json",
                "x-memory-mode": "read",
                "x-memory-user-id": args.user,
            }
            for round_ in range(args.warmup + args.rounds):
                if round_ == args.warmup:
                    rows.clear()
                for step in rng.sample(["proxy", "alone"], 2):
                    if step == "alone":
                        jobs.put(question(rng))
                        done.get()
                    else:
                        messages = base + [{"role": "user", "content": question(rng)}]
                        body = json.dumps({"model": MODEL, "stream": True, "messages": messages})
                        upstream.script[:] = [{"content": reply, "delay": 0.001}]
                        request(client, url + "/v1/chat/completions", body.encode(), headers)
                    time.sleep(args.gap_ms / 1000)
            jobs.put(None)
    print(f"load average {started} at the start, {os.getloadavg()} at the end")
    print(f"store {args.db}, user {args.user}, {args.rounds} rounds; ms, p50 (mean)")
    print("| where | wall | CPU | voluntary switches | involuntary switches |")
    print("|---|---|---|---|---|")
    for where in ("proxy", "alone"):
        got = [r for r in rows if r["where"] == where]
        cells = [
            f"{np.median([r[k] for r in got]):.2f} ({np.mean([r[k] for r in got]):.2f})"
            for k in ("wall", "cpu", "voluntary", "involuntary")
        ]
        print(f"| {where} | " + " | ".join(cells) + " |")
    if args.windows:
        args.windows.write_text(json.dumps({"pid": os.getpid(), "runs": rows}))


if __name__ == "__main__":
    main()
