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

A change on the question's subject said with no change word ("I sold the Precision and bought
a Music Man StingRay") is read by `memory.block.asked`; it leads first, one of the `LEADS`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import replace

from memory.block.asked import asked_change
from memory.block.said import (
    USER,
    Change,
    Said,
    older_than,
    piece,
    said_in,
    sentence_end,
    sentence_start,
    taken_up_later,
)
from memory.recall.changed import CHANGE, WORD, is_a_value
from memory.records import Excerpt
from memory.store.fts import STOPWORDS

# How many changes lead the block at most, and how many characters each piece shows (within
# a third of an excerpt's room): the rest of the sentence that names the new value.
LEADS = 2
PIECE_CHARS = 200
_FROM = re.compile(r"\bfrom\s+(?:(?:the|my|our|his|her|their)\s+)?$", re.IGNORECASE)
_TO = re.compile(r"\bto\b", re.IGNORECASE)
# Right after a value said "from": up to two more words, then "to" (and a determiner). Any
# space, as `_FROM` reads: pasted text often spaces with U+00A0 ("from 3\u00a0to 4").
_TO_VALUE = re.compile(
    r"(?:\s+[^\W\d_]+){0,2}\s+to\s+(?:(?:the|my|our|his|her|their|a|an)\s+)?",
    re.IGNORECASE,
)


def lead_with_the_change(excerpts: Sequence[Excerpt], room: int, query: str = "") -> list[Excerpt]:
    """`excerpts` (in block order, newest first), led by the newest changes their user lines
    say after the old value (module docstring), the change on the question's subject first
    (`memory.block.asked`); `room` is an excerpt's, in characters."""
    if len(excerpts) < 2:
        return list(excerpts)
    chars = min(PIECE_CHARS, room // (LEADS + 1))
    said = [said_in(excerpt) for excerpt in excerpts]
    asked = _asked_or_said(said, query, chars)
    found: list[Change] = [asked] if asked is not None else []
    for one in said:
        if len(found) >= LEADS:
            break
        found += (
            c
            for c in _changes(one, said, chars)
            if not taken_up_later(c, said) and (asked is None or c.line != asked.line)
        )
    found = found[:LEADS]
    return [
        _led_excerpt(e, changes, room) if (changes := [c for c in found if c.excerpt is e]) else e
        for e in excerpts
    ]


def _asked_or_said(said: Sequence[Said], query: str, chars: int) -> Change | None:
    """The change on the question's subject (`memory.block.asked`), unless its line says a
    change with a change word in the same words: the change word says which value is new
    ("we're skipping Manchester, it clashed with the CQC visit. Instead I've booked … in
    Glasgow"). One elsewhere in the line is another ("Kirsty moved in with her boyfriend in
    July … I dropped French and I'm doing Spanish instead")."""
    asked = asked_change(said, query, chars) if query else None
    if asked is None:
        return None
    older = older_than(next(s for s in said if s.excerpt is asked.excerpt), said)
    words = frozenset().union(*(o.words for o in older))
    values = frozenset().union(*(o.values for o in older))
    told = _first_change(asked.line, words, values, chars)
    if told is not None and _overlap(asked.line, told[0], asked.piece):
        return Change(asked.excerpt, asked.line, *told)
    return asked


def _overlap(line: str, piece: str, other: str) -> bool:
    """Whether two pieces of `line` share words."""
    one, two = piece.removesuffix("…"), other.removesuffix("…")
    start, end = line.find(one), line.find(two)
    return start < end + len(two) and end < start + len(one)


def _led_excerpt(excerpt: Excerpt, changes: Sequence[Change], room: int) -> Excerpt:
    """`excerpt` led by its changes' pieces (`_led`), listing only the chunks it still shows:
    those of the lines kept and of the lines the pieces are read from. A chunk whose line was
    cut is not in the block, and the inspector says so (`memory.block.left_out`)."""
    text, kept = _led(excerpt.text, [c.piece for c in changes], room)
    lines = excerpt.text.split("\n")
    if len(excerpt.line_chunks) != len(lines):  # which line shows which chunk is not known
        return replace(excerpt, text=text)
    sources = {lines.index(USER + c.line) for c in changes}
    shown = (i for n, i in enumerate(excerpt.line_chunks) if i and (n < kept or n in sources))
    return replace(excerpt, text=text, chunk_ids=tuple(shown))


def _led(text: str, pieces: Sequence[str], room: int) -> tuple[str, int]:
    """An excerpt's text with `pieces` as its first lines, within the excerpt's `room`, and
    how many of its lines it still shows: the block keeps the tier's count and size of
    excerpts, so the lines after them are cut from the end (whole lines first, then the last
    one kept at a word)."""
    lead = "\n".join(f"{USER}…{piece}" for piece in pieces)
    lines = text.split("\n")
    while len(lines) > 1 and len(lead) + 1 + len("\n".join(lines)) > room:
        lines.pop()
    rest = "\n".join(lines)
    left = room - len(lead) - 1
    if len(rest) > left:
        cut = rest.rfind(" ", 0, max(left - 1, 0))
        rest = rest[:cut] + "…" if cut > len(rest.split(": ", 1)[0]) + 2 else ""
    return (f"{lead}\n{rest}", len(lines)) if rest else (lead, 0)


def _changes(one: Said, said: Sequence[Said], chars: int) -> Iterator[Change]:
    """Each user line's first change against the user lines of older conversations: those
    of the excerpts of other conversations said before this excerpt's first line."""
    older = older_than(one, said)
    values = frozenset().union(*(o.values for o in older))
    if not values or not one.lines:
        return
    words = frozenset().union(*(o.words for o in older))
    for line in one.lines:
        found = _first_change(line, words, values, chars)
        if found is not None:
            yield Change(one.excerpt, line, *found)


def _first_change(
    line: str, words: frozenset[str], values: frozenset[str], chars: int
) -> tuple[str, str, str] | None:
    """The piece of `line` past the last old value before its first new value said as a
    change, that new value and that old one (lowercase); None when the line says no change."""
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
            return piece(line, last_old.end(), match.end(), chars), word, last_old.group().lower()
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
    if CHANGE.search(line, sentence_start(line, new.start()), sentence_end(line, new.end())):
        return True
    if CHANGE.search(line, old.end(), new.start()):
        return True
    return bool(_FROM.search(line, 0, old.start())) and bool(
        _TO.search(line, old.end(), new.start())
    )
