"""Step 4b, cut to size: words the model reads already are not shown to it again.

A message of the request is never recalled (its hash is excluded: memory/recall/retrieval.py),
but the same words come back under other hashes. Chat UIs resend an answer trimmed, with its
line ends or its markdown normalised (stored again, as sent: the log is verbatim); a reply
continued from a prefill, or by a "continue" button, is stored in pieces and then whole, as the
next request sends it; a user pastes an earlier answer into a new chat. An excerpt of those
words spends the block's room on what the model reads elsewhere, and shows a turn twice
(bench/acceptance_ui.py). So a line is not shown when its words, in order, are all in one of
the request's latest messages (`RequestWords`), or in another line of its session's excerpts
said by the same speaker (`said_by_another`, `said_once`).

Words are compared, not characters (`\\w+` runs, case kept): whitespace, line ends and
markdown's marks do not count. A line of fewer than `FEWEST_WORDS` words is always shown: two
"yes" of one conversation are two turns, and a short turn inside a longer one says little about
whether the longer one repeats it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any, Protocol

from memory.block.tokens import message_text

_WORD = re.compile(r"\w+")
FEWEST_WORDS = 4


def words_of(text: str, fewest: int = FEWEST_WORDS) -> str | None:
    """The text's words, one space between them and one at each end (so that a word is only
    ever found whole), or None for fewer than `fewest`."""
    words, count = _words_held(text) if len(text) <= _HELD_CHARS else _words(text)
    return words if count >= fewest else None


# Lines are compared with each other and with the request's (~60 comparisons a block): the
# words of texts up to a chunk's length are split once, at most 4,096 of them (~4 MB).
_HELD_CHARS = 1000


def _words(text: str) -> tuple[str, int]:
    words = _WORD.findall(text)
    return f" {' '.join(words)} ", len(words)


@lru_cache(maxsize=4096)
def _words_held(text: str) -> tuple[str, int]:
    return _words(text)


def forget_words() -> None:
    """Let go of every text held with its words (a user forgotten: theirs go too)."""
    _words_held.cache_clear()


def said_within(text: str, other: str) -> bool:
    """Whether `other` says all of `text`'s words, in order, with nothing between them
    (`text` of `FEWEST_WORDS` words or more)."""
    words = words_of(text)
    return words is not None and words in (words_of(other, 1) or "")


def says_again(other: str, line: str, line_first: bool) -> bool:
    """Whether the line `other` says `line` again (lines as the block shows turns, `speaker:
    text`): the same speaker says all of `line`'s words in it, and `line` was said first (a
    prefill or a continuation before the reply joined), or starts or ends it (a piece of it,
    as a window's cut). A newer line inside an older one is no piece of it: "tell him the
    meeting is on Friday" said after "Don't tell him the meeting is on Friday" is shown."""
    speaker, _, text = line.partition(": ")
    said_by, _, said = other.partition(": ")
    words, whole = words_of(text), words_of(said, 1) or ""
    if said_by != speaker or words is None or words not in whole:
        return False
    return line_first or whole.startswith(words) or whole.endswith(words)


def said_by_another(line: str, others: Iterable[tuple[str, bool]]) -> bool:
    """Whether a line of `others` says `line` again (`says_again`); `others`: each line, and
    whether `line` was said before it."""
    return any(says_again(other, line, first) for other, first in others)


def said_once(lines: Sequence[str]) -> list[int]:
    """The indexes of `lines` (`speaker: text`, in the order said) to show: not those another
    line says again (`says_again`); of two lines with the same words, the first."""
    return [
        i
        for i, line in enumerate(lines)
        if not any(
            j != i and says_again(other, line, i < j) and not (i < j and said_within(other, line))
            for j, other in enumerate(lines)
        )
    ]


# A line of an excerpt: (when said, message id, chunk id, `speaker: text`).
Line = tuple[float, int, int, str]


class Lines(Protocol):
    """A passage of an excerpt (`memory.block.excerpts`): its session and its lines."""

    session_id: str
    lines: list[Line]

    def keep(self, lines: list[Line]) -> None: ...


def keep_said_once(passages: Sequence[Lines]) -> set[int]:
    """Take out of each session's passages the lines another of their lines says again
    (`said_once`): the pieces of a continued reply beside the reply joined, placed before
    it or brought in after it by widening. The chunk ids of the hits taken out (not of the
    turns widening brought in: chunk id 0)."""
    gone: set[int] = set()
    sessions: dict[str, list[Lines]] = {}
    for passage in passages:
        sessions.setdefault(passage.session_id, []).append(passage)
    for group in sessions.values():
        lines = sorted((line, n) for n, passage in enumerate(group) for line in passage.lines)
        kept = set(said_once([line[3] for line, _ in lines]))
        for n, passage in enumerate(group):
            passage.keep([line for i, (line, at) in enumerate(lines) if i in kept and at == n])
        gone.update(line[2] for i, (line, _) in enumerate(lines) if i not in kept and line[2])
    return gone


# How much of the request is read, newest messages first: a pasted answer is recent, and an
# agent's whole history (500 kB and more) would cost 15-30 ms to split into words (~30 µs a
# kB); of these 32 kB only the messages holding a line's three longest words are split, once
# each (~1.5 ms when every message holds them: 250 messages of 2.5 kB of the same 17 words).
READ_CHARS = 32_000


class RequestWords:
    """The words of a request's latest messages, to ask whether a line repeats one of them.

    A line's three longest words are looked for in each message first (C substring searches);
    only the messages holding them are split into words, once each. The messages read are the
    newest, `READ_CHARS` of them at most.
    """

    def __init__(self, messages: Sequence[Mapping[str, Any]]) -> None:
        self._messages = messages
        self._texts: list[str] | None = None  # read when a line first asks
        self._words: dict[int, str] = {}

    def shows(self, text: str) -> bool:
        """Whether one message read says all of `text`'s words, in order."""
        words = words_of(text)
        if words is None:
            return False
        longest = sorted(words.split(), key=len)[-3:]
        return any(
            all(word in said for word in longest) and words in self._words_of(index)
            for index, said in enumerate(self._latest())
        )

    def _latest(self) -> list[str]:
        if self._texts is None:
            self._texts, left = [], READ_CHARS
            for message in reversed(self._messages):
                said = message_text(message)
                if len(said) > left:
                    break
                self._texts.append(said)
                left -= len(said)
        return self._texts

    def _words_of(self, index: int) -> str:
        if index not in self._words:
            self._words[index] = words_of(self._latest()[index], 1) or ""
        return self._words[index]
