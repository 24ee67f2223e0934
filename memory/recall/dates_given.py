"""Questions that ask when, and turns that give a date beside the question's words.

"When were my boys born?" finds "twin boys Cian and Oisín, born on 3 February last year" first,
by its words, inside a long introduction: its cosine is one of many alike and the abstention
gate withheld it, as it withheld most of the tuning splits' questions asked by when
(docs/recall-quality.md, "Questions asked by when"). A when-question's answer shows plainly in
a turn: a year, a month's name, "last year" or "last month", "three years ago". A turn that
gives one within a sentence's reach of one of the question's own words answers it: the gate
stays open (`memory/recall/abstention.py`). Weekdays and "last week" are left out: a chatty
turn says them about anything, and a question about a plan never discussed would pass. Like
`places.py`, it reads the three best kept hits only.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from memory.recall.beside import question_words, said_beside
from memory.records import Hit

# The best kept hits read, as for counts, places and names.
DATE_HITS = 3
# How far from one of the question's words the date may start: about a dozen words.
DATE_REACH = 80

_WHEN = re.compile(
    r"^\s*(?:when|since\s+when|how\s+long\s+ago|(?:what|which)\s+(?:year|month|date))\b",
    re.IGNORECASE,
)
# The question's own words about time say nothing of its subject.
_TIME_WORDS = frozenset({"year", "month", "date", "day", "long", "ago", "time"})
_MONTH = "(?:January|February|March|April|May|June|July|August|September|October|November|December)"
_COUNT = r"(?:\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten)"
# Case matters for months: "may" is a verb.
_DATE = re.compile(
    rf"\b(?:(?:19|20)\d\d|{_MONTH}|last\s+(?:year|month)|{_COUNT}\s+(?:years?|months?)\s+ago)\b"
)


def asks_when(query: str) -> bool:
    """Whether the question asks when ("When did I start the business?", "What year …?")."""
    return _WHEN.search(query) is not None


def gives_the_date(query: str, kept: Sequence[Hit]) -> bool:
    """True when the question asks when and one of the best kept hits gives a date within
    DATE_REACH characters of a word of the question (by its stem), in the same sentence."""
    if not asks_when(query) or (words := question_words(query, _TIME_WORDS)) is None:
        return False
    return said_beside(kept, words, _DATE, _dates, DATE_REACH, DATE_HITS)


def _dates(sentence: str) -> list[int]:
    return [d.start() for d in _DATE.finditer(sentence)]
