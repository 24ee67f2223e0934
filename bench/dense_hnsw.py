"""HNSW (usearch, hnswlib) against today's dense search, at one user's 10k to 1M vectors.

Run from the repository root (needs `pip install usearch hnswlib`; neither is a moim
dependency):

    /work/venv/bin/python bench/dense_hnsw.py --vectors real.npy --queries real-queries.npy \
        --sizes 10000,20000,100000
    /work/venv/bin/python bench/dense_hnsw.py --db bench-1m-user.db --user u1m \
        --methods usearch-i8-16 --build-threads 1,2 --save /tmp/u1m.usearch

For each size (the first n rows), today's path is `memory.recall.vectors.VectorIndex` loaded
as `MemoryLayer` loads the user (float32 rows under `HALF_FROM` vectors, scanned exactly;
from there float16 rows, held as int8 with binary codes, the best k + 8 of 2,000 given
float16 cosines from a row file). Each HNSW method is built on the same rows (keys are the
row positions) and searched per `expansion_search` (ef, at least the count asked): its own
top k, and its top --candidates (k + 8, 2k) given the exact cosines the way today's path
gives them (`View.cosines_at`: the float16 row file for a large user), the top k cut by
those ("rescored"). Every variant runs on the same query, in a fresh random order per
query, on one thread (as recall runs), timed in the searching thread's CPU time (on a
machine shared with other jobs, wall time mostly measures the scheduler; its p50 is
printed beside). Reported: build time (wall and the process's CPU, each of
--build-threads), RSS added by the index, search p50/p90, recall of the exact top k (a
float32 scan of every row), what adding one row costs afterwards, and for the first
usearch method with --save, the saved file's size and the time to load it into RAM and to
map it (`Index.restore(view=True)`).
Recall only means something on real vectors (--vectors): the synthetic stores' vectors are
300 texts plus noise, where a query's exact top 80 is a near-arbitrary pick among
near-duplicates. Prints markdown; asserts nothing (STYLE.md 18).
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import resource
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import threadpoolctl  # noqa: E402

from memory.recall import vectors  # noqa: E402
from memory.recall.user_matrix import View  # noqa: E402

Search = Callable[[np.ndarray], np.ndarray]  # query -> row positions, best first


def rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def source(args: argparse.Namespace) -> tuple[np.ndarray, np.ndarray]:
    """(float32 unit rows, queries) of the user measured."""
    if args.vectors:
        rows = np.concatenate([np.load(path).astype(np.float32) for path in args.vectors])
        return rows, np.load(args.queries).astype(np.float32)[: args.queries_n]
    from bench.overhead import question
    from memory import FastEmbedder
    from memory.store.store import Store

    store = Store(args.db)
    store.dim = 384
    ids, rows = store.user_vectors(args.user)
    rows = np.ascontiguousarray(rows[: len(ids)], dtype=np.float32)
    embedder, rng = FastEmbedder(), random.Random(3)
    queries = np.stack([embedder.embed_query(question(rng)) for _ in range(args.queries_n)])
    return rows, queries


@dataclass
class Built:
    """One HNSW index built on the rows: how to search it, and what it cost."""

    name: str
    index: object
    build_s: dict[int, tuple[float, float]]  # threads: (wall, CPU) seconds
    ram_mb: float
    set_ef: Callable[[int], None]
    search: Callable[[np.ndarray, int], np.ndarray]
    add_one: Callable[[int, np.ndarray], None]


def cpu_s() -> float:
    """CPU seconds of the whole process (every thread): a build's cost on a shared machine."""
    used = resource.getrusage(resource.RUSAGE_SELF)
    return used.ru_utime + used.ru_stime


def build_usearch(rows: np.ndarray, kind: str, m: int, threads: int) -> tuple[object, float]:
    from usearch.index import Index

    index = Index(ndim=rows.shape[1], metric="ip", dtype=kind, connectivity=m, expansion_add=128)
    keys = np.arange(len(rows), dtype=np.uint64)
    began = time.perf_counter()
    index.add(keys, rows, threads=threads)
    return index, time.perf_counter() - began


def build_hnswlib(rows: np.ndarray, m: int, threads: int) -> tuple[object, float]:
    import hnswlib

    index = hnswlib.Index(space="ip", dim=rows.shape[1])
    index.init_index(max_elements=len(rows) + 1000, M=m, ef_construction=128, random_seed=1)
    began = time.perf_counter()
    index.add_items(rows, np.arange(len(rows)), num_threads=threads)
    return index, time.perf_counter() - began


