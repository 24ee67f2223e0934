"""The cost of "what came later on the same subject" (memory/recall/later.py), in process.

For each store size, a synthetic user (`bench/overhead.py`'s `populate`: pool texts plus
fresh words, their vectors the pool's embeddings plus noise; built once into `--db`), recall
runs for synthetic questions with the step off, and the step is timed on what that recall
had: the kept hits' and dropped candidates' rows read from the RAM index, then
`later_on_same_subject`. The gate is not applied, so the step runs on every question (where
recall abstains it does not run at all). Then whole retrievals, step off and on, interleaved
question by question.

    PYTHONPATH=. python bench/later_cost.py --db /tmp/later/cost.db
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import threadpoolctl  # noqa: E402

from bench.overhead import populate, question  # noqa: E402
from memory import MemoryLayer, Settings  # noqa: E402
from memory.recall.later import later_on_same_subject  # noqa: E402
from memory.recall.retrieval import retrieve  # noqa: E402


def step_ms(layer: MemoryLayer, user: str, texts: list[str]) -> tuple[list[float], int]:
    """The step's time per question (ms) and how many turns it lent in all."""
    settings = layer.settings
    times, lent = [], 0
    for text in texts:
        found = retrieve(
            layer.store, layer.index, layer.embedder, settings, user, text, (), 0.0, gate=False
        )
        kept = found.hits
        dropped = [o.hit for o in found.left_out if o.reason == "weak" and o.hit is not None]
        if not kept:
            continue
        started = time.perf_counter()
        ids = [h.chunk.id for h in kept[: settings.later_hits]] + [h.chunk.id for h in dropped]
        vectors = layer.index.vectors(user, ids)
        out = later_on_same_subject(
            kept,
            [*kept, *dropped],
            vectors,
            settings.later_similarity,
            settings.later_hits,
            settings.later_query_similarity,
        )
        times.append((time.perf_counter() - started) * 1000)
        lent += len(out) - len(kept)
    return times, lent


def retrieve_ms(
    layer: MemoryLayer, variants: dict[str, Settings], user: str, texts: list[str]
) -> tuple[dict[str, float], dict[str, int]]:
    """p50 of whole retrievals per settings, taking turns question by question, and how many
    kept hits (the gate let them through)."""
    times: dict[str, list[float]] = {name: [] for name in variants}
    kept = dict.fromkeys(variants, 0)  # recalls the gate let through (the step runs in them)
    names = list(variants)
    for number, text in enumerate(texts):
        for name in names if number % 2 else names[::-1]:  # each goes first half the time
            settings = variants[name]
            started = time.perf_counter()
            found = retrieve(
                layer.store, layer.index, layer.embedder, settings, user, text, (), 0.0
            )
            times[name].append((time.perf_counter() - started) * 1000)
            kept[name] += bool(found.hits)
    return {name: float(np.percentile(t, 50)) for name, t in times.items()}, kept


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--db", type=Path, required=True, help="a store of its own (built once)")
    parser.add_argument("--sizes", default="1000,100000", help="users' chunks, comma-separated")
    parser.add_argument("--questions", type=int, default=200)
    args = parser.parse_args()
    threadpoolctl.threadpool_limits(1, user_api="blas")  # as moim serve does
    layer = MemoryLayer(Settings(db_path=args.db))
    layer.wait_for_lexical_index()
    variants = {
        "off": dataclasses.replace(layer.settings, later_similarity=0.0),
        "on": layer.settings,
    }
    users, pool = [], dict[str, object]()
    for size in (int(n) for n in args.sizes.split(",")):
        users.append(f"u{size}")
        seconds = populate(layer, users[-1], size, np.random.default_rng(size), pool)
        print(f"{users[-1]}: {size} chunks ({seconds:.0f} s to add what was missing)")
    rng = random.Random(11)
    texts = [question(rng) for _ in range(args.questions)]
    print(f"machine: {platform.platform()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    for user in users:
        size = layer.stats(user).chunks
        layer.index.count(user)  # load the matrix before timing
        retrieve(layer.store, layer.index, layer.embedder, layer.settings, user, "hi", (), 0.0)
        times, lent = step_ms(layer, user, texts)
        whole, through = retrieve_ms(layer, variants, user, texts)
        p50, p95 = np.percentile(times, [50, 95])
        print(
            f"{user} ({size} chunks): step p50 {p50:.3f} ms, p95 {p95:.3f} ms over {len(times)} "
            f"recalls that kept hits, {lent} turns lent; retrieve p50 off {whole['off']:.2f} ms, "
            f"on {whole['on']:.2f} ms (gate open in {through['on']} of {len(texts)})"
        )
    layer.close()


if __name__ == "__main__":
    main()
