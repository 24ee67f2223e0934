"""How much episodic memory a request has room for (budget step, CALMem §6.2).

The fill ratio ρ = tokens of the request as the client sent it ÷ the model's context window
picks a tier: the fuller the window, the fewer and shorter the recalled excerpts, and at
ρ ≥ 0.70 none at all, so that memory never hastens the client's own compaction. Facts are
not budgeted here; they are injected at every tier (CONTRACT.md, "Memory behaviour").

Thresholds are exact fractions and ρ is compared as a `Fraction` of two integers: CALMem §6.2
notes that computing 0.60 in floating point gives 0.6000000000000001 and misclassifies a
request exactly at the boundary. This module also cuts a recalled chunk down to the tier's
excerpt size, keeping the part that matches the query best.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from memory.records import Tier

__all__ = [
    "DEFAULT_TIER_RULES",
    "ELLIPSIS",
    "TierRule",
    "cut_excerpt",
    "fill_ratio",
    "near_threshold",
    "select_tier",
    "tier_rules_from_config",
]

ELLIPSIS = "…"


@dataclass(frozen=True, slots=True)
class TierRule:
    """Below fill ratio `below` (exclusive), inject up to `max_excerpts` × `max_chars`."""

    below: Fraction
    max_excerpts: int
    max_chars: int


# CALMem §6.2 and CONTRACT.md: <0.50 → 5×600, <0.60 → 3×400, <0.70 → 2×250, else none.
DEFAULT_TIER_RULES: tuple[TierRule, ...] = (
    TierRule(Fraction("0.50"), 5, 600),
    TierRule(Fraction("0.60"), 3, 400),
    TierRule(Fraction("0.70"), 2, 250),
)

_RULE_KEYS = frozenset({"below", "excerpts", "chars"})


def tier_rules_from_config(rows: Sequence[Mapping[str, Any]]) -> tuple[TierRule, ...]:
    """Tier rules from config rows such as `{"below": 0.5, "excerpts": 5, "chars": 600}`.

    `below` may be a number or a decimal string; it is read through its decimal spelling, so
    0.6 becomes exactly 3/5. Thresholds must be in (0, 1] and strictly ascending; `excerpts`
    and `chars` non-negative integers. Above the last threshold there are never excerpts.
    Raises ValueError naming the offending row (1-based) on any mistake.
    """
    if not rows:
        raise ValueError("at least one row is required")
    rules: list[TierRule] = []
    for number, row in enumerate(rows, start=1):
        rule = _rule_from_row(number, row)
        if rules and rule.below <= rules[-1].below:
            raise ValueError(
                f"row {number} ({row!r}): 'below' must be greater than the previous "
                f"row's ({float(rules[-1].below)})"
            )
        rules.append(rule)
    return tuple(rules)


def _rule_from_row(number: int, row: Mapping[str, Any]) -> TierRule:
    where = f"row {number} ({row!r})"
    if not isinstance(row, Mapping) or set(row) != _RULE_KEYS:
        raise ValueError(f"{where}: expected exactly the keys 'below', 'excerpts', 'chars'")
    below = _threshold(row["below"])
    if below is None or not 0 < below <= 1:
        raise ValueError(f"{where}: 'below' must be a number in (0, 1]")
    for key in ("excerpts", "chars"):
        value = row[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{where}: {key!r} must be a non-negative integer")
    return TierRule(below, row["excerpts"], row["chars"])


def _threshold(value: object) -> Fraction | None:
    """`value` as an exact fraction via its decimal spelling; None when it is not a number."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        return Fraction(str(value).strip())
    except (ValueError, ZeroDivisionError):
        return None


def select_tier(
    request_tokens: int,
    context_window: int,
    rules: Sequence[TierRule] = DEFAULT_TIER_RULES,
) -> Tier:
    """The tier for a request of `request_tokens` in a window of `context_window` tokens.

    The level is the index of the first rule with ρ < `below`, compared exactly; past the
    last rule it is `len(rules)` with no excerpts. A window of zero or less counts as full.
    """
    if request_tokens < 0:
        raise ValueError(f"request_tokens must be non-negative, got {request_tokens}")
    if context_window > 0:
        ratio = Fraction(request_tokens, context_window)
        for level, rule in enumerate(rules):
            if ratio < rule.below:
                return Tier(level, rule.max_excerpts, rule.max_chars)
    return Tier(len(rules), 0, 0)