def build(method: str, rows: np.ndarray, threads: list[int]) -> Built:
    """Build `method` (usearch-i8-16, usearch-f16-32, hnswlib-16, ...) once per thread count;
    the RSS added is the last build's (the others are freed first)."""
    parts = method.split("-")
    m = int(parts[-1])
    times: dict[int, tuple[float, float]] = {}
    index: object = None
    for n in threads:
        index = None
        gc.collect()
        before, cpu = rss_mb(), cpu_s()
        if parts[0] == "usearch":
            index, wall = build_usearch(rows, parts[1], m, n)
        else:
            index, wall = build_hnswlib(rows, m, n)
        times[n] = (wall, cpu_s() - cpu)
        ram = rss_mb() - before
    if parts[0] == "usearch":
        u = index

        def set_ef(ef: int) -> None:
            u.expansion_search = ef  # type: ignore[attr-defined]

        def search(query: np.ndarray, count: int) -> np.ndarray:
            return u.search(query, count, threads=1).keys.astype(np.int64)  # type: ignore[attr-defined,no-any-return]

        def add_one(key: int, row: np.ndarray) -> None:
            u.add(key, row, threads=1)  # type: ignore[attr-defined]

    else:
        h = index
        h.set_num_threads(1)  # type: ignore[attr-defined]

        def set_ef(ef: int) -> None:
            h.set_ef(ef)  # type: ignore[attr-defined]

        def search(query: np.ndarray, count: int) -> np.ndarray:
            labels, _ = h.knn_query(query, k=count, num_threads=1)  # type: ignore[attr-defined]
            return labels[0].astype(np.int64)  # type: ignore[no-any-return]

        def add_one(key: int, row: np.ndarray) -> None:
            h.add_items(row[None, :], [key], num_threads=1)  # type: ignore[attr-defined]

    return Built(method, index, times, ram, set_ef, search, add_one)


def today(rows: np.ndarray) -> tuple[vectors.VectorIndex, View, float, float]:
    """Today's index over these rows, loaded as `MemoryLayer` loads them; its load time and
    the RSS it added."""
    ids = np.arange(1, len(rows) + 1, dtype=np.int64)
    held = {"u": rows.astype(np.float16) if len(rows) >= vectors.HALF_FROM else rows}
    index = vectors.VectorIndex(lambda user: (ids, held.pop(user)))
    gc.collect()
    before, began = rss_mb(), time.perf_counter()
    index.count("u")
    made = time.perf_counter() - began
    gc.collect()
    return index, index._matrix("u"), made, rss_mb() - before


def rescored(view: View, positions: np.ndarray, query: np.ndarray, k: int) -> np.ndarray:
    """The best k of these positions by the cosines today's path would give them."""
    positions = np.sort(positions[positions >= 0])
    scores = view.cosines_at(positions, query)
    k = min(k, len(scores))
    top = np.argpartition(-scores, k - 1)[:k]
    return positions[top]  # type: ignore[no-any-return]


