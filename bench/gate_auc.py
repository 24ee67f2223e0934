"""Threshold-free: how well each candidate signal alone tells answerable from never discussed.

Reads `bench/gate_features.py` rows (with `bench/gate_sentences.py`'s signals added) of the
tuning suites and prints, per signal, the area under the ROC curve (answerable above never
discussed) over the questions the learned gate decides (not dropped before it, not opened by
the rules), per suite and pooled; then the rank of the hit holding an answerable question's
answer among the ten best kept hits, by chunk cosine and by each best-piece cosine.

    PYTHONPATH=. python bench/gate_auc.py /tmp/sent28/s/*.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.gate_fit import BLIND  # noqa: E402

Row = dict[str, Any]
SIGNALS = (
    "best",
    "chunk_best3",
    "sent_best3",
    "sent_best10",
    "sent_standout",
    "sent_user",
    "clause_best3",
    "clause_standout",
    "clause_user",
    "tok_best3",
    "tok_standout",
    "tok_user",
    "sent_gain",
    "tok_gain",
    "probability",
)
FRESH = ("fresh", "fresh2", "fresh4", "fresh5", "fresh7", "fresh10", "fresh12")


def value(row: Row, name: str) -> float:
    """The signal `name` of `row` (a row without hits: its best cosine)."""
    best = float(row["best"])
    if name.endswith("_gain"):
        way = name.removesuffix("_gain")
        return float(row.get(f"{way}_best3", best)) - float(row.get("chunk_best3", best))
    return float(row.get(name, best))


def auc(positive: Sequence[float], negative: Sequence[float]) -> float:
    """P(a positive scores above a negative), ties half."""
    if not positive or not negative:
        return float("nan")
    p, n = np.asarray(positive)[:, None], np.asarray(negative)[None, :]
    return float(((p > n).sum() + 0.5 * (p == n).sum()) / (p.size * n.size))


def decided(rows: list[Row]) -> list[Row]:
    return [r for r in rows if not r["dropped"] and not r["opens"] and r.get("top")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("files", nargs="+", type=Path)
    args = parser.parse_args()
    rows = [json.loads(line) for f in args.files for line in f.read_text().splitlines()]
    rows = [r for r in rows if r["suite"] not in BLIND and r["suite"] != "locomo"]
    suites = sorted({r["suite"] for r in rows})
    groups = {s: decided([r for r in rows if r["suite"] == s]) for s in suites}
    groups["fresh-type pooled"] = [r for s in FRESH for r in groups.get(s, [])]
    groups["all pooled"] = decided(rows)
    heads = [
        f"{g} ({sum(not r['answerable'] for r in v)}/{sum(r['answerable'] for r in v)})"
        for g, v in groups.items()
    ]
    print(f"| signal | {' | '.join(heads)} |\n|---|{'---|' * len(groups)}")
    for name in SIGNALS:
        cells = []
        for chosen in groups.values():
            pos = [value(r, name) for r in chosen if r["answerable"]]
            neg = [value(r, name) for r in chosen if not r["answerable"]]
            cells.append(f"{auc(pos, neg):.2f}")
        print(f"| {name} | {' | '.join(cells)} |")
    print()
    ranks = ("rank_kept", "rank_chunk", "rank_sent", "rank_clause", "rank_tok")
    print(f"| answer's hit among the ten | n | {' | '.join(ranks)} |\n|---|---|{'---|' * 5}")
    for label, kind in (("paraphrase", "para"), ("every answerable", None)):
        for fresh in (True, False):
            chosen = [
                r
                for r in rows
                if "rank_chunk" in r
                and (kind is None or r["category"] == kind)
                and (r["suite"] in FRESH) == fresh
            ]
            if not chosen:
                continue
            cells = [
                f"{np.mean([r[k] for r in chosen]):.2f} "
                f"({np.mean([r[k] == 1 for r in chosen]):.2f})"
                for k in ranks
            ]
            where = "fresh-type" if fresh else "long+short"
            print(f"| {label}, {where} | {len(chosen)} | {' | '.join(cells)} |")


if __name__ == "__main__":
    main()
