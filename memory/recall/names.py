"""Questions that ask for someone's name, and turns that give the user's one by name.

"Who is my head of department?" finds "…my head of department, Farid, wants…" first, by its
words, yet the cosine of a long turn about work stands out of nothing and the abstention gate
withheld it. A turn that names the very one the question asks after, the user's ("my partner
Olu", "our head of department, Farid"), answers it: the gate stays open
(`memory/recall/abstention.py`). A question about a name never said finds turns on the same
person without one ("my accountant says…"): of the 53 never-discussed questions
asking for a name the gate withholds on the tuning splits, none was opened
(docs/recall-quality.md, "Paraphrases the gate withheld").
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from memory.records import Hit
from memory.store.fts import fts_terms, stem

# The best kept hits read, as for counts and identifiers.
NAME_HITS = 3

_ASKS_A_NAME = re.compile(r"^\s*who\b|\bname\b|\bcalled\b", re.IGNORECASE)
# "my partner Olu", "our head of department, Farid": "my" or "our", up to two words, the word
# the question asks after, an optional comma, then a capitalised name.
_NAMED = re.compile(
    r"\b(?:[Mm]y|[Oo]ur)\s+(?:[\w'-]+\s+){0,2}?([\w'-]+),?\s+([A-Z][^\W\d_][\w'-]*)"
)
# Words of the question that do not say whose name it asks.
_NOT_WHOSE = frozenset({stem("name"), stem("called")})


def asks_a_name(query: str) -> bool:
    """Whether the question asks who, or for a name ("What is my partner's name?")."""
    return _ASKS_A_NAME.search(query) is not None


def gives_the_name(query: str, kept: Sequence[Hit]) -> bool:
    """True when the question asks for a name and one of the best kept hits gives the user's
    one of the question's words by name ("my partner Olu" for "What is my partner's name?")."""
    if not asks_a_name(query):
        return False
    whose = {stem(w) for w in fts_terms(query)} - _NOT_WHOSE
    if not whose:
        return False
    for hit in kept[:NAME_HITS]:
        for named in _NAMED.finditer(hit.chunk.text):
            if stem(named.group(1).lower()) in whose:
                return True
    return False
