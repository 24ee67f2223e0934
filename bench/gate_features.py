"""The abstention gate's inputs, per question, for fitting and judging a gate (issue 16).

For every question of a memsuite suite (`--suite S --db COPY`, in-process as
`bench/memsuite_tune.py`) or of LoCoMo (`--locomo COPY --conversations 0-9`, as
`bench/tune_recall.py`; every question answerable), recall runs with the gate's verdict
recorded but not applied, and one JSON line is written per question: its split, its label
(answerable or never discussed), the current gate's verdict, whether recall dropped it before
the gate, whether the block held an excerpt (and, for an answerable question, its answer)
with the gate open, and the candidate signals (`signals`). A gate can only help where the
answer was there to keep. Blind suites (fresh3, fresh6, fresh8, fresh9, fresh11, fresh13, fresh15)
are written without their questions; read them by aggregate only.

    PYTHONPATH=. python bench/gate_features.py --suite long --db /work/bench-data/s22/m_long.db \\
        --out /tmp/gate5/long.jsonl
    PYTHONPATH=. python bench/gate_features.py --locomo /work/bench-data/locomo.db \\
        --conversations 0-9 --out /tmp/gate5/locomo.jsonl
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import threadpoolctl  # noqa: E402

import memory.recall.retrieval as retrieval  # noqa: E402
from bench.memsuite import PAST_CONTEXT, SUITES, personas_of  # noqa: E402
from memory import Settings  # noqa: E402
from memory.layer import MemoryLayer  # noqa: E402
from memory.recall import abstention  # noqa: E402
from memory.records import Hit  # noqa: E402
from memory.store.fts import fts_terms  # noqa: E402

BLIND = {"fresh3", "fresh6", "fresh8", "fresh9", "fresh11", "fresh13", "fresh15"}
STANDOUT = 0.5  # the standout rule's threshold before the learned gate


def signals(
    query: str, measured: int, kept: Sequence[Hit], hits: Sequence[Hit], expanded: bool
) -> dict[str, Any]:
    """The candidate signals the gate could read, from what `Retrieval` holds at the gate:
    the learned gate's (`abstention.gate_signals`) and others tried beside them."""
    read = abstention.gate_signals(query, kept, expanded)
    words = set(fts_terms(query))
    top = kept[0] if kept else None
    lexical = [h.lexical_score for h in hits if h.lexical_score is not None]
    by_cosine = max(kept, key=lambda h: h.similarity or -1.0) if kept else None
    return {
        **dataclasses.asdict(read),
        "gap": read.best - read.second,
        "lead": read.best - read.median,
        "standout": abstention.standout(kept, 3.0),
        "probability": abstention.answerable_probability(read),
        "measured": measured,
        "bm25_best": max(lexical) if lexical else 0.0,
        "top_lexical_rank": (top.lexical_rank or 0) if top else 0,
        "top_dense_rank": (top.dense_rank or 0) if top else 0,
        "cos_top_lexical_rank": (by_cosine.lexical_rank or 0) if by_cosine else 0,
        "agree": bool(top and top.lexical_rank == 1 and top.dense_rank == 1),
        "cover1": len(words & set(fts_terms(top.chunk.text))) / len(words)
        if top and words
        else 0.0,
        "query_words": len(query.split()),
        "content_words": len(words),
        "opens": abstention.stays_open(query, measured, kept),
        # The ten best kept hits as read (best first), for signals tried offline.
        "top": [
            {"text": h.chunk.text, "role": h.chunk.role, "similarity": h.similarity}
            for h in kept[: abstention.TOPIC_SIZE]
        ],
    }


