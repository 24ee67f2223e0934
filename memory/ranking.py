"""Step 3b, rank: fuse the two retrievers, re-rank, and decide whether to recall at all.

Reciprocal rank fusion (Cormack et al. 2009; True Memory §4) merges the dense and lexical
rankings without calibrating their scores: each list gives 1 / (k + rank). A small recency
bonus with a half-life breaks near-ties toward newer memories (MemX §3.4 uses recency as one
of its re-ranking factors). Turns said by someone the query names, and turns from a time
the query names, get a bonus. Rejection follows MemX §3.6: with no lexical evidence and a
weak best cosine, the honest answer is to recall nothing.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from memory.records import Chunk, Hit
from memory.when import Window

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
    lexical: Sequence[int],
    similarities: Mapping[int, float],
    k: int = 60,
    lexical_weight: float = 1.0,
) -> list[Hit]:
    """Hits for the chunks that survived filtering, by fused score, best first.

    `lexical_weight` scales the lexical ranking's RRF share against the dense one's (1.0).
    """
    dense_ids = [i for i, _ in dense if i in chunks]
    lexical_ids = [i for i in lexical if i in chunks]
    scores = rrf([dense_ids, lexical_ids], k, (1.0, lexical_weight))
    dense_rank = {i: r for r, i in enumerate(dense_ids, start=1)}
    lexical_rank = {i: r for r, i in enumerate(lexical_ids, start=1)}
    hits = [
        Hit(
            chunk=chunks[i],
            score=score,
            similarity=similarities.get(i),
            dense_rank=dense_rank.get(i),
            lexical_rank=lexical_rank.get(i),
        )
        for i, score in scores.items()
    ]
    return sorted(hits, key=lambda h: (-h.score, -h.chunk.id))


def rerank(
    hits: Sequence[Hit], now: float, half_life_days: float, weight: float, k: int = 60
) -> list[Hit]:
    """Add a recency bonus of at most `weight` × a first-rank RRF score, halving per half-life."""
    if half_life_days <= 0 or weight <= 0:
        return list(hits)
    top = 1.0 / (k + 1)
    rescored = []
    for hit in hits:
        age_days = max(0.0, now - hit.chunk.created_at) / SECONDS_PER_DAY
        bonus = weight * top * math.pow(0.5, age_days / half_life_days)
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
    bonus is `weight` × a first-rank RRF score (settings.py says why the default is 1.0):
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

    `windows` come from `memory.when.query_windows`. The bonus is `weight` × a first-rank RRF
    score for a hit whose `created_at` falls in any window. LoCoMo categories 1-4, first five
    conversations, hit +2.0 points at weight 1.0 (bench/tune_recall.py); 91 of 760 questions
    name a date.
    """
    if weight <= 0 or not windows:
        return list(hits)
    return _boost(hits, lambda chunk: any(w.contains(chunk.created_at) for w in windows), weight)


def _boost(hits: Sequence[Hit], chosen: Callable[[Chunk], bool], weight: float) -> list[Hit]:
    """Add `weight` × a first-rank RRF score (k = 60) to the chosen hits, then re-sort."""
    bonus = weight / 61.0
    boosted = [replace(h, score=h.score + bonus) if chosen(h.chunk) else h for h in hits]
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
