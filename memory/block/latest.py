"""Step 4c, a change said after the old value: the newer turn's words past it, shown first.

The user's turn that changes something most often names the old value before the new one
("we swapped Kanazawa for Hiroshima", "after six years at Boots in Canton I'm now running Rees
Pharmacy in Whitchurch", "the physio moved me from Thursday evenings to Tuesday lunchtimes").
Excerpts come newest first (`memory.block.excerpts.newest_first`), so that turn leads the
block, and the first value in it is the old one: a reader who takes the first value named for
the current one reads the superseded one.

Read from the block alone, with no phrasing of its own: in a user line, an old value is a name
or a number (a capitalised word inside a sentence, or a word with a digit) that a user line of
an older conversation in the block names too, and a new value one that no such line says at
all; a change is a new value after an old one, said with one of the change words the gate reads
(`memory.recall.changed.CHANGE`: "now", "instead", "swapped", "moved" …) in its sentence or
between the two, or as "from <old> … to <new>" (a value said "from" just before "to" another,
as in "from 3 to 4", is the old one even when no older line names it). The words from just
after the last old value before the new one, to the end of the new value's sentence, are shown
first in the line's excerpt, as a piece of the line (marked "…"); the line itself follows. The
excerpt keeps its place and its room: the block holds as many excerpts as the tier allows, each
within its size, so the excerpt's last lines give the piece their room (whole lines first), and
their chunks leave its list of those shown (what the inspector tells as in the block). At most
`LEADS` changes (the newest first, one per line), never one whose new value a user line of a
newer conversation names again (that line says what holds now). Only user lines labelled "user"
are read (a named speaker, as in an imported two-person conversation, is not the user's own
account). docs/recall-quality.md, "Nineteenth pass".
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

from memory.recall.changed import CHANGE, WORD, is_a_value
from memory.records import Excerpt
from memory.store.fts import STOPWORDS

# How many changes lead the block at most, and how many characters each piece shows (within
# a third of an excerpt's room): the rest of the sentence that names the new value.
LEADS = 2
PIECE_CHARS = 200
_USER = "user: "
_LEADING = re.compile(r"(?:['’]s\b)?[\s,;:.)—–-]*")  # what a piece does not start with
_SENTENCE_END = re.compile(r"[.!?](?:\s|$)")
_FROM = re.compile(r"\bfrom\s+(?:(?:the|my|our|his|her|their)\s+)?$", re.IGNORECASE)
_TO = re.compile(r"\bto\b", re.IGNORECASE)
# Right after a value said "from": up to two more words, then "to" (and a determiner). Any
# space, as `_FROM` reads: pasted text often spaces with U+00A0 ("from 3\u00a0to 4").
_TO_VALUE = re.compile(
    r"(?:\s+[^\W\d_]+){0,2}\s+to\s+(?:(?:the|my|our|his|her|their|a|an)\s+)?",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class _Change:
    """A user line's words past an old value, and the new value they name (lowercase)."""

    excerpt: Excerpt
    line: str  # the user line it is read from, without its label
    piece: str
    new: str


@dataclass(frozen=True, slots=True)
class _Said:
    """An excerpt's user lines, and their words and their names and numbers (lowercase): read
    once a block."""

    excerpt: Excerpt
    lines: list[str]
    words: frozenset[str]
    values: frozenset[str]


