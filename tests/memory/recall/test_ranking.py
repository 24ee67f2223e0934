"""memory/recall/ranking.py: score and reciprocal rank fusion, recency re-ranking, abstention."""

from datetime import UTC, datetime

import pytest

from memory.recall.ranking import (
    SECONDS_PER_DAY,
    boost_dated,
    boost_neighbours,
    fuse,
    rerank,
    rrf,
    should_abstain,
)
from memory.recall.when import Window, query_windows
from memory.records import Chunk, Hit

NOW = 1_700_000_000.0


def chunk(chunk_id, created_at=NOW):
    return Chunk(
        chunk_id,
        100 + chunk_id,
        "alice",
        "s-1",
        "user",
        None,
        f"text {chunk_id}",
        created_at,
        f"hash{chunk_id}",
    )


def hit(chunk_id, score=0.0, similarity=None, dense_rank=None, lexical_rank=None, created_at=NOW):
    return Hit(chunk(chunk_id, created_at), score, similarity, dense_rank, lexical_rank)


def test_rrf_of_one_ranking():
    assert rrf([[7, 8, 9]], k=1) == {7: 1 / 2, 8: 1 / 3, 9: 1 / 4}


def test_rrf_sums_reciprocal_ranks_over_rankings():
    assert rrf([[1, 2, 3], [3, 1]], k=60) == {
        1: 1 / 61 + 1 / 62,
        2: 1 / 62,
        3: 1 / 63 + 1 / 61,
    }


def test_rrf_of_nothing_is_empty():
    assert rrf([[], []]) == {}


def test_fuse_mixes_bm25_over_its_best_with_the_cosine_min_max_scaled():
    chunks = {i: chunk(i) for i in (1, 2, 3)}
    similarities = {1: 0.9, 2: 0.8, 3: 0.4}
    hits = fuse(
        chunks,
        dense=[(1, 0.9), (2, 0.8)],
        lexical=[(2, 8.0), (3, 2.0)],
        similarities=similarities,
        lexical_weight=1.0,
    )
    # cosine scaled: 1 → 1.0, 2 → 0.8, 3 → 0.0; BM25 over the best: 2 → 1.0, 3 → 0.25
    assert hits == [
        Hit(chunks[2], pytest.approx((1.0 + 0.8) / 2), 0.8, 2, 1),
        Hit(chunks[1], pytest.approx((0.0 + 1.0) / 2), 0.9, 1, None),
        Hit(chunks[3], pytest.approx((0.25 + 0.0) / 2), 0.4, None, 2),
    ]


def test_fused_scores_keep_the_gaps_ranks_lose():
    # Same ranks in both cases; only how far the runner-up trails in BM25 differs.
    chunks = {i: chunk(i) for i in (1, 2, 3)}
    similarities = {1: 0.5, 2: 0.55, 3: 0.1}  # scaled: 2 → 1.0, 1 → 0.89, 3 → 0.0
    dense = [(2, 0.55), (1, 0.5), (3, 0.1)]
    close, far = [(1, 10.0), (2, 9.9)], [(1, 10.0), (2, 1.0)]
    assert [h.chunk.id for h in fuse(chunks, dense, close, similarities)][:2] == [2, 1]
    assert [h.chunk.id for h in fuse(chunks, dense, far, similarities)][:2] == [1, 2]
    by_rank = [fuse(chunks, dense, found, similarities, method="rrf") for found in (close, far)]
    assert by_rank[0] == by_rank[1]  # RRF cannot tell the two apart


def test_fused_scores_stay_within_zero_and_one():
    chunks = {i: chunk(i) for i in range(1, 6)}
    similarities = {1: -0.2, 2: 0.1, 3: 0.3, 4: 0.7}  # 5 has none
    hits = fuse(chunks, [(4, 0.7), (3, 0.3)], [(5, 3.0), (1, 1.5)], similarities, 1.3)
    assert all(0.0 <= h.score <= 1.0 for h in hits)
    assert {h.chunk.id: h.score for h in hits}[5] == pytest.approx(1.3 / 2.3)


def test_without_a_dense_search_bm25_alone_ranks():
    # retrievers "lexical": cosines are still known (for the weak-hit floor), but unranked
    chunks = {i: chunk(i) for i in (1, 2)}
    hits = fuse(chunks, [], [(1, 4.0), (2, 2.0)], {1: 0.1, 2: 0.9})
    assert [(h.chunk.id, h.score) for h in hits] == [(1, 0.5), (2, 0.25)]


def test_fuse_gives_a_lone_candidate_the_full_dense_share():
    hits = fuse({1: chunk(1)}, [(1, 0.42)], [], {1: 0.42})
    assert hits[0].score == pytest.approx(0.5)


