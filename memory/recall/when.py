"""Dates a recall query names ("in May 2023", "on 9 November, 2022"), as time windows.

A question about a time ("What did I cook on 9 November?") is answered by what was said
then, and BM25 cannot see it: turns rarely spell out their own date, but every stored chunk
carries one. `query_windows` turns the dates named in a query into windows of `created_at`,
and `memory.recall.ranking.boost_dated` favours the hits inside one. A window runs a little past
the named period (`_SLACK_DAYS`), since an event is often told days after it happened
("last weekend …"). English month names only; a query with no date gives no window.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

__all__ = ["Window", "query_windows"]

_SLACK_DAYS = 10
_MONTHS = {name.lower(): number for number, name in enumerate(calendar.month_name) if name}
_MONTH = "(" + "|".join(_MONTHS) + ")"
_YEAR = r"((?:19|20)\d\d)"
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
# Most specific first; each match's span is consumed so "May 2023" is not also "2023".
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("dmy", re.compile(rf"\b{_DAY}\s+{_MONTH},?\s+{_YEAR}\b")),
    ("mdy", re.compile(rf"\b{_MONTH}\s+{_DAY},?\s+{_YEAR}\b")),
    ("my", re.compile(rf"\b{_MONTH},?\s+(?:of\s+)?{_YEAR}\b")),
    ("m", re.compile(rf"\b(?:in|during|of|on|last|this|early|late|mid)\s+{_MONTH}\b")),
    ("y", re.compile(rf"\b(?:in|during|of|since)\s+{_YEAR}\b")),
)


@dataclass(frozen=True, slots=True)
class Window:
    """A span of `created_at` (Unix seconds) the query asks about; `month` alone matches yearly.

    With `month` set (a month named without a year), any year's `month` matches, plus the
    slack days after it; otherwise `start` ≤ t < `end`.
    """

    start: float = 0.0
    end: float = 0.0
    month: int | None = None

    def contains(self, timestamp: float) -> bool:
        if self.month is None:
            return self.start <= timestamp < self.end
        moment = datetime.fromtimestamp(timestamp, UTC)
        before = moment - timedelta(days=_SLACK_DAYS)
        return self.month in (moment.month, before.month)


def query_windows(query: str) -> list[Window]:
    """The time windows of the dates `query` names, most specific first; [] when none."""
    text = query.lower()
    windows: list[Window] = []
    for kind, pattern in _PATTERNS:
        for match in pattern.finditer(text):
            window = _window(kind, match.groups())
            if window is not None:
                windows.append(window)
        text = pattern.sub(" ", text)
    return windows


def _window(kind: str, parts: tuple[str, ...]) -> Window | None:
    if kind == "m":
        return Window(month=_MONTHS[parts[0]])
    if kind == "y":
        return _span(datetime(int(parts[0]), 1, 1, tzinfo=UTC), 366)
    if kind == "my":
        month, year = _MONTHS[parts[0]], int(parts[1])
        days = calendar.monthrange(year, month)[1]
        return _span(datetime(year, month, 1, tzinfo=UTC), days)
    day, name = (parts[0], parts[1]) if kind == "dmy" else (parts[1], parts[0])
    try:
        start = datetime(int(parts[2]), _MONTHS[name], int(day), tzinfo=UTC)
    except ValueError:
        return None  # "31 February"
    return _span(start, 1)


def _span(start: datetime, days: int) -> Window:
    end = start + timedelta(days=days + _SLACK_DAYS)
    return Window((start - timedelta(days=1)).timestamp(), end.timestamp())
