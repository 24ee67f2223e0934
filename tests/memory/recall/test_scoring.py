"""memory/recall/scoring.py ranks exactly as memory/recall/ranking.py's steps do.

Fixed candidate sets (seeded): chunks of a few sessions with turn numbers, names, ages and
dates; dense and lexical lists with cosines and BM25 scores. The vectorised `rank` must give
the same hits, in the same order, with the same scores, similarities and ranks as the
step-by-step functions, for both fusion methods, with and without bonuses, and abstain
when they do.
"""

import random

import pytest

from memory.recall.ranking import (
    boost_dated,
    boost_neighbours,
    boost_speakers,
    drop_weak,
    fuse,
    rerank,
    should_abstain,
)
from memory.recall.scoring import Ranked, Weights, rank
from memory.recall.when import query_windows
from memory.records import Chunk

NOW = 1_700_000_000.0
NAMES = ["Ana", "Bo", None, "Mary-Ann"]


def candidates(seed, n=60):
    rng = random.Random(seed)
    chunks = {}
    for i in rng.sample(range(1, 10_000), n):
        session = f"s{rng.randrange(4)}"
        chunks[i] = Chunk(
            id=i,
            message_id=i,
            user_id="u",
            session_id=session,
            role=rng.choice(["user", "assistant"]),
            name=rng.choice(NAMES),
            text=f"chunk {i}",
            created_at=NOW - rng.uniform(0, 400) * 86_400,
            message_hash=f"h{i}",
            turn=rng.choice([None, *range(12)]),
        )
    ids = list(chunks)
    dense = sorted(((i, rng.uniform(-0.1, 0.8)) for i in rng.sample(ids, 40)), key=lambda p: -p[1])
    lexical = sorted(((i, rng.uniform(0.5, 12)) for i in rng.sample(ids, 35)), key=lambda p: -p[1])
    similarities = dict(dense)
    similarities.update({i: rng.uniform(-0.1, 0.8) for i, _ in lexical if rng.random() < 0.8})
    found = {i for i, _ in dense} | {i for i, _ in lexical}
    return {i: c for i, c in chunks.items() if i in found}, dense, lexical, similarities


def stepwise(chunks, dense, lexical, similarities, query, w):
    hits = fuse(chunks, dense, lexical, similarities, w.lexical_weight, w.fusion, w.rrf_k)
    hits = rerank(hits, NOW, w.half_life_days, w.recency_weight)
    hits = boost_neighbours(hits, w.neighbours)
    hits = boost_speakers(hits, query, w.speaker_weight)
    hits = boost_dated(hits, query_windows(query), w.date_weight)
    measured = sum(h.similarity is not None for h in hits)
    if should_abstain(hits, w.min_similarity):
        return Ranked(hits, [], True, measured)
    kept = drop_weak(hits, w.min_similarity, w.min_lexical_similarity)
    return Ranked(hits, kept, False, measured)


QUERIES = ["What did Ana say about the trip?", "Where was I in May 2023?", "anything new"]
WEIGHTS = [
    Weights(),
    Weights(fusion="rrf", lexical_weight=1.3),
    Weights(recency_weight=0, neighbours=(0.0, 0.0), speaker_weight=0, date_weight=0),
    Weights(lexical_weight=0.7, neighbours=(0.3,), min_similarity=0.5),
]


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("query", QUERIES)
@pytest.mark.parametrize("weights", WEIGHTS, ids=range(len(WEIGHTS)))
def test_vectorised_ranking_equals_the_stepwise_one(seed, query, weights):
    chunks, dense, lexical, similarities = candidates(seed)
    expected = stepwise(chunks, dense, lexical, similarities, query, weights)
    got = rank(chunks, dense, lexical, similarities, NOW, query, query_windows(query), weights)
    assert got == expected
    shown = [(h.lexical_score, h.fused_score) for h in got.hits]  # not compared by Hit's ==
    assert shown == [(h.lexical_score, h.fused_score) for h in expected.hits]


def test_only_lexical_evidence_never_abstains_and_no_candidates_do():
    chunks, dense, lexical, similarities = candidates(1)
    assert rank({}, [], [], {}, NOW, "q", [], Weights()) == Ranked([], [], True)
    weak = {i: -0.5 for i in similarities}
    assert rank(chunks, [], lexical, weak, NOW, "q", [], Weights()).abstained is False
    dense_only = {i: c for i, c in chunks.items() if i in dict(dense)}
    assert rank(dense_only, dense, [], weak, NOW, "q", [], Weights()).abstained is True
