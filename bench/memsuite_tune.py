"""Fast memsuite tuning: the block `MemoryLayer.recall` builds, scored in-process.

`bench/memsuite.py` replays the personas through the real proxy and asks through HTTP. This
script reuses a database it replayed (`--db`), copies it (recall marks facts as injected), and
calls `MemoryLayer.recall` for each question with the request the proxy builds (a system
prompt and the question, a new session, a 128k window: tier 0), scoring as memsuite.py does.
Settings are overridden with `--set name=value`; tune on the tuning half, report both halves,
and score `--suite fresh` (personas 21-30) only to confirm: it is never tuned on.

    PYTHONPATH=. /work/venv/bin/python bench/memsuite.py --db /tmp/m.db     # replay once
    PYTHONPATH=. /work/venv/bin/python bench/memsuite_tune.py --db /tmp/m.db --set min_standout=0.45
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import threadpoolctl  # noqa: E402

from bench.memsuite import (  # noqa: E402
    CATEGORIES,
    MODEL,
    PAST_CONTEXT,
    SUITES,
    SYSTEM,
    Case,
    _word_at,
    norm,
    personas_of,
    splits_of,
)
from bench.tune_recall import parse_sets  # noqa: E402
from memory import BLOCK_END, BLOCK_START, Settings, count_message_tokens  # noqa: E402
from memory.layer import MemoryLayer, RecallRequest  # noqa: E402


def ask(layer: MemoryLayer, number: int, case: Case) -> None:
    """Recall for `case`'s question and score its block as memsuite.ask does."""
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": case.question}]
    request = RecallRequest(
        case.persona,
        f"{case.persona}-q{number}",
        MODEL,
        messages,
        count_message_tokens(messages, MODEL),
        128_000,
    )
    started = time.perf_counter()
    found = layer.recall(request)
    case.result["ms"] = (time.perf_counter() - started) * 1000
    text = found.block.text if found.block else ""
    block = norm(text.split(BLOCK_START, 1)[1].split(BLOCK_END, 1)[0]) if text else ""
    excerpts = PAST_CONTEXT in block
    if case.category == "abstain":
        passed = not excerpts
    else:
        at = block.find(norm(case.expected or ""))
        stale_at = block.find(norm(case.stale)) if case.stale else -1
        passed = at >= 0 and (stale_at < 0 or at < stale_at)
    if case.category == "update" and case.value:
        at, old_at = _word_at(block, case.value), _word_at(block, case.old_value)
        case.result["value_passed"] = at >= 0 and (old_at < 0 or at < old_at)
    kept = tuple(norm(h.chunk.text) for h in found.hits)  # what the block was built from
    case.result.update(passed=passed, excerpts=excerpts, block=block, kept=kept)


def table(cases: list[Case]) -> str:
    """One line: each category's score, per split (tuning / held out, or fresh)."""
    parts = []
    for category in (*CATEGORIES, "value"):
        scores = []
        for split in splits_of(cases):
            if category == "value":
                chosen = [c for c in cases if c.split == split and "value_passed" in c.result]
                ok = sum(c.result["value_passed"] for c in chosen)
            else:
                chosen = [c for c in cases if c.split == split and c.category == category]
                ok = sum(c.result["passed"] for c in chosen)
            scores.append(f"{ok / len(chosen):.2f}" if chosen else "-")
        parts.append(f"{category} {' / '.join(scores)}")
    return " | ".join(parts)


def silenced(cases: list[Case]) -> str:
    """The share of questions that got no excerpt, never discussed / answerable, per split:
    the abstention trade-off (a gate that fires on both is reading the topic, not the answer)."""
    parts = []
    for split in splits_of(cases):
        chosen = [c for c in cases if c.split == split]
        never = [not c.result["excerpts"] for c in chosen if c.category == "abstain"]
        answerable = [not c.result["excerpts"] for c in chosen if c.category != "abstain"]
        share = sum(never) / max(1, len(never)), sum(answerable) / max(1, len(answerable))
        parts.append(f"{split} {share[0]:.2f} / {share[1]:.2f}")
    return "silenced, never discussed / answerable: " + ", ".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--db", type=Path, required=True, help="a database memsuite.py replayed")
    parser.add_argument("--suite", choices=SUITES, default="long")
    parser.add_argument("--set", action="append", default=[], help="Settings override")
    parser.add_argument("--show", choices=[*CATEGORIES, "none"], default="none")
    args = parser.parse_args()
    threadpoolctl.threadpool_limits(1, user_api="blas")  # as moim serve does
    personas = personas_of(args.suite)
    cases = [c for p in personas for c in p.cases]
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "memsuite.db"
        shutil.copyfile(args.db, db)
        settings = dataclasses.replace(Settings(db_path=db), **parse_sets(args.set))
        layer = MemoryLayer(settings)
        layer.wait_for_lexical_index()
        layer.embedder.embed_query("warm up")
        for number, case in enumerate(cases):
            ask(layer, number, case)
        layer.close()
    ms = np.percentile([c.result["ms"] for c in cases], [50, 95])
    label = " ".join(args.set) or "defaults"
    print(f"{label}: {table(cases)} | recall ms p50 {ms[0]:.1f} p95 {ms[1]:.1f}")
    print(silenced(cases))
    for case in cases:
        if case.category == args.show and not case.result["passed"]:
            print(f"- {case.persona} [{case.split}] {case.question} -> {case.expected}")


if __name__ == "__main__":
    main()
