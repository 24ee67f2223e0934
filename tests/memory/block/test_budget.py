from fractions import Fraction

import pytest

from memory.block.budget import (
    DEFAULT_TIER_RULES,
    TierRule,
    cut_excerpt,
    fill_ratio,
    near_threshold,
    select_tier,
    tier_rules_from_config,
)
from memory.records import Tier


def test_default_rules_are_calmem_tiers_with_exact_thresholds():
    assert DEFAULT_TIER_RULES == (
        TierRule(Fraction(1, 2), 5, 600),
        TierRule(Fraction(3, 5), 3, 400),
        TierRule(Fraction(7, 10), 2, 250),
    )


@pytest.mark.parametrize(
    ("tokens", "tier"),
    [
        (0, Tier(0, 5, 600)),
        (49_999, Tier(0, 5, 600)),
        (50_000, Tier(1, 3, 400)),
        (59_999, Tier(1, 3, 400)),
        (60_000, Tier(2, 2, 250)),
        (3 * 20_000, Tier(2, 2, 250)),
        (69_999, Tier(2, 2, 250)),
        (70_000, Tier(3, 0, 0)),
        (100_000, Tier(3, 0, 0)),
        (250_000, Tier(3, 0, 0)),
    ],
)
def test_tier_boundaries_are_exact(tokens, tier):
    assert select_tier(tokens, 100_000) == tier


def test_a_ratio_of_exactly_three_fifths_is_tier_2_for_any_window():
    # CALMem §6.2: a threshold computed in floats (0.2 * 3 == 0.6000000000000001) misclassifies it.
    assert select_tier(3, 5) == Tier(2, 2, 250)
    assert select_tier(128_000 * 3 // 5, 128_000) == Tier(2, 2, 250)
    assert select_tier(128_000 * 3 // 5 - 1, 128_000) == Tier(1, 3, 400)


@pytest.mark.parametrize(
    ("tokens", "near"),
    [(0, False), (47_499, False), (47_500, True), (52_500, True), (52_501, False), (57_000, True)],
)
def test_near_threshold_is_within_five_percent_of_one(tokens, near):
    assert near_threshold(tokens, 100_000) is near
    assert near_threshold(tokens, 0) is False


@pytest.mark.parametrize("window", [0, -1])
def test_a_window_of_zero_or_less_counts_as_full(window):
    assert select_tier(10, window) == Tier(3, 0, 0)


def test_negative_request_tokens_are_rejected():
    with pytest.raises(ValueError):
        select_tier(-1, 100)


def test_custom_rules_number_their_levels_and_end_with_no_excerpts():
    rules = tier_rules_from_config([{"below": 0.8, "excerpts": 4, "chars": 300}])
    assert rules == (TierRule(Fraction(4, 5), 4, 300),)
    assert select_tier(79, 100, rules) == Tier(0, 4, 300)
    assert select_tier(80, 100, rules) == Tier(1, 0, 0)


def test_fill_ratio_is_rounded_to_four_places():
    assert fill_ratio(1, 3) == 0.3333
    assert fill_ratio(60_000, 100_000) == 0.6
    assert fill_ratio(150, 100) == 1.5
    assert fill_ratio(5, 0) == 1.0


def test_config_rows_become_exact_rules():
    rows = [
        {"below": 0.5, "excerpts": 5, "chars": 600},
        {"below": "0.6", "excerpts": 3, "chars": 400},
        {"below": 0.7, "excerpts": 2, "chars": 250},
    ]
    assert tier_rules_from_config(rows) == DEFAULT_TIER_RULES


def test_config_thresholds_are_read_through_their_decimal_spelling():
    rules = tier_rules_from_config([{"below": 0.1 + 0.2, "excerpts": 1, "chars": 10}])
    assert rules == (TierRule(Fraction("0.30000000000000004"), 1, 10),)
    assert tier_rules_from_config([{"below": 1, "excerpts": 0, "chars": 0}]) == (
        TierRule(Fraction(1), 0, 0),
    )


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([], "at least one row"),
        ([{"below": 0.5, "excerpts": 5}], r"row 1 .*keys"),
        ([{"below": 0.5, "excerpts": 5, "chars": 600, "extra": 1}], r"row 1 .*keys"),
        (["0.5"], r"row 1 .*keys"),
        ([{"below": "half", "excerpts": 5, "chars": 600}], r"row 1 .*'below'"),
        ([{"below": 0, "excerpts": 5, "chars": 600}], r"row 1 .*'below'"),
        ([{"below": 1.5, "excerpts": 5, "chars": 600}], r"row 1 .*'below'"),
        ([{"below": True, "excerpts": 5, "chars": 600}], r"row 1 .*'below'"),
        ([{"below": 0.5, "excerpts": -1, "chars": 600}], r"row 1 .*'excerpts'"),
        ([{"below": 0.5, "excerpts": 2.5, "chars": 600}], r"row 1 .*'excerpts'"),
        ([{"below": 0.5, "excerpts": 5, "chars": "600"}], r"row 1 .*'chars'"),
        ([{"below": 0.5, "excerpts": 5, "chars": False}], r"row 1 .*'chars'"),
        (
            [
                {"below": 0.5, "excerpts": 5, "chars": 600},
                {"below": 0.5, "excerpts": 3, "chars": 400},
            ],
            r"row 2 .*greater than the previous",
        ),
        (
            [
                {"below": 0.6, "excerpts": 5, "chars": 600},
                {"below": 0.5, "excerpts": 3, "chars": 400},
            ],
            r"row 2 .*greater than the previous",
        ),
    ],
)
def test_bad_config_rows_are_rejected_naming_the_row(rows, message):
    with pytest.raises(ValueError, match=message):
        tier_rules_from_config(rows)


