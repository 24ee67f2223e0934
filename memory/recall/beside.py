"""A kept turn that says something of the kind a question asks for beside the question's words.

The gate's narrow rules for where- and when-questions (`places.py`, `dates_given.py`) read the
same way: the question's words by their stems, and a turn among the best kept ones that, in one
sentence, says a place or a date within a few words of one of them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from memory.records import Hit
from memory.store.fts import fts_terms, stem

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


def question_words(query: str, leave_out: frozenset[str] = frozenset()) -> re.Pattern[str] | None:
    """A pattern of the question's words, by their stems (less `leave_out`); None: none."""
    stems = sorted({stem(w) for w in fts_terms(query)} - leave_out)
    if not stems:
        return None
    return re.compile(rf"\b(?:{'|'.join(map(re.escape, stems))})", re.IGNORECASE)


def said_beside(
    kept: Sequence[Hit],
    words: re.Pattern[str],
    kind: re.Pattern[str],
    marks: Callable[[str], list[int]],
    reach: int,
    hits: int,
) -> bool:
    """Whether one of the best `hits` kept turns says something of a `kind` (where in a
    sentence: `marks`) within `reach` characters of one of `words`, in the same sentence.
    `kind` finds whether a turn says any such thing at all: most do not, so one scan."""
    for hit in kept[:hits]:
        if kind.search(hit.chunk.text) is None:
            continue
        for sentence in _SENTENCE_END.split(hit.chunk.text):
            at = marks(sentence)
            if at and any(
                abs(w.start() - a) <= reach for w in words.finditer(sentence) for a in at
            ):
                return True
    return False