def test_rrf_fusion_is_scaled_so_a_first_rank_in_both_lists_scores_one():
    chunks = {i: chunk(i) for i in (1, 2, 3)}
    hits = fuse(
        chunks,
        dense=[(1, 0.9), (2, 0.8)],
        lexical=[(2, 5.0), (3, 1.0)],
        similarities={1: 0.9, 2: 0.8, 3: 0.4},
        method="rrf",
        k=60,
    )
    top = 2 / 61
    assert hits == [
        Hit(chunks[2], pytest.approx((1 / 62 + 1 / 61) / top), 0.8, 2, 1),
        Hit(chunks[1], pytest.approx((1 / 61) / top), 0.9, 1, None),
        Hit(chunks[3], pytest.approx((1 / 62) / top), 0.4, None, 2),
    ]
    both = fuse({1: chunk(1)}, [(1, 0.9)], [(1, 3.0)], {1: 0.9}, method="rrf")
    assert both[0].score == pytest.approx(1.0)


def test_fuse_ignores_candidates_that_were_filtered_out():
    chunks = {2: chunk(2)}
    for method in ("scores", "rrf"):
        hits = fuse(chunks, [(1, 0.9), (2, 0.8)], [(1, 4.0)], {1: 0.9, 2: 0.8}, method=method)
        assert [(h.chunk.id, h.dense_rank, h.lexical_rank) for h in hits] == [(2, 1, None)]


def test_fuse_breaks_ties_toward_the_newer_chunk_id():
    chunks = {1: chunk(1), 2: chunk(2)}
    for method in ("scores", "rrf"):
        hits = fuse(chunks, [(1, 0.9)], [(2, 4.0)], {1: 0.9, 2: 0.9}, method=method)
        assert [h.chunk.id for h in hits] == [2, 1]


def test_rerank_adds_a_recency_bonus_that_halves_every_half_life():
    fresh = hit(1, score=0.5, created_at=NOW)
    month_old = hit(2, score=0.5, created_at=NOW - 30 * SECONDS_PER_DAY)
    ranked = rerank([month_old, fresh], NOW, half_life_days=30, weight=0.05)
    assert [h.chunk.id for h in ranked] == [1, 2]
    assert ranked[0].score == pytest.approx(0.5 + 0.05)
    assert ranked[1].score == pytest.approx(0.5 + 0.025)


def test_rerank_recency_does_not_overturn_a_clearly_better_hit():
    old_but_first = hit(1, score=0.9, created_at=NOW - 365 * SECONDS_PER_DAY)
    new_but_weak = hit(2, score=0.6, created_at=NOW)
    ranked = rerank([new_but_weak, old_but_first], NOW, half_life_days=30, weight=0.05)
    assert [h.chunk.id for h in ranked] == [1, 2]


def test_rerank_breaks_a_near_tie_toward_the_newer_memory():
    older = hit(1, score=0.51, created_at=NOW - 90 * SECONDS_PER_DAY)
    newer = hit(2, score=0.50, created_at=NOW - 1 * SECONDS_PER_DAY)
    ranked = rerank([older, newer], NOW, half_life_days=30, weight=0.05)
    assert [h.chunk.id for h in ranked] == [2, 1]


def test_rerank_treats_future_timestamps_as_brand_new():
    future = hit(1, score=0.0, created_at=NOW + 10 * SECONDS_PER_DAY)
    assert rerank([future], NOW, 30, 0.05)[0].score == pytest.approx(0.05)


def test_rerank_without_weight_or_half_life_changes_nothing():
    hits = [hit(1, score=0.01, created_at=NOW - 1e6), hit(2, score=0.02)]
    assert rerank(hits, NOW, half_life_days=30, weight=0.0) == hits
    assert rerank(hits, NOW, half_life_days=0, weight=0.1) == hits


def test_abstain_when_nothing_was_found():
    assert should_abstain([], 0.35) is True


def test_abstain_when_no_lexical_hit_and_best_cosine_is_low():
    hits = [hit(1, similarity=0.34, dense_rank=1), hit(2, similarity=0.2, dense_rank=2)]
    assert should_abstain(hits, 0.35) is True


def test_no_abstention_when_best_cosine_reaches_the_threshold():
    hits = [hit(1, similarity=0.2, dense_rank=2), hit(2, similarity=0.35, dense_rank=1)]
    assert should_abstain(hits, 0.35) is False


def test_a_lexical_hit_is_never_abstained_even_with_a_low_cosine():
    hits = [hit(1, similarity=0.05, dense_rank=1), hit(2, similarity=0.01, lexical_rank=1)]
    assert should_abstain(hits, 0.35) is False


def test_abstain_when_no_hit_has_a_similarity():
    assert should_abstain([hit(1, dense_rank=1)], 0.35) is True


# -- weighted fusion and boosts -------------------------------------------------------------


def test_rrf_weights_scale_each_rankings_share():
    assert rrf([[1], [2]], k=60, weights=(1.0, 2.0)) == {1: 1 / 61, 2: 2 / 61}


