"""Two checkouts of moim, request by request: which one adds less time to a chat request.

Run from the repository root (it is the "after" side unless --after says otherwise):

    /work/venv/bin/python bench/ab_latency.py --before /path/to/other/checkout \\
        --users u1k --db-before /tmp/a/small.db --db-after /tmp/b/small.db [--rounds 200]

On a shared machine, runs minutes apart differ by more than a change is worth. Here each
checkout runs in a process of its own (its code on PYTHONPATH, its own copy of the store:
a tantivy index takes one process's writer lock), serving the real app in front of the fake
upstream of tests/upstream.py with `bench/overhead.py`'s synthetic questions, and the two
take turns one request at a time, in a fresh random order each round: both see the same
machine. Each user of --users is asked in read mode, the first also with memory off.
Prints TTFB and moim's own work (x-memory-overhead-ms), p50 and p90; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def serve(db: str, users: list[str]) -> None:
    """One side: answer each request line on stdin with a result line on stdout."""
    try:  # glibc's arena limit before the store's threads start, as `moim serve` sets it
        from proxy.runtime import tune_malloc  # (a checkout from before it has none)
    except ImportError:
        pass
    else:
        tune_malloc()
    import httpx
    import threadpoolctl

    from bench.overhead import MODEL, history, request
    from memory import MemoryLayer, Settings
    from proxy.app import build_app
    from proxy.config import Config
    from tests.conftest import serve_app
    from tests.upstream import serve_upstream

    threadpoolctl.threadpool_limits(1, user_api="blas")
    layer = MemoryLayer(Settings(db_path=Path(db)))
    layer.wait_for_lexical_index()
    _ = layer.embedder
    heads = getattr(layer.store, "heads", None)  # a checkout that holds large users' heads
    for user in users:
        layer.index.count(user)  # each user's vectors in RAM before the first request
        if heads is not None and layer.index.count(user) >= layer.settings.chunk_heads_from:
            layer.store.chunk_heads(user, [0], (), True)  # and their heads (read meanwhile)
            heads.wait(user)
    base = history(np.random.default_rng(7))
    reply = "".join(f"tok{i:04d} " for i in range(8))[:64]
    with serve_upstream() as upstream:
        config = Config(upstream_base_url=upstream.url, memory=layer.settings)
        with serve_app(build_app(config, layer)) as url, httpx.Client(timeout=60) as client:
            print("ready", flush=True)
            for line in sys.stdin:
                user, question, mode = json.loads(line)
                messages = base + [{"role": "user", "content": question}]
                body = json.dumps({"model": MODEL, "stream": True, "messages": messages})
                upstream.script[:] = [{"content": reply, "delay": 0.001}]
                headers = {
                    "content-type": "application/json",
                    "x-memory-mode": mode,
                    "x-memory-user-id": user,
                }
                got = request(client, url + "/v1/chat/completions", body.encode(), headers)
                print(json.dumps({"ttfb": got["ttfb"], "own": got["overhead"]}), flush=True)


def start(checkout: Path, db: Path, users: list[str]) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    command = [sys.executable, __file__, "--serve", str(db), "--users", ",".join(users)]
    side = subprocess.Popen(
        command,
        cwd=checkout,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert side.stdout is not None and side.stdout.readline().strip() == "ready"
    return side


def ask(side: subprocess.Popen[str], path: tuple[str, str], question: str) -> dict[str, Any]:
    assert side.stdin is not None and side.stdout is not None
    user, mode = path
    side.stdin.write(json.dumps([user, question, mode]) + "\n")
    side.stdin.flush()
    result: dict[str, Any] = json.loads(side.stdout.readline())
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", type=Path, help="the other checkout")
    parser.add_argument("--after", type=Path, default=ROOT)
    parser.add_argument("--db-before", type=Path, help="its copy of the store")
    parser.add_argument("--db-after", type=Path, help="this checkout's copy of the store")
    parser.add_argument("--users", default="u1k", help="comma-separated users to ask for")
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    args = parser.parse_args()
    users = args.users.split(",")
    if args.serve:
        serve(args.serve, users)
        return
    sys.path.insert(0, str(ROOT))
    from bench.overhead import question

    sides = {
        "before": start(args.before, args.db_before, users),
        "after": start(args.after, args.db_after, users),
    }
    paths = [(user, "read") for user in users] + [(users[0], "off")]
    rng = random.Random(11)
    results: dict[tuple[str, tuple[str, str]], list[dict[str, Any]]] = {
        (name, path): [] for name in sides for path in paths
    }
    started = os.getloadavg()
    for round_ in range(args.warmup + args.rounds):
        for path in rng.sample(paths, len(paths)):
            asked = question(rng)
            for name in rng.sample(list(sides), len(sides)):
                got = ask(sides[name], path, asked)
                if round_ >= args.warmup:
                    results[(name, path)].append(got)
    for side in sides.values():
        assert side.stdin is not None
        side.stdin.close()
        side.wait()
    print(f"load average {started} at the start, {os.getloadavg()} at the end; ms")
    print("| user | mode | side | TTFB p50 | p90 | own work p50 | p90 |")
    print("|---|---|---|---|---|---|---|")
    for path in paths:
        for name in sides:
            rows = results[(name, path)]
            ttfb, own = [r["ttfb"] for r in rows], [r["own"] for r in rows]
            print(
                f"| {path[0]} | {path[1]} | {name} | {np.median(ttfb):.2f} | "
                f"{np.percentile(ttfb, 90):.2f} | {np.median(own):.2f} | "
                f"{np.percentile(own, 90):.2f} |"
            )


if __name__ == "__main__":
    main()