def measure(
    rows: np.ndarray, queries: np.ndarray, built: list[Built], args: argparse.Namespace
) -> None:
    """Time and recall of every variant, interleaved query by query; prints the table."""
    k, n = args.k, len(rows)
    index, view, made_s, made_mb = today(rows)
    variants: dict[str, Callable[[np.ndarray], np.ndarray]] = {
        "today": lambda q: np.asarray([i - 1 for i, _ in index.search("u", q, k)])
    }
    for b in built:
        for ef in args.ef:

            def raw(q: np.ndarray, b: Built = b, ef: int = ef) -> np.ndarray:
                b.set_ef(max(ef, k))
                return b.search(q, k)

            variants[f"{b.name} ef {ef}"] = raw
            for c in args.candidates:

                def again(q: np.ndarray, b: Built = b, ef: int = ef, c: int = c) -> np.ndarray:
                    b.set_ef(max(ef, c))
                    return rescored(view, b.search(q, c), q, k)

                variants[f"{b.name} ef {ef}, {c} rescored"] = again
    times: dict[str, list[float]] = {name: [] for name in variants}
    walls: dict[str, list[float]] = {name: [] for name in variants}
    recall: dict[str, list[float]] = {name: [] for name in variants}
    shuffle = random.Random(5)
    for at, query in enumerate(queries):
        truth = set(np.argpartition(-(rows @ query), k - 1)[:k].tolist())
        order = list(variants)
        shuffle.shuffle(order)
        for name in order:
            began, cpu = time.perf_counter(), time.thread_time()
            found = variants[name](query)
            if at >= 3:  # warm-up
                times[name].append((time.thread_time() - cpu) * 1000)
                walls[name].append((time.perf_counter() - began) * 1000)
            recall[name].append(len(set(found.tolist()) & truth) / k)
    print(f"\n### {n:,} rows, {len(queries)} queries, top {k}; load average {os.getloadavg()}\n")
    print(
        "| method | build s (threads: wall (CPU)) | RAM MB | CPU p50 ms | CPU p90 | wall p50 "
        "| recall@k mean | p10 | min |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    costs = {"today": (f"{made_s:.1f} (load)", made_mb)}
    for b in built:
        spent = ", ".join(f"{t}: {w:.1f} ({c:.1f} CPU)" for t, (w, c) in b.build_s.items())
        for ef in args.ef:
            costs[f"{b.name} ef {ef}"] = (spent, b.ram_mb)
            for c in args.candidates:
                costs[f"{b.name} ef {ef}, {c} rescored"] = ("", b.ram_mb)
    for name in variants:
        t, r = times[name], recall[name]
        spent, ram = costs[name]
        print(
            f"| {name} | {spent} | {ram:.0f} | {np.median(t):.3f} | {np.percentile(t, 90):.3f} "
            f"| {np.median(walls[name]):.3f} | {np.mean(r):.4f} | {np.percentile(r, 10):.3f} "
            f"| {np.min(r):.3f} |"
        )
    adds(rows, built, args)


def adds(rows: np.ndarray, built: list[Built], args: argparse.Namespace) -> None:
    """What one added row costs each index (single-row calls, as ingest would make)."""
    rng = np.random.default_rng(7)
    for b in built:
        spent = []
        for i in range(args.adds):
            row = rows[rng.integers(len(rows))] + rng.normal(0, 0.02, rows.shape[1])
            row = (row / np.linalg.norm(row)).astype(np.float32)
            began = time.perf_counter()
            b.add_one(len(rows) + i, row)
            spent.append((time.perf_counter() - began) * 1000)
        print(
            f"\n{b.name}: one row added {np.median(spent):.3f} ms p50, "
            f"p90 {np.percentile(spent, 90):.3f}"
        )


def saved(b: Built, queries: np.ndarray, path: Path, k: int) -> None:
    """The saved file of a usearch index, loaded into RAM and mapped: size, time, search."""
    from usearch.index import Index

    b.index.save(str(path))  # type: ignore[attr-defined]
    os.sync()
    print(f"\n{b.name} saved: {path.stat().st_size / 2**20:.0f} MB")
    for view in (False, True):
        gc.collect()
        before, began = rss_mb(), time.perf_counter()
        loaded = Index.restore(str(path), view=view)
        took = time.perf_counter() - began
        assert loaded is not None
        loaded.expansion_search = 128
        spent = []
        for query in queries[:100]:
            began = time.perf_counter()
            loaded.search(query, k, threads=1)
            spent.append((time.perf_counter() - began) * 1000)
        how = "mapped (view=True)" if view else "read into RAM"
        print(
            f"{how}: {took * 1000:.0f} ms, RSS +{rss_mb() - before:.0f} MB after 100 searches "
            f"(ef 128: p50 {np.median(spent[3:]):.3f} ms, first {spent[0]:.2f} ms)"
        )
        del loaded


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--vectors", type=Path, nargs="*", help=".npy files of unit vectors")
    parser.add_argument("--queries", type=Path, help="an .npy of query vectors")
    parser.add_argument("--db", type=Path, help="a bench store (bench/overhead.py --db)")
    parser.add_argument("--user", default="u1m")
    parser.add_argument("--sizes", default="", help="first n rows, e.g. 10000,100000")
    parser.add_argument("--queries-n", type=int, default=300)
    parser.add_argument("--k", type=int, default=80)
    parser.add_argument("--methods", default="usearch-i8-16,usearch-f16-16,usearch-i8-32")
    parser.add_argument("--ef", default="64,128,256,512")
    parser.add_argument("--candidates", default="88,160", help="HNSW hits given exact cosines")
    parser.add_argument("--build-threads", default="1")
    parser.add_argument("--adds", type=int, default=200)
    parser.add_argument("--save", type=Path, help="save the first usearch index here")
    args = parser.parse_args()
    args.ef = [int(x) for x in args.ef.split(",")]
    args.candidates = [int(x) for x in args.candidates.split(",") if x]
    threadpoolctl.threadpool_limits(1, user_api="blas")  # as moim serve does
    rows, queries = source(args)
    print(f"{len(rows)} rows, {len(queries)} queries; RSS {rss_mb():.0f} MB")
    for n in [int(x) for x in args.sizes.split(",")] if args.sizes else [len(rows)]:
        part = np.ascontiguousarray(rows[:n])
        threads = [int(x) for x in args.build_threads.split(",")]
        built = [build(m, part, threads) for m in args.methods.split(",") if m]
        for b in built:
            print(f"built {b.name} at {n}: {b.build_s} s, RSS +{b.ram_mb:.0f} MB", flush=True)
        measure(part, queries, built, args)
        if args.save:
            first = next((b for b in built if b.name.startswith("usearch")), None)
            if first is not None:
                saved(first, queries, args.save, args.k)
                args.save.unlink()
        print(f"max RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
