"""The question's embedding on one or two onnxruntime threads, and with other session options.

    PYTHONPATH=. python bench/question_threads.py [--questions 300] [--contention none|docs]

Sessions of the bundled model file (`memory.bundled_model.bundled_model_dir`), each built as
fastembed builds its own (ORT_ENABLE_ALL, no memory arena, one inter-op thread) but for the
option the row names; the same synthetic questions (`bench/overhead.py`'s), each run once on
every session in a fresh random order, so all see the same machine. `--contention docs` keeps
a thread embedding documents with `FastEmbedder` (fastembed's one-thread session, as moim's
writer) while the questions run. Prints p50 / p90 / mean milliseconds of one run (tokens
made beforehand, as fastembed makes them), whether every session's last hidden states equal
the first's bit for bit, the load average and the machine; writes
bench/results/question_threads.json. A benchmark, not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.harness import machine  # noqa: E402
from bench.overhead import question  # noqa: E402
from memory import FastEmbedder  # noqa: E402
from memory.bundled_model import bundled_model_dir  # noqa: E402


def session(
    threads: int = 1,
    spin: str = "1",
    level: str = "ALL",
    parallel: bool = False,
    stop: bool = False,
) -> Any:
    """A session of the bundled model built as fastembed builds its own, but for these."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, f"ORT_ENABLE_{level}")
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.enable_cpu_mem_arena = False
    if parallel:
        options.execution_mode = ort.ExecutionMode.ORT_PARALLEL
    options.add_session_config_entry("session.intra_op.allow_spinning", spin)
    if stop:  # spin while a run is on, stop as soon as it returns
        options.add_session_config_entry("session.force_spinning_stop", "1")
    path = str(bundled_model_dir() / "model.onnx")
    return ort.InferenceSession(path, providers=["CPUExecutionProvider"], sess_options=options)


VARIANTS: dict[str, dict[str, Any]] = {
    "1 thread (fastembed's options)": {},
    "1 thread, ORT_ENABLE_EXTENDED": {"level": "EXTENDED"},
    "1 thread, ORT_PARALLEL execution": {"parallel": True},
    "2 threads, spinning": {"threads": 2},
    "2 threads, no spinning": {"threads": 2, "spin": "0"},
    "2 threads, spinning only in a run": {"threads": 2, "stop": True},
}


def inputs(tokenizer: Any, text: str) -> dict[str, np.ndarray]:
    encoding = tokenizer.encode(text)
    ids = np.array([encoding.ids], dtype=np.int64)
    mask = np.array([encoding.attention_mask], dtype=np.int64)
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}


def main() -> None:
    from fastembed.common.preprocessor_utils import load_tokenizer

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--questions", type=int, default=300)
    parser.add_argument("--contention", choices=["none", "docs"], default="none")
    args = parser.parse_args()
    tokenizer, _ = load_tokenizer(bundled_model_dir())  # as fastembed tokenizes
    sessions = {name: session(**options) for name, options in VARIANTS.items()}
    rng = random.Random(11)
    feeds = [inputs(tokenizer, question(rng)) for _ in range(args.questions)]
    same = True
    for feed in feeds[:50]:
        outputs = [s.run(None, feed)[0] for s in sessions.values()]
        same = same and all(np.array_equal(outputs[0], other) for other in outputs[1:])
    stop = threading.Event()
    writer = FastEmbedder()

    def documents() -> None:
        texts = random.Random(5)
        while not stop.is_set():
            writer.embed_documents([" ".join(question(texts) for _ in range(3))])

    busy = threading.Thread(target=documents) if args.contention == "docs" else None
    if busy is not None:
        busy.start()
    started_load = os.getloadavg()
    times: dict[str, list[float]] = {name: [] for name in sessions}
    order = list(sessions)
    for feed in feeds:
        rng.shuffle(order)
        for name in order:
            began = time.perf_counter()
            sessions[name].run(None, feed)
            times[name].append((time.perf_counter() - began) * 1000)
    stop.set()
    if busy is not None:
        busy.join()
    rows = {
        name: {
            "p50_ms": round(statistics.median(values), 2),
            "p90_ms": round(float(np.percentile(values, 90)), 2),
            "mean_ms": round(statistics.fmean(values), 2),
        }
        for name, values in times.items()
    }
    print(f"machine: {machine()}")
    print(f"{args.questions} synthetic questions, contention: {args.contention}")
    print(f"load average {started_load} at the start, {os.getloadavg()} at the end")
    print(f"last hidden states equal across sessions (50 questions): {same}\n")
    print(f"{'session':<36} {'p50 ms':>8} {'p90 ms':>8} {'mean ms':>8}")
    for name, row in rows.items():
        print(f"{name:<36} {row['p50_ms']:>8} {row['p90_ms']:>8} {row['mean_ms']:>8}")
    out = ROOT / "bench" / "results" / "question_threads.json"
    out.parent.mkdir(exist_ok=True)
    result = {"machine": machine(), "contention": args.contention, "same": same, "rows": rows}
    out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
