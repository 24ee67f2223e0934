"""Step 4c, the change on the question's subject: its new value leads, with or without a change
word.

`memory.block.latest` reads a change only with a change word ("now", "instead", "swapped" …):
without one, a name after an older name is as often another topic as a change. Many changes
are said without one ("I sold the Precision and bought a Music Man StingRay", "I've left
Brennan Lowe, I've joined a bigger firm, Feilden Marsh"), or with one in a line whose first
change is another ("Kirsty moved in with her boyfriend in July … I dropped French and I'm doing
Spanish instead"). The question says which subject: an older conversation's user sentence that
holds a word of the question (stemmed) and names a name or number ("I play a 1978 Fender
Precision", "I'm doing an evening course in French") makes that value the subject's, and a
newer user line that names it, then a name or number no older user line says, in the same
sentence, says the change ("…and bought a Music Man StingRay."). A line that names two of the
subject's values, the one first said on it before the other ("My biggest client is … LinguaPort"
before "a new direct client, a patent law firm in Düsseldorf"), leads with the later one's
sentence ("… stopped working with them, it's scary but the patent firm in Düsseldorf has
doubled their volume."). One such change, the newest line's, leads the block, before those
`latest` reads; never one whose new value a newer conversation's user line names again.
docs/recall-quality.md, "Twenty-fourth pass".
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

from memory.block.said import (
    SENTENCE_END,
    Change,
    Said,
    older_than,
    piece,
    sentence_start,
    taken_up_later,
)
from memory.recall.changed import WORD, about_the_present, is_a_value
from memory.store.fts import STOPWORDS, fts_terms, stem


@dataclass(frozen=True, slots=True)
class _Told:
    """When a value was first said on the question's subject, on which of the question's words
    (stemmed, in any excerpt), and the names the lines of its first excerpt said beside it."""

    at: float
    on: frozenset[str]
    beside: frozenset[str]


_CLAUSE = re.compile(r"[,;:(—–]")
_OPENERS = frozenset("and but so oh also then plus now the my our his her their a an".split())


def asked_change(said: Sequence[Said], query: str, chars: int) -> Change | None:
    """The newest user line's change on the question's subject (module docstring); None when
    no line says one, or the question is not about the user's present."""
    if not about_the_present(query):
        return None
    asked = {stem(word) for word in fts_terms(query)}
    if not asked:
        return None
    on_it: dict[int, list[tuple[str, frozenset[str], frozenset[str]]]] = {}  # read once
    for one in said:
        older = older_than(one, said)
        if not older or not one.lines:
            continue
        subject = _the_subjects_values(older, asked, on_it)
        if not subject:
            continue
        words = frozenset().union(*(o.words for o in older))
        for line in one.lines:
            found = _change_on(line, subject, words, chars)
            if found is not None:
                change = Change(one.excerpt, line, *found)
                if not taken_up_later(change, said):
                    return change
    return None


def _the_subjects_values(
    older: Sequence[Said],
    asked: set[str],
    on_it: dict[int, list[tuple[str, frozenset[str], frozenset[str]]]],
) -> dict[str, _Told]:
    """The names (lowercase) the older user sentences holding a word of the question say,
    but those the question names too (the subject's own name: "MRCP Part 1"), each as its
    first excerpt says it (`_Told`). `on_it` keeps what each excerpt says on the question."""
    first: dict[str, _Told] = {}
    for other in sorted(older, key=lambda o: o.excerpt.created_at):
        at = other.excerpt.created_at
        if id(other) not in on_it:
            on_it[id(other)] = _said_on(other, asked)
        for value, on, names in on_it[id(other)]:
            told = first.get(value)
            if told is None:
                first[value] = _Told(at, on, names)
            elif told.at == at:
                first[value] = _Told(at, told.on | on, told.beside | names)
            else:
                first[value] = _Told(told.at, told.on | on, told.beside)
    return first


def _said_on(other: Said, asked: set[str]) -> list[tuple[str, frozenset[str], frozenset[str]]]:
    """Each name `other`'s user sentences holding a word of the question say (not one the
    question holds), with those words (stemmed) and the names of its line."""
    found: list[tuple[str, frozenset[str], frozenset[str]]] = []
    for line in other.lines:
        names = frozenset(w for m in WORD.finditer(line) if _counted(w := m.group().lower()))
        for sentence in _sentences(line):
            values = [
                word
                for m in WORD.finditer(sentence)
                if _counted(word := m.group().lower())
                and is_a_value(sentence, m)
                and stem(word) not in asked
            ]
            on = frozenset(asked & {stem(w) for w in fts_terms(sentence)}) if values else None
            found += ((value, on, names) for value in values if on)
    return found