# How far from a threshold an estimated count may still pick the wrong tier: sampled counts
# come within ~2.5% of tiktoken's (`memory/block/tokens.py`, `_count_long`).
ESTIMATE_MARGIN = Fraction(1, 20)


def near_threshold(
    request_tokens: int,
    context_window: int,
    rules: Sequence[TierRule] = DEFAULT_TIER_RULES,
) -> bool:
    """Whether ρ is within `ESTIMATE_MARGIN` (relative) of a rule's threshold: there an
    estimated count must be made exact before `select_tier` compares it."""
    if context_window <= 0:
        return False
    ratio = Fraction(request_tokens, context_window)
    return any(abs(ratio - rule.below) <= rule.below * ESTIMATE_MARGIN for rule in rules)


def fill_ratio(request_tokens: int, context_window: int) -> float:
    """ρ rounded to 4 places, for the `x-memory-fill-ratio` header; 1.0 when the window is ≤ 0.

    For display only: tier selection uses `select_tier`'s exact comparison, never this.
    """
    if context_window <= 0:
        return 1.0
    return round(request_tokens / context_window, 4)


def cut_excerpt(text: str, max_chars: int, terms: Sequence[str] = ()) -> str:
    """`text` cut to at most `max_chars` characters, at word boundaries where possible.

    A cut at either end is marked with "…", which counts toward `max_chars`. With `terms`
    (e.g. `fts_terms(query)`), the window with the most occurrences of them (case-insensitive,
    as substrings) is kept, centred on them; otherwise, or when none occurs, the start.
    Text that fits is returned stripped and whole; `max_chars` ≤ 0 gives "".
    """
    body = text.strip()
    if max_chars <= 0:
        return ""
    if len(body) <= max_chars:
        return body
    if max_chars <= 2:
        return ELLIPSIS
    start, keep_from = _best_window(body, max_chars - 2, terms)
    start = _skip_space(body, _start_of_word(body, start, limit=keep_from))
    room = max_chars - (1 if start > 0 else 0)
    if len(body) - start <= room:
        return ELLIPSIS + body[start:]
    end = _end_of_word(body, start, start + room - 1)
    head = ELLIPSIS if start > 0 else ""
    return head + body[start:end].rstrip() + ELLIPSIS


def _best_window(text: str, width: int, terms: Sequence[str]) -> tuple[int, int]:
    """Start of the `width`-character window holding the most term occurrences.

    Returns `(start, first_match)`: the window is centred on the chosen run of matches and
    moved left if it would run past the end; `first_match` is where that run begins, which
    the caller must not cut away. `(0, 0)` when no term occurs.
    """
    spans = _occurrences(text, terms)
    best_count, best = 0, (0, 0)
    for i, (first, _) in enumerate(spans):
        inside = [end for start, end in spans[i:] if end <= first + width]
        if len(inside) > best_count:
            best_count, best = len(inside), (first, max(inside))
    if best_count == 0:
        return 0, 0
    first, last = best
    start = max(0, min(first - (width - (last - first)) // 2, len(text) - width))
    return start, first


def _occurrences(text: str, terms: Sequence[str]) -> list[tuple[int, int]]:
    """Sorted `(start, end)` spans of every case-insensitive occurrence of any term."""
    words = sorted({term for term in terms if term}, key=len, reverse=True)
    if not words:
        return []
    pattern = re.compile("|".join(re.escape(word) for word in words), re.IGNORECASE)
    return [match.span() for match in pattern.finditer(text)]


def _start_of_word(text: str, start: int, limit: int) -> int:
    """Move a start that falls inside a word forward past it, but never beyond `limit`."""
    if start == 0 or text[start - 1].isspace():
        return start
    for position in range(start, limit):
        if text[position].isspace():
            return position
    return start


def _end_of_word(text: str, start: int, end: int) -> int:
    """Move an end that falls inside a word back to the last word boundary after `start`."""
    for position in range(end, start, -1):
        if text[position - 1].isspace() or text[position].isspace():
            return position
    return end


def _skip_space(text: str, position: int) -> int:
    """The first position at or after `position` that is not whitespace (or the end)."""
    while position < len(text) and text[position].isspace():
        position += 1
    return position
