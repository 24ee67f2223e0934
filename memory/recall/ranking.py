"""Step 3b, rank: fuse the two retrievers, re-rank, and decide whether to recall at all.

Fusion gives each candidate one score in [0, 1]. By default it mixes the retrievers' own
scores (Bruch et al. 2023, "An Analysis of Fusion Functions for Hybrid Retrieval": a convex
combination of normalised scores beats RRF): BM25 over the query's best BM25, and the cosine
min-max scaled over the candidates, weighted w : 1. A turn that matches the query's words a
little and its meaning well keeps both facts; reciprocal rank fusion (Cormack et al. 2009;
True Memory §4), the other method, keeps only the two ranks, so a near-tie in BM25 at rank
2 and a clear gap at rank 2 weigh the same. LoCoMo (bench/tune_recall.py), categories 1-4,
original labels, hit / all against RRF on one database: +3.6 / +3.2 points on the tuning
conversations and +2.7 / +2.4 held out. RRF stays available (`Settings.fusion`), scaled to
[0, 1] too.

Bonuses are fractions of a perfect fused score (1.0): a small recency bonus with a half-life
breaks near-ties toward newer memories (MemX §3.4), and turns said by someone the query
names, and turns from a time the query names, rise. Rejection follows MemX §3.6: with no
lexical evidence and a weak best cosine, the honest answer is to recall nothing.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Literal

from memory.recall.when import Window
from memory.records import Chunk, Hit

SECONDS_PER_DAY = 86_400.0
_WORDS = re.compile(r"[\w-]+")


def rrf(
    rankings: Sequence[Sequence[int]], k: int = 60, weights: Sequence[float] | None = None
) -> dict[int, float]:
    """Reciprocal-rank-fused scores of ids over several best-first rankings.

    Ranking i contributes `weights[i]` / (k + rank) (weight 1 for every ranking when None).
    """
    scores: dict[int, float] = {}
    for position, ranking in enumerate(rankings):
        weight = 1.0 if weights is None else weights[position]
        for rank, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + weight / (k + rank)
    return scores


def fuse(
    chunks: Mapping[int, Chunk],
    dense: Sequence[tuple[int, float]],
    lexical: Sequence[tuple[int, float]],
    similarities: Mapping[int, float],
    lexical_weight: float = 1.0,
    method: Literal["scores", "rrf"] = "scores",
    k: int = 60,
) -> list[Hit]:
    """Hits for the chunks that survived filtering, by fused score in [0, 1], best first.

    `dense` holds (id, cosine) and `lexical` (id, BM25, higher is better), each best first;
    `similarities` has the cosine of every candidate that has one. `lexical_weight` is the
    lexical side's weight against the dense side's 1.0. `method` is "scores" (the
    retrievers' normalised scores, mixed) or "rrf" (reciprocal ranks with constant `k`).
    """
    dense_ids = [i for i, _ in dense if i in chunks]
    lexical_ids = [i for i, _ in lexical if i in chunks]
    if method == "rrf":
        top = (1.0 + lexical_weight) / (k + 1)  # a first rank in both lists
        ranked = rrf([dense_ids, lexical_ids], k, (1.0, lexical_weight))
        scores = {i: score / top for i, score in ranked.items()}
    else:
        bm25 = {i: score for i, score in lexical if i in chunks}
        cosines = similarities if dense else {}  # no dense search ran: BM25 alone ranks
        scores = mixed_scores(chunks.keys(), cosines, bm25, lexical_weight)
    dense_rank = {i: r for r, i in enumerate(dense_ids, start=1)}
    lexical_rank = {i: r for r, i in enumerate(lexical_ids, start=1)}
    bm25_of = dict(lexical)  # shown with the hit, not ranked by here
    hits = [
        Hit(
            chunk=chunks[i],
            score=score,
            similarity=similarities.get(i),
            dense_rank=dense_rank.get(i),
            lexical_rank=lexical_rank.get(i),
            lexical_score=bm25_of.get(i),
            fused_score=score,
        )
        for i, score in scores.items()
    ]
    return sorted(hits, key=lambda h: (-h.score, -h.chunk.id))


def mixed_scores(
    ids: Iterable[int],
    similarities: Mapping[int, float],
    bm25: Mapping[int, float],
    lexical_weight: float,
) -> dict[int, float]:
    """(w × BM25 / the best BM25 + the cosine min-max scaled over `ids`) / (w + 1), per id.

    BM25 is 0 for an id the lexical search did not return, and so is the scaled cosine for
    an id without one. Dividing BM25 by the best keeps its gaps: a runner-up close to the best
    scores close to it. Min-max on the cosine spreads MiniLM's narrow band (a question's
    candidates mostly fall within 0.2-0.6) over [0, 1], as wide as BM25's.
    """
    ids = list(ids)
    cosines = [similarities[i] for i in ids if i in similarities]
    low, high = (min(cosines), max(cosines)) if cosines else (0.0, 0.0)
    best = max(bm25.values(), default=0.0)
    scores = {}
    for i in ids:
        cosine = similarities.get(i)
        if cosine is None:
            dense_part = 0.0
        elif high > low:
            dense_part = (cosine - low) / (high - low)
        else:
            dense_part = 1.0  # one candidate, or all alike: each is the best
        lexical_part = bm25.get(i, 0.0) / best if best > 0 else 0.0
        scores[i] = (lexical_weight * lexical_part + dense_part) / (lexical_weight + 1.0)
    return scores


def rerank(hits: Sequence[Hit], now: float, half_life_days: float, weight: float) -> list[Hit]:
    """Add a recency bonus of at most `weight` (a fused score is in [0, 1]), halving per
    half-life."""
    if half_life_days <= 0 or weight <= 0:
        return list(hits)
    rescored = []
    for hit in hits:
        age_days = max(0.0, now - hit.chunk.created_at) / SECONDS_PER_DAY
        bonus = weight * math.pow(0.5, age_days / half_life_days)
        rescored.append(replace(hit, score=hit.score + bonus))
    return sorted(rescored, key=lambda h: (-h.score, -h.chunk.id))


def boost_neighbours(hits: Sequence[Hit], weights: Sequence[float]) -> list[Hit]:
    """Favour a turn whose neighbours in the conversation also scored: a question and its answer.

    Neighbours are hits of the same session whose turn numbers (`Chunk.turn`: the place among
    the session's user and assistant messages) differ by d; `weights[d - 1]` is the share of
    a neighbour's score lent at distance d. A hit gains the best loan at each distance,
    summed over distances, so an answer that shares no word with the query ("They were
    scared but we reassured them") rises with the question it answers ("How did they handle
    the accident?"); distance 2 is the same speaker's turn before or after. Only hits lend,
    and only the best loan at a distance counts, so a turn between two strong neighbours is
    not lifted past both. LoCoMo categories 1-4 (bench/tune_recall.py), original hit / all:
    0.2 at distance 1 gained +2.3 / +2.1 points on the tuning conversations and +1.9 / +2.1
    held out; 0.05 at distance 2 another +0.6 / +0.6 and +0.9 / +0.6.
    """
    if not any(w > 0 for w in weights):
        return list(hits)
    best: dict[tuple[str, int], float] = {}  # (session, turn) → its best hit's score
    for hit in hits:
        if hit.chunk.turn is not None:
            place = (hit.chunk.session_id, hit.chunk.turn)
            best[place] = max(best.get(place, hit.score), hit.score)
    rescored = []
    for hit in hits:
        session, turn = hit.chunk.session_id, hit.chunk.turn
        loan = 0.0
        if turn is not None:
            for d, weight in enumerate(weights, start=1):
                near = max(best.get((session, turn - d), 0.0), best.get((session, turn + d), 0.0))
                loan += weight * near
        rescored.append(replace(hit, score=hit.score + loan) if loan > 0 else hit)
    return sorted(rescored, key=lambda h: (-h.score, -h.chunk.id))


def boost_speakers(hits: Sequence[Hit], query: str, weight: float) -> list[Hit]:
    """Favour turns said by someone the query names ("What did Ana say about …").

    Names come from the hits themselves (a message's `name`), so nothing is guessed. The
    bonus is `weight` (settings.py says why the default is 0.4):
    it lifts the named speaker's turns above many others', which costs questions that name
    the wrong speaker (LoCoMo category 5).
    """
    if weight <= 0:
        return list(hits)
    words = {w.lower() for w in _WORDS.findall(query)}
    named = {h.chunk.name for h in hits if h.chunk.name and h.chunk.name.lower() in words}
    if not named:
        return list(hits)
    return _boost(hits, lambda chunk: chunk.name in named, weight)


def boost_dated(hits: Sequence[Hit], windows: Sequence[Window], weight: float) -> list[Hit]:
    """Favour turns from a time the query names ("What did Ana cook on 9 November, 2022?").

    `windows` come from `memory.recall.when.query_windows`. The bonus is `weight` for a hit whose
    `created_at` falls in any window. LoCoMo categories 1-4, first five conversations, hit
    +2.0 points (bench/tune_recall.py, RRF); 91 of 760 questions name a date.
    """
    if weight <= 0 or not windows:
        return list(hits)
    return _boost(hits, lambda chunk: any(w.contains(chunk.created_at) for w in windows), weight)


def _boost(hits: Sequence[Hit], chosen: Callable[[Chunk], bool], weight: float) -> list[Hit]:
    """Add `weight` to the chosen hits' scores, then re-sort."""
    boosted = [replace(h, score=h.score + weight) if chosen(h.chunk) else h for h in hits]
    return sorted(boosted, key=lambda h: (-h.score, -h.chunk.id))


def drop_weak(
    hits: Sequence[Hit], min_similarity: float, min_lexical_similarity: float
) -> list[Hit]:
    """Drop hits that only one weak signal supports.

    A dense-only hit below `min_similarity` is noise that happened to rank; a lexical hit
    whose cosine is below `min_lexical_similarity` shares a word with the query but not its
    meaning. Hits without a known similarity are kept.
    """
    kept = []
    for hit in hits:
        floor = min_similarity if hit.lexical_rank is None else min_lexical_similarity
        if hit.similarity is None or hit.similarity >= floor:
            kept.append(hit)
    return kept


def should_abstain(hits: Sequence[Hit], min_similarity: float) -> bool:
    """True when nothing was found lexically and the best cosine is below the threshold."""
    if not hits:
        return True
    if any(h.lexical_rank is not None for h in hits):
        return False
    best = max((h.similarity for h in hits if h.similarity is not None), default=-1.0)
    return best < min_similarity