def _change_on(
    line: str, subject: dict[str, _Told], words: frozenset[str], chars: int
) -> tuple[str, str, str] | None:
    """The piece of `line` that says the subject's newer value, and that value and the old
    one (lowercase): a value of the subject after one said on it before, on one of the same
    words of the question, read first (the piece from its sentence's start); else a name no
    older line says, after one of the subject's in its sentence that does not open its clause
    (`_opens_a_clause`), with two words or more between (one is a name's own phrase, not a
    change: "Brighton and Hove", "we opened Salt Road on Friday")."""
    named = [(m, w) for m in WORD.finditer(line) if _counted(w := m.group().lower())]
    values = [(m, w) for m, w in named if is_a_value(line, m) or w in subject]
    unsaid = [n for n, (_, w) in enumerate(values) if w not in words]
    last_unsaid = unsaid[-1] if unsaid else -1  # the last name no older line says
    marks = _Marks.of(line)
    first_old: str | None = None
    for n, (match, word) in enumerate(values):
        if word not in subject:
            continue
        old = subject[first_old] if first_old is not None else None
        if (
            old is not None
            and subject[word].at > old.at
            and subject[word].on & old.on
            and first_old in subject[word].beside  # the newer said beside the older
            and last_unsaid <= n  # no newer name after it
        ):
            start = max(values[n - 1][0].end(), sentence_start(line, match.start()))
            return piece(line, start, match.end(), chars), word, str(first_old)
        if first_old is None:
            first_old = word
    last_old: re.Match[str] | None = None
    opens = False  # whether the name `last_old` ends opens its clause
    for n, (match, word) in enumerate(values):
        if word in subject:
            before = values[n - 1][0] if n else None
            one_name = before is not None and not line[before.end() : match.start()].strip()
            opens = opens if one_name else marks.opens_a_clause(match)  # "Pantry Pal hit …"
            last_old = None if opens else match
        elif (
            last_old is not None
            and word not in words
            and marks.sentence_end(last_old.end()) >= match.end()
            and _two_words(line, last_old.end(), match.start())
        ):
            return piece(line, last_old.end(), match.end(), chars), word, last_old.group().lower()
    return None


@dataclass(frozen=True, slots=True)
class _Marks:
    """Where a line's sentences and clauses end, and where its words that do not open a
    clause start: read once a line and looked up by bisection (searched again from the line's
    start for each name, a 30 kB line of names took 20 s)."""

    line: str
    sentences: list[int]  # where each sentence's end mark is (`SENTENCE_END`)
    clauses: list[int]  # where each clause starts after its mark (`_CLAUSE`)
    others: list[int]  # where each word not one of `_OPENERS` starts

    @classmethod
    def of(cls, line: str) -> _Marks:
        return cls(
            line,
            [m.start() for m in SENTENCE_END.finditer(line)],
            [m.end() for m in _CLAUSE.finditer(line)],
            [m.start() for m in WORD.finditer(line) if m.group().lower() not in _OPENERS],
        )

    def sentence_start(self, at: int) -> int:
        """`memory.block.said.sentence_start`: past the last end mark before `at`."""
        if at > 0 and self.line[at - 1] in ".!?":
            return at
        n = bisect_right(self.sentences, at - 2) - 1
        return self.sentences[n] + 2 if n >= 0 else 0

    def sentence_end(self, at: int) -> int:
        """`memory.block.said.sentence_end`: just past the first end mark from `at`."""
        n = bisect_left(self.sentences, at)
        return self.sentences[n] + 1 if n < len(self.sentences) else len(self.line)

    def opens_a_clause(self, value: re.Match[str]) -> bool:
        """Whether `value` is the first word of its clause but a determiner or a conjunction
        ("… and Lena has me doing hill strides", "Marco and I are thinking about Sicily"): who
        does something, not what was given up for the name after it ("I sold the Precision
        and bought a Music Man StingRay")."""
        at = value.start()
        clause = bisect_right(self.clauses, at) - 1
        start = max(self.sentence_start(at), self.clauses[clause] if clause >= 0 else 0)
        other = bisect_left(self.others, start)
        return other >= len(self.others) or self.others[other] >= at


def _two_words(line: str, start: int, end: int) -> bool:
    """Whether two words or more are between `start` and `end` (read up to the second)."""
    return sum(1 for _ in zip(range(2), WORD.finditer(line, start, end), strict=False)) > 1


def _counted(word: str) -> bool:
    """A name: a number is read in pieces ("3.60", "1,550", "1:31" are two words each)."""
    return len(word) > 1 and word.isalpha() and word not in STOPWORDS


def _sentences(line: str) -> list[str]:
    starts = [0, *(m.end() for m in SENTENCE_END.finditer(line))]
    return [line[a:b] for a, b in zip(starts, [*starts[1:], len(line)], strict=True)]
