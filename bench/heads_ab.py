"""A large user's recall with candidates' rows from SQLite, against heads held in RAM.

Run from the repository root, with two copies of a bench store (a tantivy index takes one
process's writer lock, and each layer opens its own):

    /work/venv/bin/python bench/heads_ab.py --db-rows /tmp/a/bench.db --db-heads /tmp/b/bench.db \\
        --user u100k [--questions 300]

Two `MemoryLayer`s in one process, one with `chunk_heads_from=0` (every candidate's row read
from SQLite, as before memory/store/chunk_heads.py), one with the default (the user's heads
read before the first question), recall `bench/overhead.py`'s synthetic questions in a fresh
random order per question, so both see the same machine. Prints recall's p50 / p90 for each,
how many questions kept something, and on how many both gave the same hits and the same
left-out list (texts included); asserts nothing (STYLE.md 18).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import threadpoolctl

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.overhead import history, question  # noqa: E402
from memory import MemoryLayer, Settings  # noqa: E402


def layer_for(db: Path, user: str, heads_from: int) -> MemoryLayer:
    layer = MemoryLayer(Settings(db_path=db, chunk_heads_from=heads_from))
    layer.wait_for_lexical_index()
    _ = layer.embedder
    layer.index.count(user)
    if heads_from:  # the heads are read on their own thread: wait, as for the vectors
        layer.store.chunk_heads(user, [0], (), True)
        layer.store.heads.wait(user)
        print(f"heads held: {layer.store.heads.held_bytes() / 1e6:.1f} MB")
    return layer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--db-rows", type=Path, required=True)
    parser.add_argument("--db-heads", type=Path, required=True)
    parser.add_argument("--user", default="u100k")
    parser.add_argument("--questions", type=int, default=300)
    args = parser.parse_args()
    threadpoolctl.threadpool_limits(1, user_api="blas")
    sides = {
        "rows": layer_for(args.db_rows, args.user, 0),
        "heads": layer_for(args.db_heads, args.user, 20_000),
    }
    rng, base = random.Random(5), history(np.random.default_rng(7))
    times: dict[str, list[float]] = {name: [] for name in sides}
    kept = dict.fromkeys(sides, 0)
    same = 0
    start = os.getloadavg()
    for _ in range(args.questions):
        messages = [*base, {"role": "user", "content": question(rng)}]
        order = list(sides)
        rng.shuffle(order)
        found, now = {}, time.time()  # one time for both: the recency bonus reads it
        for name in order:
            layer = sides[name]
            began = time.perf_counter()
            found[name], _ = layer._retrieve(layer.embedder, args.user, messages, now)
            times[name].append((time.perf_counter() - began) * 1e3)
            kept[name] += bool(found[name].hits)
        rows, heads = found["rows"], found["heads"]
        same += rows.hits == heads.hits and list(rows.left_out) == list(heads.left_out)
    print(f"load average {start} at the start, {os.getloadavg()} at the end")
    print("| side | recall p50 | p90 | kept something |\n|---|---|---|---|")
    for name, values in times.items():
        values.sort()
        p90 = values[int(len(values) * 0.9)]
        print(f"| {name} | {statistics.median(values):.2f} | {p90:.2f} | {kept[name]} |")
    print(f"same hits and left-out list: {same} of {args.questions}")


if __name__ == "__main__":
    main()
