"""A large user's dense search, float32 rows against the float16 rows the store gives.

Run from the repository root:

    /work/venv/bin/python bench/dense_rows.py --vectors real-20000.npy --queries real-queries.npy
    /work/venv/bin/python bench/dense_rows.py --db bench.db --user u100k [--queries-n 200]

`memory.recall.vectors.VectorIndex` searches the same user loaded two ways, interleaved in a
fresh random order per query: float32 rows (rescored exactly), and float16 rows, which is how
`MemoryLayer` loads a user of `HALF_FROM` vectors or more (held as int8 rows with the float16
rows in an unlinked file since the int8 change, held in RAM before it: run this script in
either checkout). For each: search time, recall of the exact top k (an exact float32 scan of
every row), the error of the cosines returned against float32, and the RAM the index holds
(rows and codes; the file is page cache). --vectors takes real MiniLM embeddings (recall
means something there; synthetic stores are 300 texts plus noise, where any approximate
method scores 0.3-0.6); --db a bench store's user (time and RAM at 100k or 1M), questions
embedded by MiniLM. --rescored/--k set the candidate budget (the 100k proportion at 20k rows:
--k 16 --rescored 400), --extra the rows past k whose cosines are read from the file.
Prints a markdown table; asserts nothing (STYLE.md 18).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import threadpoolctl  # noqa: E402

from memory.recall import vectors  # noqa: E402


def source(args: argparse.Namespace) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(ids, float32 rows, queries) for the user measured."""
    if args.vectors:
        rows = np.load(args.vectors).astype(np.float32)
        ids = np.arange(1, len(rows) + 1, dtype=np.int64)
        return ids, rows, np.load(args.queries).astype(np.float32)[: args.queries_n]
    from bench.overhead import question
    from memory import FastEmbedder
    from memory.store.store import Store

    store = Store(args.db)
    store.dim = 384
    ids, rows = store.user_vectors(args.user)
    embedder, rng = FastEmbedder(), random.Random(3)
    queries = np.stack([embedder.embed_query(question(rng)) for _ in range(args.queries_n)])
    return ids, rows[: len(ids)], queries


def held_mb(index: vectors.VectorIndex) -> float:
    view = index._matrix("u")
    return (sum(b.nbytes for b in view.blocks) + sum(c.nbytes for c in view.codes)) / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--vectors", type=Path, help="an .npy of unit vectors (n, 384)")
    parser.add_argument("--queries", type=Path, help="an .npy of query vectors")
    parser.add_argument("--db", type=Path, help="a bench store (bench/overhead.py --db)")
    parser.add_argument("--user", default="u100k")
    parser.add_argument("--queries-n", type=int, default=300)
    parser.add_argument("--k", type=int, default=80)
    parser.add_argument("--rescored", type=int, default=vectors.RESCORED)
    parser.add_argument("--extra", type=int, default=getattr(vectors, "EXACT_EXTRA", 0))
    args = parser.parse_args()
    threadpoolctl.threadpool_limits(1, user_api="blas")  # as moim serve does
    vectors.RESCORED, vectors.EXACT_EXTRA = args.rescored, args.extra
    vectors.EXACT_BELOW = min(vectors.EXACT_BELOW, 1)  # every kind searches by codes
    started = time.perf_counter()
    ids, rows, queries = source(args)
    print(f"{len(ids)} rows, {len(queries)} queries ({time.perf_counter() - started:.0f} s)")
    half = rows.astype(np.float16)
    kinds = {
        "float32": vectors.VectorIndex(lambda user: (ids, rows)),
        "float16 from the store": vectors.VectorIndex(lambda user: (ids, half)),
    }
    ram = {name: held_mb(index) for name, index in kinds.items()}
    times: dict[str, list[float]] = {name: [] for name in kinds}
    recall: dict[str, list[float]] = {name: [] for name in kinds}
    error: dict[str, list[float]] = {name: [] for name in kinds}
    shuffle, position = random.Random(5), {int(i): p for p, i in enumerate(ids)}
    for n, query in enumerate(queries):
        truth = set(ids[np.argsort(-(rows @ query), kind="stable")[: args.k]].tolist())
        order = list(kinds)
        shuffle.shuffle(order)
        for name in order:
            began = time.perf_counter()
            found = kinds[name].search("u", query, args.k)
            if n >= 3:  # warm-up
                times[name].append((time.perf_counter() - began) * 1000)
            recall[name].append(len({i for i, _ in found} & truth) / args.k)
            error[name] += [abs(c - float(rows[position[i]] @ query)) for i, c in found]
    about = f"k {args.k}, rescored {args.rescored}, exact extra {args.extra}"
    print(f"\nload average {os.getloadavg()}; {about}\n")
    print("| rows | search p50 | p90 | recall mean | p10 | min | cosine error mean | max | RAM |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in kinds:
        t, r, e = times[name], recall[name], error[name]
        print(
            f"| {name} | {np.median(t):.2f} ms | {np.percentile(t, 90):.2f} | {np.mean(r):.4f} "
            f"| {np.percentile(r, 10):.3f} | {np.min(r):.3f} | {np.mean(e):.1e} | {np.max(e):.1e} "
            f"| {ram[name]:.1f} MB |"
        )


if __name__ == "__main__":
    main()