def test_fuse_with_a_lexical_weight_puts_the_keyword_match_first():
    chunks = {i: chunk(i) for i in (1, 2)}
    dense, lexical, similarities = [(1, 0.9), (2, 0.5)], [(2, 4.0), (1, 2.0)], {1: 0.9, 2: 0.5}
    # scores: dense 1 → 1.0, 2 → 0.0; BM25 2 → 1.0, 1 → 0.5
    assert [h.chunk.id for h in fuse(chunks, dense, lexical, similarities, 1.0)] == [1, 2]
    assert [h.chunk.id for h in fuse(chunks, dense, lexical, similarities, 2.5)] == [2, 1]
    for weight, first in ((1.0, 2), (1.3, 2), (0.7, 1)):  # RRF: 1.0 is a tie, newer id first
        ranked = fuse(chunks, dense, lexical, similarities, weight, method="rrf")
        assert ranked[0].chunk.id == first


def test_boost_dated_lifts_hits_from_the_named_time():
    may, june = datetime(2023, 5, 10, tzinfo=UTC), datetime(2023, 6, 20, tzinfo=UTC)
    hits = [hit(1, 0.03, created_at=june.timestamp()), hit(2, 0.02, created_at=may.timestamp())]
    boosted = boost_dated(hits, query_windows("What did I plant in May 2023?"), 1.0)
    assert [(h.chunk.id, h.score) for h in boosted] == [(2, 0.02 + 1.0), (1, 0.03)]


def test_boost_dated_without_a_window_or_weight_changes_nothing():
    hits = [hit(1, 0.03), hit(2, 0.02)]
    assert boost_dated(hits, [], 1.0) == hits
    assert boost_dated(hits, [Window(0.0, 2 * NOW)], 0.0) == hits


def turn_hit(chunk_id, score, turn, session="s-1"):
    """A hit on the chunk of the session's turn `turn` (its only chunk)."""
    chunk = Chunk(
        chunk_id,
        100 + chunk_id,
        "alice",
        session,
        "user",
        None,
        f"text {chunk_id}",
        NOW,
        f"hash{chunk_id}",
        turn,
    )
    return Hit(chunk, score, None, None, None)


def test_boost_neighbours_lifts_the_answer_next_to_a_strong_question():
    # turn 3 answers turn 2, which matched the query best; turn 9 has no hit beside it
    hits = [turn_hit(2, 0.05, 2), turn_hit(1, 0.03, 1), turn_hit(3, 0.02, 3), turn_hit(9, 0.025, 9)]
    boosted = boost_neighbours(hits, (0.2,))
    assert [h.chunk.id for h in boosted] == [2, 1, 3, 9]
    assert {h.chunk.id: h.score for h in boosted} == pytest.approx(
        {2: 0.05 + 0.2 * 0.03, 1: 0.03 + 0.2 * 0.05, 3: 0.02 + 0.2 * 0.05, 9: 0.025}
    )


def test_boost_neighbours_takes_the_best_neighbour_at_a_distance_not_the_sum():
    hits = [turn_hit(1, 0.04, 1), turn_hit(3, 0.03, 3), turn_hit(2, 0.01, 2)]
    boosted = boost_neighbours(hits, (0.5,))
    assert next(h.score for h in boosted if h.chunk.id == 2) == pytest.approx(0.01 + 0.5 * 0.04)


def test_boost_neighbours_adds_the_loans_of_each_distance_at_their_own_weight():
    hits = [turn_hit(1, 0.04, 1), turn_hit(4, 0.03, 4), turn_hit(2, 0.01, 2)]
    boosted = boost_neighbours(hits, (0.2, 0.1))
    assert next(h.score for h in boosted if h.chunk.id == 2) == pytest.approx(
        0.01 + 0.2 * 0.04 + 0.1 * 0.03
    )
    # a distance without a weight lends nothing
    only_first = boost_neighbours([turn_hit(4, 0.03, 4), turn_hit(2, 0.01, 2)], (0.2,))
    assert next(h.score for h in only_first if h.chunk.id == 2) == 0.01


def test_boost_neighbours_only_within_a_session_and_only_between_numbered_turns():
    other_session = [turn_hit(1, 0.04, 1, "s-1"), turn_hit(2, 0.01, 2, "s-2")]
    assert boost_neighbours(other_session, (0.2, 0.05)) == other_session
    unnumbered = [turn_hit(1, 0.04, None), turn_hit(2, 0.01, 2)]
    assert boost_neighbours(unnumbered, (0.2, 0.05)) == unnumbered


def test_boost_neighbours_without_weight_or_neighbours_changes_nothing():
    hits = [turn_hit(1, 0.03, 1), turn_hit(2, 0.02, 2)]
    assert boost_neighbours(hits, (0.0, 0.0)) == hits
    apart = [turn_hit(1, 0.03, 1), turn_hit(2, 0.02, 7)]
    assert boost_neighbours(apart, (0.2, 0.05)) == apart
