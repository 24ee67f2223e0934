"""Step 3b, rank, over arrays: `memory.recall.ranking`'s steps on all candidates at once.

`ranking.py` says what each step does and why (fusion of normalised scores or RRF, the
recency bonus, neighbour loans, the speaker and date bonuses, abstention, the weak-hit
floor). This module computes the same numbers, in the same order of operations, as numpy
arrays over the candidates instead of one `Hit` record per candidate per step (a recall
made ~230 `dataclasses.replace` calls and five sorts), and builds each record once.
`tests/memory/recall/test_scoring.py` pins it to ranking.py's functions, order and scores.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, overload

import numpy as np

from memory.recall.ranking import SECONDS_PER_DAY, rrf
from memory.recall.when import Window
from memory.records import Chunk, Hit

_WORDS = re.compile(r"[\w-]+")  # ranking.boost_speakers' words


@dataclass(frozen=True, slots=True)
class Weights:
    """The ranking settings (memory.settings.Settings has each one's reason)."""

    lexical_weight: float = 1.0
    fusion: Literal["scores", "rrf"] = "scores"
    rrf_k: int = 60
    half_life_days: float = 30.0
    recency_weight: float = 0.05
    neighbours: tuple[float, ...] = (0.2, 0.05)
    speaker_weight: float = 0.4
    date_weight: float = 0.4
    min_similarity: float = 0.35
    min_lexical_similarity: float = 0.15


@dataclass(frozen=True, slots=True)
class Ranked:
    """What ranking found: every candidate as a hit, best first, and the hits that pass the
    weak-hit floor (`kept`); `abstained` when recall should inject nothing."""

    hits: Sequence[Hit]
    kept: list[Hit]
    abstained: bool
    # How many candidates have a cosine (the abstention gate's size check).
    measured: int = 0

    def hits_where(self, test: Callable[[Chunk, float | None], bool]) -> list[Hit]:
        """The hits whose chunk and cosine pass `test`, best first: of ~150 candidates, only
        those are built as records (recall's later turns look at a few)."""
        if isinstance(self.hits, _Hits):
            return self.hits.where(test)
        return [h for h in self.hits if test(h.chunk, h.similarity)]


def rank(
    chunks: Mapping[int, Chunk],
    dense: Sequence[tuple[int, float]],
    lexical: Sequence[tuple[int, float]],
    similarities: Mapping[int, float],
    now: float,
    query: str,
    windows: Sequence[Window],
    weights: Weights,
) -> Ranked:
    """The hits of `chunks`, fused and re-ranked, best first, and those above the floor.

    Arguments are `ranking.fuse`'s; the scores and the order equal ranking.py's step by step
    (fuse, rerank, boost_neighbours, boost_speakers, boost_dated), `abstained` its
    `should_abstain` and `kept` its `drop_weak`.
    """
    if not chunks:
        return Ranked([], [], True)
    # Candidates in the mapping's order, as plain ints and as an array (numpy scalars cost
    # ~0.1 µs each to make and convert: they are not taken one by one).
    id_list, listed = list(chunks), list(chunks.values())
    ids = np.array(id_list, dtype=np.int64)
    dense_rank = _ranks(id_list, [i for i, _ in dense if i in chunks])
    lexical_rank = _ranks(id_list, [i for i, _ in lexical if i in chunks])
    cosine = np.array([similarities.get(i, np.nan) for i in id_list], dtype=np.float64)
    fused = score = _fused(id_list, chunks, dense, lexical, cosine, weights)
    bm25_of = dict(lexical)  # shown with the hit, not ranked by here
    created = np.array([c.created_at for c in listed], dtype=np.float64)
    if weights.half_life_days > 0 and weights.recency_weight > 0:
        age_days = np.maximum(0.0, now - created) / SECONDS_PER_DAY
        # math.pow per candidate, as ranking.rerank: numpy's vectorised power may differ
        # from the C library's in the last bit, and then a near-tie could turn.
        halves = [math.pow(0.5, age / weights.half_life_days) for age in age_days.tolist()]
        score = score + weights.recency_weight * np.array(halves)
    if any(w > 0 for w in weights.neighbours):
        score = score + _loans(listed, score, weights.neighbours)
    if weights.speaker_weight > 0:
        words = {w.lower() for w in _WORDS.findall(query)}
        named = {c.name for c in listed if c.name and c.name.lower() in words}
        if named:
            chosen = np.array([c.name in named for c in listed])
            score = np.where(chosen, score + weights.speaker_weight, score)
    if weights.date_weight > 0 and windows:
        dated = np.array([any(w.contains(c.created_at) for w in windows) for c in listed])
        score = np.where(dated, score + weights.date_weight, score)
    order = np.lexsort((-ids, -score))
    # Plain Python numbers, read once: indexing an array per candidate makes numpy scalars,
    # which cost most of the time building the records took (same values: tolist is exact).
    scores, cosines, fused_scores = score.tolist(), cosine.tolist(), fused.tolist()
    dense_ranks, lexical_ranks = dense_rank.tolist(), lexical_rank.tolist()

    def hit(i: int) -> Hit:
        return Hit(
            chunk=listed[i],
            score=scores[i],
            similarity=None if math.isnan(cosines[i]) else cosines[i],
            dense_rank=dense_ranks[i] or None,
            lexical_rank=lexical_ranks[i] or None,
            lexical_score=bm25_of.get(id_list[i]),
            fused_score=fused_scores[i],
        )

    known = ~np.isnan(cosine)
    hits = _Hits(order.tolist(), hit, listed, cosines)
    measured = int(known.sum())
    if not (lexical_rank > 0).any():  # no lexical hit and a weak best cosine: abstain
        best = cosine[known].max() if known.any() else -1.0
        if best < weights.min_similarity:
            return Ranked(hits, [], True, measured)
    floor = np.where(lexical_rank > 0, weights.min_lexical_similarity, weights.min_similarity)
    passes = (~known | (np.where(known, cosine, 0.0) >= floor))[order]
    kept = [hits[n] for n in np.flatnonzero(passes).tolist()]
    return Ranked(hits, kept, False, measured)


class _Hits(Sequence[Hit]):
    """The ranked candidates as records, each built when first read: a recall reads the
    few it keeps; the rest only when it looks for later turns or says what it left out."""

    __slots__ = ("_built", "_chunks", "_cosines", "_make", "_order")

    def __init__(
        self,
        order: list[int],
        make: Callable[[int], Hit],
        chunks: list[Chunk],
        cosines: list[float],
    ) -> None:
        """`order`: candidate positions, best first; `make` builds a position's record;
        `chunks` and `cosines` (NaN: none) by position, read without building one."""
        self._order, self._make = order, make
        self._chunks, self._cosines = chunks, cosines
        self._built: list[Hit | None] = [None] * len(order)

    def where(self, test: Callable[[Chunk, float | None], bool]) -> list[Hit]:
        """`Ranked.hits_where`: the records of the candidates that pass, best first."""
        chunks, cosines = self._chunks, self._cosines
        return [
            self._at(n)
            for n, i in enumerate(self._order)
            if test(chunks[i], None if math.isnan(cosines[i]) else cosines[i])
        ]

    def _at(self, n: int) -> Hit:
        built = self._built[n]
        if built is None:  # two threads may build one twice: equal records, either kept
            built = self._built[n] = self._make(self._order[n])
        return built

    @overload
    def __getitem__(self, index: int) -> Hit: ...
    @overload
    def __getitem__(self, index: slice) -> list[Hit]: ...
    def __getitem__(self, index: int | slice) -> Hit | list[Hit]:
        if isinstance(index, slice):
            return [self._at(n) for n in range(len(self._order))[index]]
        return self._at(range(len(self._order))[index])

    def __len__(self) -> int:
        return len(self._order)

    def __iter__(self) -> Iterator[Hit]:
        return (self._at(n) for n in range(len(self._order)))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, str):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # equal to a list, but not one

    def __repr__(self) -> str:
        return f"_Hits({list(self)!r})"


