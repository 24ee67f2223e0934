"""Fit the learned abstention gate's weights on bench/gate_features.py's tuning rows.

Reads the JSON lines `bench/gate_features.py` wrote (one file per suite and LoCoMo's), fits a
logistic regression (answerable or never discussed) on the tuning questions the gate decides
(not dropped before it, not opened by `memory.recall.abstention`'s rules): memsuite's long and
short tuning halves, fresh, fresh2, fresh4, fresh5, fresh7 f81-84, and LoCoMo conversations
0-4 as answerable with `--locomo-weight`. Prints the weights in `abstention.py`'s form (the
cosines collapsed to best, second and median) and the silenced shares, never discussed /
answerable, of the tuning and held-out questions at a few thresholds. The blind splits are
never read here.

    PYTHONPATH=. python bench/gate_fit.py /tmp/gate5/*.jsonl
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

BLIND = {"fresh3", "fresh6", "fresh8", "fresh9", "fresh11"}
TUNING = {"fresh", "fresh2", "fresh4", "fresh5", "fresh7", "tune", "locomo-tune"}
SIGNALS = ("best", "second", "median", "kept", "covered", "user_turn", "length", "expanded")


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


def silenced(rows: list[dict[str, Any]], beta: np.ndarray, threshold: float) -> str:
    """Never discussed / answerable silenced (memsuite), or the share of LoCoMo answered."""
    cut = math.log(threshold / (1 - threshold))

    def fires(row: dict[str, Any]) -> bool:
        return not row["opens"] and float(beta[0] + np.dot(beta[1:], inputs(row))) < cut

    def quiet(row: dict[str, Any]) -> bool:
        return row["dropped"] or fires(row) or not row["excerpts"]

    never = [quiet(r) for r in rows if r["category"] == "abstain"]
    asked = [quiet(r) for r in rows if r["category"] != "abstain"]
    if not never:
        return f"{np.mean([r['answered'] and not quiet(r) for r in rows]):.3f}"
    return f"{np.mean(never):.2f} / {np.mean(asked):.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("files", nargs="+", type=Path, help="bench/gate_features.py output")
    parser.add_argument("--locomo-weight", type=float, default=0.3)
    parser.add_argument("--l2", type=float, default=1.0)
    args = parser.parse_args()
    rows = [json.loads(line) for f in args.files for line in f.read_text().splitlines()]
    rows = [r for r in rows if r["suite"] not in BLIND]
    tuning = [r for r in rows if r["split"] in TUNING]
    held = [r for r in rows if r["split"] not in TUNING]
    chosen = [r for r in tuning if not r["dropped"] and not r["opens"]]
    x = np.array([inputs(r) for r in chosen])
    y = np.array([r["category"] != "abstain" for r in chosen], float)
    weight = np.array([args.locomo_weight if r["suite"] == "locomo" else 1.0 for r in chosen])
    beta = fit(x, y, weight, args.l2)
    best, second, median = beta[1] + beta[2] + beta[4], beta[3] - beta[4], beta[5] - beta[2]
    print(f"bias {beta[0]:.4f}, best {best:.4f}, second {second:.4f}, median {median:.4f}")
    print(", ".join(f"{name} {w:.4f}" for name, w in zip(SIGNALS[3:], beta[6:], strict=True)))
    groups = {
        "tuning": [r for r in tuning if r["suite"] != "locomo"],
        "held out": [r for r in held if r["suite"] != "locomo"],
        "LoCoMo 0-4": [r for r in tuning if r["suite"] == "locomo"],
        "LoCoMo 5-9": [r for r in held if r["suite"] == "locomo"],
    }
    for threshold in (0.45, 0.5, 0.52, 0.55, 0.6):
        shares = " | ".join(f"{k} {silenced(v, beta, threshold)}" for k, v in groups.items() if v)
        print(f"p < {threshold}: {shares}")


if __name__ == "__main__":
    main()
