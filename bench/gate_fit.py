"""Fit the learned abstention gate's weights on bench/gate_features.py's tuning rows.

Reads the JSON lines `bench/gate_features.py` wrote (one file per suite and LoCoMo's), fits a
logistic regression (answerable or never discussed) on the tuning questions the gate decides
(not dropped before it, not opened by `memory.recall.abstention.stays_open`): every question of
the tuning suites (long, short, fresh, fresh2, fresh4, fresh5, fresh7, fresh10) and LoCoMo
conversations 0-4 as answerable with `--locomo-weight`. Prints the weights in `abstention.py`'s
form (the cosines collapsed to best, second and median), the threshold at which the fit
silences as many of the tuning suites' answerable questions as the gate before it did, and the
silenced shares, never discussed / answerable, per suite at a few thresholds. How far a fit
carries to a suite it has not seen: `bench/gate_loso.py`. The blind splits are never read.

    PYTHONPATH=. python bench/gate_fit.py /tmp/abst27/f/*.jsonl
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from memory.recall.names import asks_a_name  # noqa: E402

BLIND = {"fresh3", "fresh6", "fresh8", "fresh9", "fresh11", "fresh13", "fresh15"}
SIGNALS = ("best", "second", "median", "kept", "covered", "user_turn", "length", "expanded")
SIGNALS += ("asks_name",)


def inputs(row: dict[str, Any]) -> list[float]:
    """The fitted inputs of a row: best, its lead over the median, second, its gap to the
    second, median (as fitted: the penalty falls on each), then the rest."""
    return [
        row["best"],
        row["best"] - row["median"],
        row["second"],
        row["best"] - row["second"],
        row["median"],
        min(row["kept"], 10),
        row["covered"],
        float(row["user_turn"]),
        math.log1p(row["length"]),
        float(row["expanded"]),
        float(asks_a_name(row["question"])),
    ]


def fit(x: np.ndarray, y: np.ndarray, weight: np.ndarray, l2: float) -> np.ndarray:
    """Newton's method on the weighted, L2-penalised log loss over standardised inputs;
    returns the bias and weights on the raw inputs."""
    mean, scale = x.mean(0), x.std(0) + 1e-9
    z = np.hstack([np.ones((len(x), 1)), (x - mean) / scale])
    penalty = l2 * np.diag([0.0, *[1.0] * x.shape[1]])
    beta = np.zeros(z.shape[1])
    for _ in range(50):
        p = 1 / (1 + np.exp(-z @ beta))
        gradient = z.T @ (weight * (p - y)) + penalty @ beta
        hessian = (z * (weight * p * (1 - p))[:, None]).T @ z + penalty
        beta -= np.linalg.solve(hessian, gradient)
    raw = beta[1:] / scale
    return np.array([beta[0] - (raw * mean).sum(), *raw])


def main() -> None:
    from bench.gate_loso import BEFORE_THRESHOLD, before, matched, shares

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("files", nargs="+", type=Path, help="bench/gate_features.py output")
    parser.add_argument("--locomo-weight", type=float, default=0.3)
    parser.add_argument("--l2", type=float, default=1.0)
    args = parser.parse_args()
    rows = [json.loads(line) for f in args.files for line in f.read_text().splitlines()]
    rows = [r for r in rows if r["suite"] not in BLIND and r["split"] != "locomo-held"]
    memsuite = [r for r in rows if r["suite"] != "locomo"]
    chosen = [r for r in rows if not r["dropped"] and not r["opens"]]
    x = np.array([inputs(r) for r in chosen])
    y = np.array([r["category"] != "abstain" for r in chosen], float)
    weight = np.array([args.locomo_weight if r["suite"] == "locomo" else 1.0 for r in chosen])
    beta = fit(x, y, weight, args.l2)
    best, second, median = beta[1] + beta[2] + beta[4], beta[3] - beta[4], beta[5] - beta[2]
    print(f"bias {beta[0]:.4f}, best {best:.4f}, second {second:.4f}, median {median:.4f}")
    print(", ".join(f"{name} {w:.4f}" for name, w in zip(SIGNALS[3:], beta[6:], strict=True)))

    def gate(row: dict[str, Any]) -> float:
        return float(beta[0] + np.dot(beta[1:], inputs(row)))

    cost = shares(memsuite, before, BEFORE_THRESHOLD)[1]
    print(f"the gate before silences {cost:.3f} of the answerable; the fit does at p < ", end="")
    print(f"{matched(memsuite, gate, cost):.3f}")
    suites = sorted({r["suite"] for r in memsuite})
    for threshold in (0.45, 0.48, 0.5, 0.52):
        cells = [
            "{} {:.2f} / {:.2f}".format(
                s, *shares([r for r in memsuite if r["suite"] == s], gate, threshold)
            )
            for s in suites
        ]
        print(f"p < {threshold}: {' | '.join(cells)}")


if __name__ == "__main__":
    main()
