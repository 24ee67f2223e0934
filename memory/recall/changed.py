"""The abstention gate stays open for a question about the user's present whose topic changed.

A question about something that changed ("Which school do I teach at?", "Who looks after the
boys when I'm working?") is, by construction, about something discussed; yet its kept turns
are often weak matches (the change is said in passing, in a long turn about other things),
and the learned gate withholds them. What recall already holds says it changed: two of the
three best kept hits are the user's own turns, from two conversations, both holding a word of
the question, and the later one says something changed (`CHANGE`: "now", "instead", "after
all", "moved", "switched", "no longer", "turns out" …). The question must ask about the user's
present ("do I", "are we", "I'm", "me", "is our", …): a question after a past detail ("How
much deposit did the Harringtons pay?") or about someone else's ("What's the name of our head
waiter?") finds changes on its topic as often as an answerable one does, and the gate decides
it as before (docs/recall-quality.md, "Seventeenth pass").
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from memory.records import Chunk, Hit
from memory.store.fts import fts_terms, stem

# The kept hits read, best first: those the learned gate reads the words of.
CHANGE_HITS = 3

CHANGE = re.compile(
    r"\b(?:now|instead|after\s+all|no\s+longer|any\s?more|turns\s+out|moved|moving|switched"
    r"|switching|changed|swapped)\b",
    re.IGNORECASE,
)
# The user asks about themselves as they are: a present-tense verb with "I" or "we", or "me".
_ABOUT_THE_USER_NOW = re.compile(
    r"\b(?:do|am|are|have)\s+(?:i|we)\b|\b(?:i'm|we're|i\s+am|we\s+are|me)\b"
    r"|\b(?:is|are)\s+(?:my|our)\b",
    re.IGNORECASE,
)


def _stems(text: str) -> set[str]:
    return {stem(word) for word in fts_terms(text)}


def asks_after_a_change(query: str, kept: Sequence[Hit]) -> bool:
    """True when `query` asks about the user's present and two of the three best kept hits
    are the user's turns on its words from two conversations, the later saying it changed."""
    if _ABOUT_THE_USER_NOW.search(query) is None:
        return False
    words = _stems(query)
    said: list[Chunk] = [
        h.chunk
        for h in kept[:CHANGE_HITS]
        if h.chunk.role == "user" and words & _stems(h.chunk.text)
    ]
    return any(
        later.session_id != earlier.session_id
        and later.created_at > earlier.created_at
        and CHANGE.search(later.text) is not None
        for later in said
        for earlier in said
    )
