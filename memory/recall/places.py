"""Questions that ask where, and turns that name a place beside the question's words.

"Where is the main office?" finds "…a head office on Argyle Street…" first, by its words, but
inside a long turn about the user's job: its cosine (0.25) is one of many alike and the
abstention gate withheld it. Of the tuning splits' paraphrase misses, all but one were the
gate withholding a right turn (docs/recall-quality.md, "Paraphrases the gate withheld").
A where-question's answer shows plainly in a turn: a preposition before a capitalised name
("in Stockport", "on Oldham Street", "off Largs"). A turn that names one within a few words
of one of the question's own words answers it: the gate stays open
(`memory/recall/abstention.py`). Like `counts.py`, it reads the three best kept hits only.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from memory.recall.beside import question_words, said_beside
from memory.records import Hit

# The best kept hits read, as for counts and identifiers.
PLACE_HITS = 3
# How far from one of the question's words the place may start: about eight words.
PLACE_REACH = 50

_WHERE = re.compile(r"^\s*where\b", re.IGNORECASE)
# A preposition of place, then a capitalised name ("in Stockport", "at the Royal"). Case
# matters: "in town" names no place; "in June" does not either (`_NOT_A_PLACE`).
_PLACE = re.compile(
    r"\b(?:[Ii]n|[Aa]t|[Tt]o|[Ff]rom|[Nn]ear|[Oo]ff|[Oo]n|[Aa]bove|[Oo]utside)\s+(?:the\s+)?"
    r"([A-Z][\w'-]+)"
)
_NOT_A_PLACE = frozenset(
    "january february march april may june july august september october november december"
    " monday tuesday wednesday thursday friday saturday sunday i".split()
)


def asks_where(query: str) -> bool:
    """Whether the question asks where ("Where did we make the record?")."""
    return _WHERE.search(query) is not None


def gives_the_place(query: str, kept: Sequence[Hit]) -> bool:
    """True when the question asks where and one of the best kept hits names a place within
    PLACE_REACH characters of a word of the question (by its stem), in the same sentence."""
    if not asks_where(query) or (words := question_words(query)) is None:
        return False
    return said_beside(kept, words, _PLACE, _places, PLACE_REACH, PLACE_HITS)


def _places(sentence: str) -> list[int]:
    """Where `sentence` names a place (a month or "I" after a preposition names none)."""
    return [p.start(1) for p in _PLACE.finditer(sentence) if p.group(1).lower() not in _NOT_A_PLACE]