def lead_with_the_change(excerpts: Sequence[Excerpt], room: int) -> list[Excerpt]:
    """`excerpts` (in block order, newest first), led by the newest changes their user lines
    say after the old value (module docstring); `room` is an excerpt's, in characters."""
    if len(excerpts) < 2:
        return list(excerpts)
    chars = min(PIECE_CHARS, room // (LEADS + 1))
    said = [_said(excerpt) for excerpt in excerpts]
    found: list[_Change] = []
    for one in said:
        found += (c for c in _changes(one, said, chars) if not _taken_up_later(c, said))
        if len(found) >= LEADS:
            break
    found = found[:LEADS]
    return [
        _led_excerpt(e, changes, room) if (changes := [c for c in found if c.excerpt is e]) else e
        for e in excerpts
    ]


def _led_excerpt(excerpt: Excerpt, changes: Sequence[_Change], room: int) -> Excerpt:
    """`excerpt` led by its changes' pieces (`_led`), listing only the chunks it still shows:
    those of the lines kept and of the lines the pieces are read from. A chunk whose line was
    cut is not in the block, and the inspector says so (`memory.block.left_out`)."""
    text, kept = _led(excerpt.text, [c.piece for c in changes], room)
    lines = excerpt.text.split("\n")
    if len(excerpt.line_chunks) != len(lines):  # which line shows which chunk is not known
        return replace(excerpt, text=text)
    sources = {lines.index(_USER + c.line) for c in changes}
    shown = (i for n, i in enumerate(excerpt.line_chunks) if i and (n < kept or n in sources))
    return replace(excerpt, text=text, chunk_ids=tuple(shown))


def _led(text: str, pieces: Sequence[str], room: int) -> tuple[str, int]:
    """An excerpt's text with `pieces` as its first lines, within the excerpt's `room`, and
    how many of its lines it still shows: the block keeps the tier's count and size of
    excerpts, so the lines after them are cut from the end (whole lines first, then the last
    one kept at a word)."""
    lead = "\n".join(f"{_USER}…{piece}" for piece in pieces)
    lines = text.split("\n")
    while len(lines) > 1 and len(lead) + 1 + len("\n".join(lines)) > room:
        lines.pop()
    rest = "\n".join(lines)
    left = room - len(lead) - 1
    if len(rest) > left:
        cut = rest.rfind(" ", 0, max(left - 1, 0))
        rest = rest[:cut] + "…" if cut > len(rest.split(": ", 1)[0]) + 2 else ""
    return (f"{lead}\n{rest}", len(lines)) if rest else (lead, 0)


def _said(excerpt: Excerpt) -> _Said:
    lines = [line[len(_USER) :] for line in excerpt.text.split("\n") if line.startswith(_USER)]
    words = frozenset(w.lower() for line in lines for w in WORD.findall(line))
    values = frozenset(
        m.group().lower() for line in lines for m in WORD.finditer(line) if is_a_value(line, m)
    )
    return _Said(excerpt, lines, words, values)


def _changes(one: _Said, said: Sequence[_Said], chars: int) -> Iterator[_Change]:
    """Each user line's first change against the user lines of older conversations: those
    of the excerpts of other conversations said before this excerpt's first line."""
    first = one.excerpt.created_at
    older = [
        other
        for other in said
        if other.excerpt.session_id != one.excerpt.session_id
        and (other.excerpt.latest_at or other.excerpt.created_at) < first
    ]
    values = frozenset().union(*(o.values for o in older))
    if not values or not one.lines:
        return
    words = frozenset().union(*(o.words for o in older))
    for line in one.lines:
        found = _first_change(line, words, values, chars)
        if found is not None:
            yield _Change(one.excerpt, line, *found)


def _taken_up_later(change: _Change, said: Sequence[_Said]) -> bool:
    """Whether a user line of an excerpt of another conversation, said after the change's,
    names its new value: the user came back to it, and that line is what holds now."""
    at = change.excerpt.latest_at or change.excerpt.created_at
    return any(
        change.new in other.words
        for other in said
        if other.excerpt.session_id != change.excerpt.session_id and other.excerpt.created_at > at
    )


def _first_change(
    line: str, words: frozenset[str], values: frozenset[str], chars: int
) -> tuple[str, str] | None:
    """The piece of `line` past the last old value before its first new value said as a
    change, and that new value (lowercase); None when the line says no change."""
    last_old: re.Match[str] | None = None
    for match in WORD.finditer(line):
        word = match.group().lower()
        if (len(word) < 2 and not word.isdigit()) or word in STOPWORDS:
            continue
        if word in values:
            last_old = match
        elif (
            last_old is not None
            and word not in words
            and is_a_value(line, match)
            and _said_as_a_change(line, last_old, match)
        ):
            if _from_to(line, match):
                last_old = match  # "from 3 to 4": the value "from" names is the old one
                continue
            return _piece(line, last_old.end(), match.end(), chars), word
    return None


def _from_to(line: str, value: re.Match[str]) -> bool:
    """Whether `value` is said as "from <value> to <another value>" ("from 3 to 4 tablets",
    "from Thursday evenings to Tuesday lunchtimes"): the old value of that change, though no
    older line names it."""
    if not _FROM.search(line, 0, value.start()):
        return False
    to = _TO_VALUE.match(line, value.end())
    if to is None:
        return False
    after = WORD.search(line, to.end())
    return after is not None and after.start() == to.end() and is_a_value(line, after)


def _said_as_a_change(line: str, old: re.Match[str], new: re.Match[str]) -> bool:
    """A change word in the new value's sentence or between the two values, or "from <old>
    … to <new>"."""
    if CHANGE.search(line, _sentence_start(line, new.start()), _sentence_end(line, new.end())):
        return True
    if CHANGE.search(line, old.end(), new.start()):
        return True
    return bool(_FROM.search(line, 0, old.start())) and bool(
        _TO.search(line, old.end(), new.start())
    )


def _sentence_start(line: str, at: int) -> int:
    starts = [m.end() for m in _SENTENCE_END.finditer(line, 0, at)]
    return starts[-1] if starts else 0


def _sentence_end(line: str, at: int) -> int:
    end = _SENTENCE_END.search(line, at)
    return end.start() + 1 if end else len(line)


def _piece(line: str, start: int, value_end: int, chars: int) -> str:
    """`line` from `start` (its leading punctuation dropped) to the end of the sentence holding
    the new value, cut at a word past `chars` but never before the new value. Not the
    sentences after it: a chatty turn goes on about other things, and a value named there
    would lead the block too (fresh5: "… kieran's passed his first year at college" led a
    question whose newer turn names the new apprentice)."""
    found = _LEADING.match(line, start)
    offset = found.end() if found else start
    stop = _sentence_end(line, value_end)
    limit = max(chars, value_end - offset)
    text = line[offset:stop]
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", value_end - offset, limit + 1)
    return text[: cut if cut > 0 else limit] + "…"
