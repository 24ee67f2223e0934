"""Precision and recall of `memory.facts.capture.capture_facts` on the labelled chat messages.

Prints the dataset, the machine, the two numbers, then every miss and false positive, for the
closing note. Not a test: it asserts nothing
(tests/memory/facts/test_capture.py holds the thresholds).
A capture is correct when op, key and value match an expected one (value compared
case-insensitively); each expected fact can be matched once.

    python bench/cues_eval.py
"""

from __future__ import annotations

import json
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a plain script from any directory, like the other benches

from memory.facts.capture import capture_facts  # noqa: E402

DATASET = ROOT / "tests" / "memory" / "facts" / "capture_labelled.jsonl"

Fact = tuple[str, str, str]


def _fact(op: str, key: str, value: str) -> Fact:
    return (op, key, value.casefold())


def main() -> None:
    rows = [json.loads(line) for line in DATASET.read_text().splitlines() if line.strip()]
    negatives = sum(1 for row in rows if not row["expected"])
    captured = correct = expected_total = 0
    misses: list[str] = []
    false_positives: list[str] = []
    started = time.perf_counter()
    for row in rows:
        expected = [_fact(e["op"], e["key"], e["value"]) for e in row["expected"]]
        got = capture_facts(row["text"])
        expected_total += len(expected)
        captured += len(got)
        remaining = list(expected)
        for capture in got:
            fact = _fact(capture.op, capture.key, capture.value)
            if fact in remaining:
                remaining.remove(fact)
                correct += 1
            else:
                false_positives.append(f"{row['text']!r}\n      got {fact} (rule {capture.rule})")
        misses += [f"{row['text']!r}\n      missed {fact}" for fact in remaining]
    elapsed_ms = (time.perf_counter() - started) * 1000
    precision = correct / captured if captured else 1.0
    recall = correct / expected_total if expected_total else 1.0
    print(
        f"dataset: {DATASET.relative_to(ROOT)} ({len(rows)} messages, {negatives} negatives, "
        f"{expected_total} expected facts)"
    )
    print(
        f"machine: {platform.platform()}, Python {platform.python_version()}, "
        f"{platform.processor() or platform.machine()}"
    )
    print(f"time:      {elapsed_ms:.1f} ms total, {elapsed_ms / len(rows):.3f} ms/message")
    print(f"captured:  {captured} ({correct} correct)")
    print(f"precision: {precision:.3f}")
    print(f"recall:    {recall:.3f}")
    print(f"\nfalse positives ({len(false_positives)}):")
    print("\n".join(f"  - {line}" for line in false_positives) or "  none")
    print(f"\nmisses ({len(misses)}):")
    print("\n".join(f"  - {line}" for line in misses) or "  none")


if __name__ == "__main__":
    main()
