"""What the change leads read of a block: its user lines, their words and their values.

Shared by the two readings of a change (`memory.block.latest`: a change word after an old
value; `memory.block.asked`: an old value on the question's subject, then a new one): the
user lines of an excerpt, read once a block, which excerpts are older, and the piece of a line
that leads (the words past the old value, to the end of the new value's sentence).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from memory.recall.changed import WORD, is_a_value
from memory.records import Excerpt

USER = "user: "
_LEADING = re.compile(r"(?:['’]s\b)?[\s,;:.)—–-]*")  # what a piece does not start with
SENTENCE_END = re.compile(r"[.!?](?:\s|$)")


@dataclass(frozen=True, slots=True)
class Change:
    """A user line's words past an old value, and the new and old values (lowercase)."""

    excerpt: Excerpt
    line: str  # the user line it is read from, without its label
    piece: str
    new: str
    old: str


@dataclass(frozen=True, slots=True)
class Said:
    """An excerpt's user lines, and their words and their names and numbers (lowercase): read
    once a block."""

    excerpt: Excerpt
    lines: list[str]
    words: frozenset[str]
    values: frozenset[str]


def said_in(excerpt: Excerpt) -> Said:
    lines = [line[len(USER) :] for line in excerpt.text.split("\n") if line.startswith(USER)]
    words = frozenset(w.lower() for line in lines for w in WORD.findall(line))
    values = frozenset(
        m.group().lower() for line in lines for m in WORD.finditer(line) if is_a_value(line, m)
    )
    return Said(excerpt, lines, words, values)


def older_than(one: Said, said: Sequence[Said]) -> list[Said]:
    """The excerpts of other conversations said before `one`'s first line."""
    first = one.excerpt.created_at
    return [
        other
        for other in said
        if other.excerpt.session_id != one.excerpt.session_id
        and (other.excerpt.latest_at or other.excerpt.created_at) < first
    ]


def taken_up_later(change: Change, said: Sequence[Said]) -> bool:
    """Whether a user line of an excerpt of another conversation, said after the change's,
    names its new value: the user came back to it, and that line is what holds now."""
    at = change.excerpt.latest_at or change.excerpt.created_at
    return any(
        change.new in other.words
        for other in said
        if other.excerpt.session_id != change.excerpt.session_id and other.excerpt.created_at > at
    )


def sentence_start(line: str, at: int) -> int:
    starts = [m.end() for m in SENTENCE_END.finditer(line, 0, at)]
    return starts[-1] if starts else 0


def sentence_end(line: str, at: int) -> int:
    end = SENTENCE_END.search(line, at)
    return end.start() + 1 if end else len(line)


def piece(line: str, start: int, value_end: int, chars: int) -> str:
    """`line` from `start` (its leading punctuation dropped) to the end of the sentence holding
    the new value, cut at a word past `chars` but never before the new value. Not the
    sentences after it: a chatty turn goes on about other things, and a value named there
    would lead the block too (fresh5: "… kieran's passed his first year at college" led a
    question whose newer turn names the new apprentice)."""
    found = _LEADING.match(line, start)
    offset = found.end() if found else start
    stop = sentence_end(line, value_end)
    limit = max(chars, value_end - offset)
    text = line[offset:stop]
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", value_end - offset, limit + 1)
    return text[: cut if cut > 0 else limit] + "…"