def _ranks(ids: list[int], ranked: list[int]) -> np.ndarray:
    """1-based position of each id in `ranked` (0 where absent)."""
    where = {chunk_id: position for position, chunk_id in enumerate(ranked, start=1)}
    return np.array([where.get(i, 0) for i in ids], dtype=np.int64)


def _fused(
    ids: list[int],
    chunks: Mapping[int, Chunk],
    dense: Sequence[tuple[int, float]],
    lexical: Sequence[tuple[int, float]],
    cosine: np.ndarray,
    weights: Weights,
) -> np.ndarray:
    """`ranking.fuse`'s score of each id, in [0, 1]."""
    w = weights.lexical_weight
    if weights.fusion == "rrf":
        k = weights.rrf_k
        ranked = rrf(
            [[i for i, _ in dense if i in chunks], [i for i, _ in lexical if i in chunks]],
            k,
            (1.0, w),
        )
        top = (1.0 + w) / (k + 1)
        return np.array([ranked.get(i, 0.0) / top for i in ids], dtype=np.float64)
    bm25 = {i: s for i, s in lexical if i in chunks}
    lexical_score = np.array([bm25.get(i, 0.0) for i in ids], dtype=np.float64)
    best = max(bm25.values(), default=0.0)
    lexical_part = lexical_score / best if best > 0 else np.zeros(len(ids))
    dense_part = np.zeros(len(ids))
    if dense:  # no dense search ran: BM25 alone ranks
        known = ~np.isnan(cosine)
        if known.any():
            low, high = cosine[known].min(), cosine[known].max()
            scaled = (cosine - low) / (high - low) if high > low else np.ones(len(ids))
            dense_part = np.where(known, scaled, 0.0)
    scores: np.ndarray = (w * lexical_part + dense_part) / (w + 1.0)
    return scores


def _loans(listed: list[Chunk], score: np.ndarray, weights: Sequence[float]) -> np.ndarray:
    """`ranking.boost_neighbours`' loan of each hit: the best score at each distance d of
    its turn in its session, times `weights[d - 1]`, summed over distances."""
    # turn -> best score, per session: int keys, no (session, turn) tuple built per lookup
    best: dict[str, dict[int, float]] = {}
    for chunk, value in zip(listed, score.tolist(), strict=True):
        if chunk.turn is not None:
            turns = best.setdefault(chunk.session_id, {})
            held = turns.get(chunk.turn, value)
            turns[chunk.turn] = value if value > held else held  # max(held, value)
    loans = np.zeros(len(listed))
    for position, chunk in enumerate(listed):
        turn = chunk.turn
        if turn is None:
            continue
        turns = best[chunk.session_id]
        loan = 0.0
        for d, weight in enumerate(weights, start=1):
            before, after = turns.get(turn - d, 0.0), turns.get(turn + d, 0.0)
            loan += weight * (after if after > before else before)  # max(before, after)
        loans[position] = loan
    return loans
