"""Leave-one-split-out check of the learned abstention gate (issue 16): does a refit carry?

Reads `bench/gate_features.py`'s JSON lines (tuning suites, fresh10 and LoCoMo; the blind
suites are never read) and, for each tuning suite in turn, fits the gate on every other suite
(plus LoCoMo conversations 0-4 as answerable, weighted as `bench/gate_fit.py` does) and scores
the suite left out: never-discussed questions silenced / answerable questions silenced, as
`bench/memsuite_tune.py` counts them (dropped before the gate, withheld by it, or no excerpt).
Beside it, the weights before the refit (`BEFORE`) on the same suite, the fit over the ten
signals the gate read before asks_name, and with `--extra` the fit with candidate signals added
(`EXTRA`: from the question, or the three best kept hits' text; docs/recall-quality.md,
"Twentieth pass"). A refit is scored at the threshold at which it silences as many of its
training suites' answerable questions as the gate before it did (`--fixed`: at `--threshold`).

    PYTHONPATH=. python bench/gate_loso.py /tmp/abst27/f/*.jsonl [--extra sentence_words]
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import gate_words  # noqa: E402
from bench.gate_fit import BLIND, fit, inputs  # noqa: E402
from memory.recall import abstention  # noqa: E402
from memory.recall.dates_given import asks_when  # noqa: E402
from memory.recall.places import asks_where  # noqa: E402

Row = dict[str, Any]
TEN = 10  # the inputs the gate read before asks_name


_COUNT = re.compile(r"\bhow\s+(?:many|much)\b|\bcost\b|\bprice\b|\bcharge\b", re.I)


def _hits(row: Row) -> list[dict[str, Any]]:
    return list(row.get("top") or [])[: abstention.COVERED_HITS]


# Candidate signals, each read from a row's question and its three best kept hits' text.
EXTRA: dict[str, Callable[[Row], float]] = {
    "sentence_words": lambda r: gate_words.sentence_words(
        r["question"], [h["text"] for h in _hits(r)]
    ),
    "sentence_share": lambda r: gate_words.sentence_share(
        r["question"], [h["text"] for h in _hits(r)]
    ),
    "answer_shape": lambda r: float(
        gate_words.answer_shape(r["question"], [h["text"] for h in _hits(r)])
    ),
    "bigram": lambda r: float(gate_words.bigram(r["question"], [h["text"] for h in _hits(r)])),
    "user_share": lambda r: float(np.mean([h["role"] == "user" for h in _hits(r)] or [0.0])),
    "best_user": lambda r: max(
        [h["similarity"] or 0.0 for h in r.get("top") or [] if h["role"] == "user"] or [0.0]
    ),
    "best_assistant": lambda r: max(
        [h["similarity"] or 0.0 for h in r.get("top") or [] if h["role"] != "user"] or [0.0]
    ),
    "asks_when": lambda r: float(asks_when(r["question"])),
    "asks_where": lambda r: float(asks_where(r["question"])),
    "asks_count": lambda r: float(_COUNT.search(r["question"]) is not None),
    "top_asks": lambda r: float(bool(_hits(r)) and "?" in _hits(r)[0]["text"]),
}


# Sentence-level cosines (`bench/gate_sentences.py` writes them into the rows; session 28):
# sent_* each sentence embedded alone, clause_* each clause, tok_* the hit's own token states
# pooled over each sentence; *_gain: the best three's best sentence over their best chunk.
def _read(key: str, minus: str | None = None) -> Callable[[Row], float]:
    """A row's `key` (less its `minus`); a row without hits reads its best cosine."""

    def read(r: Row) -> float:
        best = float(r["best"])
        return float(r.get(key, best)) - (float(r.get(minus, best)) if minus else 0.0)

    return read


for _way in ("sent", "clause", "tok"):
    for _what in ("best3", "best10", "standout", "user"):
        EXTRA[f"{_way}_{_what}"] = _read(f"{_way}_{_what}")
    EXTRA[f"{_way}_gain"] = _read(f"{_way}_best3", "chunk_best3")


# The weights before the refit (session 26's main): bias, best, second, median, kept,
# covered, user_turn, log length, expanded; its threshold 0.52.
BEFORE = (-1.0466, 5.5242, -0.7249, -0.8844, 0.1596, 0.7758, -1.0889, -0.1599, 0.6876)
BEFORE_THRESHOLD = 0.52


def before(row: Row) -> float:
    """The log-odds of the row by the weights before the refit (`BEFORE`)."""
    signals = (
        row["best"],
        row["second"],
        row["median"],
        min(row["kept"], abstention.TOPIC_SIZE),
        row["covered"],
        float(row["user_turn"]),
        math.log1p(row["length"]),
        float(row["expanded"]),
    )
    return BEFORE[0] + sum(w * x for w, x in zip(BEFORE[1:], signals, strict=True))


def quiet(row: Row, odds: Callable[[Row], float], cut: float) -> bool:
    """No excerpt: dropped before the gate, withheld by it, or none with it open."""
    if row["dropped"] or not row["excerpts"]:
        return True
    return not row["opens"] and odds(row) < cut


def shares(rows: list[Row], odds: Callable[[Row], float], threshold: float) -> tuple[float, float]:
    """Never discussed silenced, answerable silenced."""
    cut = math.log(threshold / (1 - threshold))
    never = [quiet(r, odds, cut) for r in rows if r["category"] == "abstain"]
    asked = [quiet(r, odds, cut) for r in rows if r["category"] != "abstain"]
    return float(np.mean(never)) if never else 0.0, float(np.mean(asked)) if asked else 0.0