TEXT = (
    "The quick brown fox jumps over the lazy dog. Later we discussed the auth token "
    "refresh bug and the RS256 signing key. Then lunch."
)


def test_text_that_fits_is_returned_stripped_and_whole():
    assert cut_excerpt("  short text \n", 12) == "short text"
    assert cut_excerpt(TEXT, len(TEXT)) == TEXT


def test_without_terms_the_start_is_kept_and_cut_at_a_word():
    assert cut_excerpt(TEXT, 30) == "The quick brown fox jumps…"
    assert cut_excerpt(TEXT, 40) == "The quick brown fox jumps over the lazy…"


def test_with_terms_the_window_with_most_matches_is_kept():
    assert cut_excerpt(TEXT, 30, ["auth", "token", "rs256"]) == "…the auth token refresh bug…"
    assert cut_excerpt(TEXT, 40, ["AUTH", "Token", "rs256"]) == (
        "…auth token refresh bug and the RS256…"
    )


def test_a_window_at_the_end_has_only_a_leading_ellipsis():
    assert cut_excerpt(TEXT, 30, ["lunch"]) == "…signing key. Then lunch."


def test_terms_that_do_not_occur_keep_the_start():
    assert cut_excerpt(TEXT, 30, ["kubernetes"]) == "The quick brown fox jumps…"


def test_a_single_long_word_is_cut_hard():
    assert cut_excerpt("x" * 50, 10) == "x" * 9 + "…"
    assert cut_excerpt("y" * 20 + "needle" + "z" * 20, 10, ["needle"]) == "…yneedlez…"


@pytest.mark.parametrize("max_chars", [-5, 0])
def test_no_room_gives_empty_text(max_chars):
    assert cut_excerpt(TEXT, max_chars) == ""


@pytest.mark.parametrize("max_chars", [1, 2])
def test_tiny_room_gives_just_the_ellipsis(max_chars):
    assert cut_excerpt(TEXT, max_chars) == "…"


@pytest.mark.parametrize("max_chars", range(1, len(TEXT) + 2))
@pytest.mark.parametrize("terms", [(), ("auth", "lunch"), ("quick",), ("the",)])
def test_excerpts_never_exceed_max_chars(max_chars, terms):
    excerpt = cut_excerpt(TEXT, max_chars, terms)
    assert 0 < len(excerpt) <= max_chars
    assert excerpt.strip("…") in TEXT
