"""Why a memsuite split's questions miss: each miss put down to the first relaxation that fixes it.

Re-asks every question of a replayed database in-process (as bench/memsuite_tune.py does) under
defaults, then with the abstention gate off, then also the similarity floors off, then 40
excerpts of 600 characters, then 40 of 5,000. A phrase miss (para, temporal, pref, update) is
"order" when the expected phrase is in the block but after the superseded one, else "gate",
"floor", "ranked out" or "excerpt cut" after the first of these that brings it into the block,
else "missed by both retrievers"; "ranked out" and "excerpt cut" say "(kept)" when the answer
is among the hits the default block was built from (a rule on the excerpts may reach it), "(not
kept)" when the gate or the floors dropped it under defaults. An update-value miss (defaults) is
"no excerpt, no fact", "newer turn not recalled", "old value first in the newer turn", "older
turn first", or "old value named first elsewhere" (a reply, another turn, a fact). Measuring
only: nothing here tunes recall.

    PYTHONPATH=. /work/venv/bin/python bench/memsuite.py --suite fresh2 --db /tmp/f2.db
    PYTHONPATH=. /work/venv/bin/python bench/memsuite_misses.py --suite fresh2 --db /tmp/f2.db
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import sys
import tempfile
from collections import Counter
from fractions import Fraction
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import threadpoolctl  # noqa: E402

from bench.memsuite import CATEGORIES, SUITES, Case, Persona, _word_at, norm, personas_of  # noqa: E402
from bench.memsuite_tune import ask  # noqa: E402
from memory import Settings  # noqa: E402
from memory.block.budget import TierRule  # noqa: E402
from memory.layer import MemoryLayer  # noqa: E402

GATE_OFF = {"min_standout": 0.0, "min_answerable": 0.0}
OPEN = {**GATE_OFF, "min_similarity": 0.0, "min_lexical_similarity": 0.0}
RELAXATIONS: list[tuple[str, dict[str, Any]]] = [
    ("default", {}),
    ("gate", GATE_OFF),
    ("floor", OPEN),
    ("ranked out", {**OPEN, "tier_rules": (TierRule(Fraction("0.5"), 40, 600),)}),
    ("excerpt cut", {**OPEN, "tier_rules": (TierRule(Fraction("0.5"), 40, 5000),)}),
]


def asked(personas: list[Persona], db: Path, sets: dict[str, Any]) -> list[Case]:
    """Every question of `personas` asked against a copy of `db` with `sets` overridden."""
    cases = [dataclasses.replace(c, result={}) for p in personas for c in p.cases]
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "memsuite.db"
        shutil.copyfile(db, copy)
        layer = MemoryLayer(dataclasses.replace(Settings(db_path=copy), **sets))
        layer.wait_for_lexical_index()
        for number, case in enumerate(cases):
            ask(layer, number, case)
        layer.close()
    return cases


def scores(cases: list[Case]) -> str:
    parts = []
    for category in CATEGORIES:
        chosen = [c for c in cases if c.category == category]
        parts.append(f"{category} {sum(c.result['passed'] for c in chosen) / len(chosen):.2f}")
    valued = [c for c in cases if "value_passed" in c.result]
    parts.append(f"value {sum(c.result['value_passed'] for c in valued) / len(valued):.2f}")
    return " | ".join(parts)


def phrase_cause(number: int, runs: dict[str, list[Case]]) -> str:
    """The first relaxation that brings a missed question's expected phrase into the block."""
    case = runs["default"][number]
    if norm(case.expected or "") in case.result["block"]:  # there, after the superseded one
        return "order"
    expected = norm(case.expected or "")
    for name, _ in RELAXATIONS[1:]:
        if expected in runs[name][number].result["block"]:
            if name in ("ranked out", "excerpt cut"):
                kept = any(expected in text for text in case.result["kept"])
                return f"{name} ({'kept' if kept else 'not kept'})"
            return name
    return "missed by both retrievers"


def value_cause(case: Case, newer: str) -> str:
    """Why an update's current value is not before the old one; `newer` is the newer turn."""
    block, value, old = case.result["block"], case.value or "", case.old_value
    if "[relevant past context]" not in block and _word_at(block, value) < 0:
        return "no excerpt, no fact"
    if norm(case.expected or "") not in block:
        return "newer turn not recalled"
    if 0 <= _word_at(newer, old) < _word_at(newer, value):
        return "old value first in the newer turn"
    stale_at = block.find(norm(case.stale)) if case.stale else -1
    if 0 <= stale_at < block.find(norm(case.expected or "")):
        return "older turn first"
    return "old value named first elsewhere"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--db", type=Path, required=True, help="a database memsuite.py replayed")
    parser.add_argument("--suite", choices=SUITES, default="fresh2")
    args = parser.parse_args()
    threadpoolctl.threadpool_limits(1, user_api="blas")  # as moim serve does
    personas = personas_of(args.suite)
    runs = {}
    for name, sets in RELAXATIONS:
        runs[name] = asked(personas, args.db, sets)
        print(f"{name}: {scores(runs[name])}")
    newer = {
        (p.name, c.question): next(
            norm(t) for _, s in p.sessions for _, t in s if norm(c.expected or "") in norm(t)
        )
        for p in personas
        for c in p.cases
        if c.category == "update"
    }
    causes: Counter[tuple[str, str]] = Counter()
    for number, case in enumerate(runs["default"]):
        if case.category != "abstain" and not case.result["passed"]:
            cause = phrase_cause(number, runs)
            causes["phrase", cause] += 1
            print(f"- phrase, {cause}: {case.persona} [{case.category}] {case.question}")
        if case.category == "update" and not case.result["value_passed"]:
            cause = value_cause(case, newer[case.persona, case.question])
            causes["value", cause] += 1
            print(f"- value, {cause}: {case.persona} {case.question}")
    for (kind, cause), count in sorted(causes.items()):
        print(f"{kind} | {cause} | {count}")


if __name__ == "__main__":
    main()