def answered(rows: list[Row], odds: Callable[[Row], float], threshold: float) -> float:
    """LoCoMo: the share of questions whose evidence is in the block."""
    cut = math.log(threshold / (1 - threshold))
    return float(np.mean([r["answered"] and not quiet(r, odds, cut) for r in rows]))


def features(row: Row, extra: list[str]) -> list[float]:
    """The gate's inputs (`gate_fit.inputs`; "ten": the ten before asks_name) and `extra`."""
    base = inputs(row)[:TEN] if "ten" in extra else inputs(row)
    return base + [EXTRA[name](row) for name in extra if name != "ten"]


def fitted(
    rows: list[Row], extra: list[str], locomo_weight: float, l2: float, balance: bool
) -> Callable[[Row], float]:
    """A gate fitted on `rows` (those the rules leave to it); returns its log-odds. With
    `balance` every memsuite suite weighs as much in the fit as the others together / n."""
    chosen = [r for r in rows if not r["dropped"] and not r["opens"]]
    x = np.array([features(r, extra) for r in chosen])
    y = np.array([r["category"] != "abstain" for r in chosen], float)
    count: dict[str, int] = {}
    for r in chosen:
        count[r["suite"]] = count.get(r["suite"], 0) + 1
    memsuite = [n for s, n in count.items() if s != "locomo"]
    mean = sum(memsuite) / len(memsuite)

    def weight(r: Row) -> float:
        if r["suite"] == "locomo":
            return locomo_weight
        return mean / count[r["suite"]] if balance else 1.0

    beta = fit(x, y, np.array([weight(r) for r in chosen]), l2)
    return lambda r: float(beta[0] + np.dot(beta[1:], features(r, extra)))


def matched(rows: list[Row], gate: Callable[[Row], float], cost: float) -> float:
    """The threshold at which `gate` silences `cost` of `rows`' answerable questions (the
    training suites': the refit pays what the gate before it paid there)."""
    low, high = 0.05, 0.95
    for _ in range(30):
        middle = (low + high) / 2
        if shares(rows, gate, middle)[1] > cost:
            high = middle
        else:
            low = middle
    return low


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("files", nargs="+", type=Path, help="bench/gate_features.py output")
    parser.add_argument("--extra", action="append", default=[], choices=sorted(EXTRA))
    parser.add_argument("--threshold", type=float, default=0.48)
    parser.add_argument("--locomo-weight", type=float, default=0.3)
    parser.add_argument("--l2", type=float, default=1.0)
    parser.add_argument("--balance", action="store_true", help="weigh each suite alike")
    parser.add_argument(
        "--fixed", action="store_true", help="refits at --threshold (default: matched)"
    )
    args = parser.parse_args()
    rows = [json.loads(line) for f in args.files for line in f.read_text().splitlines()]
    rows = [r for r in rows if r["suite"] not in BLIND]
    locomo_fit = [r for r in rows if r["split"] == "locomo-tune"]
    locomo_held = [r for r in rows if r["split"] == "locomo-held"]
    suites = sorted({r["suite"] for r in rows} - {"locomo"})
    names = [
        "before",
        "refit, ten",
        "refit",
        *(["refit+" + "+".join(args.extra)] if args.extra else []),
    ]
    print(f"| left out | {' | '.join(names)} |\n|---|{'---|' * len(names)}")
    total: dict[str, list[tuple[float, float, int, int]]] = {n: [] for n in names}

    def gates_on(train: list[Row]) -> list[tuple[Callable[[Row], float], float]]:
        memsuite = [r for r in train if r["suite"] != "locomo"]
        cost = shares(memsuite, before, BEFORE_THRESHOLD)[1]
        out = [(before, BEFORE_THRESHOLD)]
        for extra in (["ten"], [], args.extra) if args.extra else (["ten"], []):
            gate = fitted(train, extra, args.locomo_weight, args.l2, args.balance)
            out.append((gate, args.threshold if args.fixed else matched(memsuite, gate, cost)))
        return out

    for suite in suites:
        out = [r for r in rows if r["suite"] == suite]
        rest = [r for r in rows if r["suite"] not in (suite, "locomo")] + locomo_fit
        cells = []
        n_never = sum(r["category"] == "abstain" for r in out)
        n_asked = len(out) - n_never
        for name, (gate, threshold) in zip(names, gates_on(rest), strict=True):
            never, asked = shares(out, gate, threshold)
            total[name].append((never, asked, n_never, n_asked))
            cells.append(
                f"{never:.2f} / {asked:.2f}" + (f" @{threshold:.2f}" if name != "before" else "")
            )
        print(f"| {suite} ({n_never} / {n_asked}) | {' | '.join(cells)} |")
    pooled, macro = [], []
    for name in names:
        t = total[name]
        never = sum(a * n for a, _, n, _ in t) / sum(n for _, _, n, _ in t)
        asked = sum(b * m for _, b, _, m in t) / sum(m for _, _, _, m in t)
        pooled.append(f"{never:.3f} / {asked:.3f}")
        macro.append(f"{np.mean([a for a, *_ in t]):.3f} / {np.mean([b for _, b, *_ in t]):.3f}")
    print(f"| pooled | {' | '.join(pooled)} |")
    print(f"| mean of splits | {' | '.join(macro)} |")
    every = [r for r in rows if r["suite"] != "locomo"] + locomo_fit
    hit = [f"{answered(locomo_held, g, t):.3f}" for g, t in gates_on(every)]
    print(f"| LoCoMo 5-9 answered, fitted on all | {' | '.join(hit)} |")


if __name__ == "__main__":
    main()