class Recorder:
    """Patches recall to record the gate's inputs and verdict and always let the question
    through (the block is then the one the gate would have left open)."""

    def __init__(self) -> None:
        self.current: dict[str, Any] = {}
        self.ranked: Any = None
        rank, gate = retrieval.rank, retrieval.nothing_stands_out

        def ranking(*args: Any, **kwargs: Any) -> Any:
            self.ranked = rank(*args, **kwargs)
            return self.ranked

        def gating(
            query: str,
            measured: int,
            kept: Sequence[Hit],
            weight: float,
            threshold: float,
            min_answerable: float = 0.0,
            expanded: bool = False,
        ) -> bool:
            if threshold > 0 or min_answerable > 0:  # recall for a block, not a search
                self.current = {
                    "fires": gate(
                        query, measured, kept, weight, threshold, min_answerable, expanded
                    ),
                    "standout_fires": gate(query, measured, kept, weight, STANDOUT),
                    **signals(query, measured, kept, self.ranked.hits, expanded),
                }
            return False

        retrieval.rank = ranking
        retrieval.nothing_stands_out = gating

    def take(self) -> dict[str, Any]:
        """What the last recall recorded (empty: dropped before the gate), then forget it."""
        out, self.current = self.current, {}
        return out


def memsuite_rows(suite: str, db: Path, recorder: Recorder) -> list[dict[str, Any]]:
    from bench.memsuite_tune import ask

    cases = [c for p in personas_of(suite) for c in p.cases]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "memsuite.db"
        shutil.copyfile(db, copy)
        layer = MemoryLayer(Settings(db_path=copy))
        layer.wait_for_lexical_index()
        layer.embedder.embed_query("warm up")
        for number, case in enumerate(cases):
            ask(layer, number, case)
            seen = recorder.take()
            row = {
                "suite": suite,
                "split": case.split,
                "category": case.category,
                "answerable": case.category != "abstain",
                "excerpts": case.result["excerpts"],
                "answered": case.result["passed"] and case.category != "abstain",
                "dropped": not seen,
                **seen,
            }
            if suite in BLIND:
                row.pop("top", None)
            else:
                row["question"] = case.question
                row["expected"] = case.expected
            rows.append(row)
        layer.close()
    return rows


def locomo_rows(db: Path, conversations: str, recorder: Recorder) -> list[dict[str, Any]]:
    from bench.locomo import load, parse_range
    from bench.tune_recall import ask, layer_on

    convs = load(parse_range(conversations), None)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "locomo.db"
        shutil.copyfile(db, copy)
        layer, embedder = layer_on(copy, {})
        for conv in convs:
            for q in conv.questions:
                if q.category not in (1, 2, 3, 4) or not (q.evidence or q.audited):
                    continue
                result = ask(layer, conv, q)
                seen = recorder.take()
                hit = any(result["inside"][d] for d in (q.audited or q.evidence))
                hit_original = any(result["inside"][d] for d in q.evidence) if q.evidence else None
                every = all(result["inside"][d] for d in (q.audited or q.evidence))
                rows.append(
                    {
                        "suite": "locomo",
                        "split": "locomo-tune" if q.conv < 5 else "locomo-held",
                        "conv": q.conv,
                        "category": q.category,
                        "answerable": True,
                        "excerpts": PAST_CONTEXT in result["block"].lower(),
                        "answered": hit,
                        "hit_original": hit_original,
                        "all": every,
                        "tokens": result["tokens"],
                        "dropped": not seen,
                        "question": q.text,
                        **seen,
                    }
                )
        embedder.save()
        layer.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--suite", choices=SUITES)
    parser.add_argument("--db", type=Path, help="a database bench/memsuite.py replayed")
    parser.add_argument("--locomo", type=Path, help="a database bench/locomo.py replayed")
    parser.add_argument("--conversations", default="0-9")
    parser.add_argument("--out", type=Path, required=True, help="JSON lines, one per question")
    args = parser.parse_args()
    threadpoolctl.threadpool_limits(1, user_api="blas")  # as moim serve does
    recorder = Recorder()
    if args.locomo:
        rows = locomo_rows(args.locomo, args.conversations, recorder)
    elif args.suite and args.db:
        rows = memsuite_rows(args.suite, args.db, recorder)
    else:
        raise SystemExit("give --suite and --db, or --locomo")
    args.out.write_text("".join(json.dumps(row) + "\n" for row in rows))
    print(f"{len(rows)} questions -> {args.out}")


if __name__ == "__main__":
    main()
