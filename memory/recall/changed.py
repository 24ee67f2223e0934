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

A change is not always said with a change word ("I've also started a new job as a network
engineer at the council", "it's Tomasz's mum, Halina, who looks after Biscuit"), so the gate
also stays open when the subject has a history among the best kept hits
(`asks_after_a_history`): of those holding a word of the question, the newest conversation's
include the user's own turn, a turn of an older conversation is on the same subject (it holds
the same word of the question, or a name or number the newer turn names again: "I work at a
small practice called Brennan Lowe" before "I've left Brennan Lowe, I've joined a bigger firm,
Feilden Marsh"), and the user's newer turn names a name or a number that none of those older
ones does. Structural, with no wording of its own (docs/recall-quality.md, "Twenty-first pass").
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from memory.records import Chunk, Hit
from memory.store.fts import STOPWORDS, fts_terms, stem

# The kept hits read, best first: those the learned gate reads the words of.
CHANGE_HITS = 3

CHANGE = re.compile(
    r"\b(?:now|instead|after\s+all|no\s+longer|any\s?more|turns\s+out|moved|moving|switched"
    r"|switching|changed|swapped)\b",
    re.IGNORECASE,
)
# The user asks about themselves as they are: a present-tense verb with "I" or "we", or "me",
# or with something of theirs ("is my", "does my shift start").
_ABOUT_THE_USER_NOW = re.compile(
    r"\b(?:do|am|are|have)\s+(?:i|we)\b|\b(?:i'm|we're|i\s+am|we\s+are|me)\b"
    r"|\b(?:is|are|does|do)\s+(?:my|our)\b",
    re.IGNORECASE,
)


WORD = re.compile(r"[^\W_]+")  # words as the lexical index reads them (memory.store.fts)


def is_a_value(line: str, match: re.Match[str]) -> bool:
    """A name or a number: a word with a digit, or a capitalised word not at a sentence's
    start (where any word is capitalised)."""
    word = match.group()
    if any(c.isdigit() for c in word):
        return True
    if not word[0].isupper():
        return False
    before = line[: match.start()].rstrip()
    return bool(before) and before[-1] not in ".!?:"


def _values(text: str) -> set[str]:
    """The names and numbers `text` says (lowercase), not "I" nor a capitalised stopword."""
    return {
        word
        for m in WORD.finditer(text)
        if (word := m.group().lower()) not in STOPWORDS
        and (len(word) > 1 or word.isdigit())
        and is_a_value(text, m)
    }


def _stems(text: str) -> set[str]:
    return {stem(word) for word in fts_terms(text)}


def _on_the_question(query: str, kept: Sequence[Hit]) -> list[tuple[Chunk, set[str]]]:
    """Of the `CHANGE_HITS` best kept hits, those holding a word of `query` (stemmed), each
    with the words of the question it holds."""
    words = _stems(query)
    return [(h.chunk, found) for h in kept[:CHANGE_HITS] if (found := words & _stems(h.chunk.text))]


def about_the_present(query: str) -> bool:
    """Whether `query` asks about the user as they are now ("do I", "is my", "me" …)."""
    return _ABOUT_THE_USER_NOW.search(query) is not None


def asks_after_a_change(query: str, kept: Sequence[Hit]) -> bool:
    """True when `query` asks about the user's present and two of the three best kept hits
    are the user's turns on its words from two conversations, the later saying it changed."""
    if not about_the_present(query):
        return False
    said = [chunk for chunk, _ in _on_the_question(query, kept) if chunk.role == "user"]
    return any(
        later.session_id != earlier.session_id
        and later.created_at > earlier.created_at
        and CHANGE.search(later.text) is not None
        for later in said
        for earlier in said
    )


def asks_after_a_history(query: str, kept: Sequence[Hit]) -> bool:
    """True when `query` asks about the user's present and its subject has a history among
    the three best kept hits: of those holding a word of the question (stemmed), the newest
    conversation's include a user turn, a turn of an older conversation said before it is on
    the same subject (it holds one of the same words of the question, or names a name or a
    number the user turn names again), and the user turn names a name or a number no such
    older one does (module docstring)."""
    if not about_the_present(query):
        return False
    on = _on_the_question(query, kept)
    if len(on) < 2:
        return False
    newest = max(on, key=lambda pair: pair[0].created_at)[0].session_id
    for turn, subject in on:
        if turn.session_id != newest or turn.role != "user":
            continue
        named = _values(turn.text)
        older: list[set[str]] = []  # the names and numbers of the older turns on its subject
        for chunk, found in on:
            if chunk.session_id == newest or chunk.created_at >= turn.created_at:
                continue
            said = _values(chunk.text)
            if found & subject or named & said:
                older.append(said)
        if older and named - set().union(*older):
            return True
    return False
