"""Sentence-level cosines of a question's kept hits, offline, for the gate (issue 16).

A stored turn is a chunk of up to 1,000 characters; in a chatty history the detail that
answers a question is one clause of a long turn about five things, so the whole chunk's cosine
is the topic's. The question's cosine with the hit's best sentence might tell "answers it"
(one sentence close to the question) from "on the topic" (none). This reads
`bench/gate_features.py`'s rows (the question and the text of its ten best kept hits, "top"),
embeds each hit's sentences with moim's own embedder, and writes the rows again with the
candidate signals added (`sent_*`, `clause_*`, `tok_*`; `bench/gate_loso.py --extra NAME` reads
them), and for an answerable question the rank of the hit holding its answer by chunk cosine
and by best-sentence cosine (`rank_*`). Two ways to get a sentence's vector:

- `sent` / `clause`: each sentence (or clause) embedded on its own (one more model run each);
- `tok`: the mean of the hit's own run's last hidden states over the sentence's tokens (the
  states the chunk's vector pools; free at ingest), the hit embedded alone (moim's input may
  lead with the turn before it).

    PYTHONPATH=. python bench/gate_sentences.py /tmp/sent28/f/*.jsonl --out /tmp/sent28/s
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import threadpoolctl  # noqa: E402

from memory.embedding import FastEmbedder, _run_one_states, normalise  # noqa: E402

Row = dict[str, Any]
Span = tuple[int, int]

_SENTENCE_END = re.compile(r"(?<=[.!?…])[\"')\]]*\s+|\n+")
# A clause: a sentence cut again at semicolons, dashes, colons and ", and/but/so/while".
_CLAUSE_END = re.compile(r";\s+|\s+[–—-]+\s+|:\s+|,\s+(?=(?:and|but|so|while|though)\b)")
MIN_CHARS = 12  # a shorter piece ("Thanks!", "Yes.") joins the one after it
THREE = 3  # the best hits the gate reads words from (abstention.COVERED_HITS)


def _spans(text: str, cut: re.Pattern[str], within: Span | None = None) -> list[Span]:
    """The pieces of `text` (or of its span `within`) between matches of `cut`, as spans;
    a piece under MIN_CHARS joins the next."""
    start, end = within or (0, len(text))
    pieces: list[Span] = []
    at = start
    for match in cut.finditer(text, start, end):
        pieces.append((at, match.start()))
        at = match.end()
    pieces.append((at, end))
    out: list[Span] = []
    carry: int | None = None
    for a, b in pieces:
        a = carry if carry is not None else a
        if len(text[a:b].strip()) < MIN_CHARS:
            carry = a
            continue
        carry = None
        out.append((a, b))
    if carry is not None:
        if out:
            out[-1] = (out[-1][0], end)
        elif text[carry:end].strip():
            out.append((carry, end))
    return out


def sentences(text: str) -> list[Span]:
    """`text`'s sentences, as spans."""
    return _spans(text, _SENTENCE_END)


def clauses(text: str) -> list[Span]:
    """`text`'s clauses: each sentence cut again (`_CLAUSE_END`)."""
    return [c for s in sentences(text) for c in _spans(text, _CLAUSE_END, s)]


class Vectors:
    """Vectors of questions, pieces and token-pooled pieces, each text embedded once."""

    def __init__(self) -> None:
        self.embedder = FastEmbedder(batch_size=16)
        self._pieces: dict[str, np.ndarray] = {}
        self._states: dict[str, tuple[Any, np.ndarray]] = {}

    def pieces(self, texts: Sequence[str]) -> list[np.ndarray]:
        todo = list(dict.fromkeys(t for t in texts if t not in self._pieces))
        for i in range(0, len(todo), 256):
            batch = todo[i : i + 256]
            for text, row in zip(batch, self.embedder.embed_documents(batch), strict=True):
                self._pieces[text] = row
        return [self._pieces[t] for t in texts]

    def query(self, text: str) -> np.ndarray:
        return self.embedder.embed_query(text)

    def pooled(self, text: str, spans: Sequence[Span]) -> list[np.ndarray | None]:
        """Each span's mean of `text`'s last hidden states over its tokens (None: cut off)."""
        if text not in self._states:
            model: Any = self.embedder._model.model
            encoding = model.tokenizer.encode(text)
            _, states = _run_one_states(model, encoding)
            self._states[text] = (encoding.offsets, states)
        offsets, states = self._states[text]
        out: list[np.ndarray | None] = []
        for a, b in spans:
            tokens = [
                i
                for i, (s, e) in enumerate(offsets)
                if e > s and s >= a and e <= b and i < len(states)
            ]
            out.append(normalise(states[tokens].mean(axis=0)[None, :])[0] if tokens else None)
        return out


def _best(cosines: Sequence[float]) -> float:
    return max(cosines, default=0.0)


def _signals(prefix: str, best: list[float], roles: list[str]) -> dict[str, float]:
    """From each hit's best-piece cosine (best first): the best of the three best hits, of
    all ten, its lead over the ten's median, the best among the user's turns."""
    if not best:
        return {}
    user = [c for c, r in zip(best, roles, strict=True) if r == "user"]
    return {
        f"{prefix}_best3": _best(best[:THREE]),
        f"{prefix}_best10": _best(best),
        f"{prefix}_standout": _best(best[:THREE]) - statistics.median(best),
        f"{prefix}_user": _best(user),
    }


def _rank(scores: list[float], index: int) -> int:
    """1 + how many hits score above hit `index`."""
    return 1 + sum(s > scores[index] for s in scores)


def augment(row: Row, vectors: Vectors) -> Row:
    """`row` with the sentence signals added (rows of blind suites carry no text: unchanged)."""
    top = row.get("top") or []
    if not top or "question" not in row:
        return row
    q = vectors.query(row["question"])
    roles = [h["role"] for h in top]
    chunk = [h["similarity"] or 0.0 for h in top]
    out = dict(row)
    ways: dict[str, Callable[[str], list[Span]]] = {"sent": sentences, "clause": clauses}
    per_hit: dict[str, list[float]] = {}
    for name, split in ways.items():
        best = []
        for h in top:
            spans = split(h["text"]) or [(0, len(h["text"]))]
            rows = vectors.pieces([h["text"][a:b].strip() for a, b in spans])
            best.append(float(max(float(r @ q) for r in rows)))
        per_hit[name] = best
        out.update(_signals(name, best, roles))
        out[f"{name}_count"] = float(np.mean([len(split(h["text"])) for h in top]))
    best = []
    for h in top:
        spans = sentences(h["text"]) or [(0, len(h["text"]))]
        pooled = [v for v in vectors.pooled(h["text"], spans) if v is not None]
        best.append(max((float(v @ q) for v in pooled), default=h["similarity"] or 0.0))
    per_hit["tok"] = best
    out.update(_signals("tok", best, roles))
    out["chunk_best3"] = _best(chunk[:THREE])
    expected = _norm(row.get("expected") or "")
    if row.get("answerable") and expected:
        holding = [i for i, h in enumerate(top) if expected in _norm(h["text"])]
        if holding:
            i = holding[0]
            out["rank_kept"] = i + 1
            out["rank_chunk"] = _rank(chunk, i)
            for name, scores in per_hit.items():
                out[f"rank_{name}"] = _rank(scores, i)
            # The cosine of the sentence that says the answer (an oracle: the most any
            # sentence cosine could show of it), and the chunk's.
            text = top[i]["text"]
            said = [(a, b) for a, b in sentences(text) if expected in _norm(text[a:b])]
            if said:
                a, b = said[0]
                out["answer_sent"] = float(vectors.pieces([text[a:b].strip()])[0] @ q)
                out["answer_chunk"] = chunk[i]
    return out


def _norm(text: str) -> str:
    return " ".join(text.split()).lower()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("files", nargs="+", type=Path, help="bench/gate_features.py output")
    parser.add_argument("--out", type=Path, required=True, help="a directory for the rows")
    args = parser.parse_args()
    threadpoolctl.threadpool_limits(1, user_api="blas")
    args.out.mkdir(parents=True, exist_ok=True)
    vectors = Vectors()
    for path in args.files:
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        done = [augment(r, vectors) for r in rows]
        (args.out / path.name).write_text("".join(json.dumps(r) + "\n" for r in done))
        print(f"{path.name}: {len(done)} rows", flush=True)


if __name__ == "__main__":
    main()
