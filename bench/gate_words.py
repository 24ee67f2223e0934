"""Candidate signals tried for the learned gate (not kept): the question's words in its turns.

The gate's `covered` signal counts the question's words anywhere in the three best kept turns.
A turn that answers a question tends to say several of its words in one sentence ("the MRI
cost me £400"); a turn only on its topic says them scattered over a long reply. These read
that from the three best kept turns' text, by stems (docs/recall-quality.md, "Twentieth
pass").
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from memory.store.fts import fts_terms, stem

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_WORD = re.compile(r"[^\W_]+")
_NUMBER_OR_NAME = re.compile(r"\d|(?<=\s)[A-Z][a-z]")
BIGRAM_REACH = 3  # words between two of the question's neighbouring words, at most


def _stems(query: str) -> list[str]:
    return list(dict.fromkeys(stem(w) for w in fts_terms(query)))


def _sentences(texts: Sequence[str]) -> list[list[str]]:
    """Each sentence of `texts` as its words' stems, in order."""
    return [
        [stem(w) for w in _WORD.findall(s.lower())]
        for text in texts
        for s in _SENTENCE_END.split(text)
        if s.strip()
    ]


def sentence_words(query: str, texts: Sequence[str]) -> float:
    """The most of the question's words (stems) one sentence of `texts` holds."""
    stems = set(_stems(query))
    return float(max((len(stems & set(s)) for s in _sentences(texts)), default=0))


def sentence_share(query: str, texts: Sequence[str]) -> float:
    """`sentence_words` as a share of the question's words."""
    stems = _stems(query)
    return sentence_words(query, texts) / len(stems) if stems else 0.0


def answer_shape(query: str, texts: Sequence[str]) -> bool:
    """One sentence of `texts` holds a word of the question and a number or a name."""
    stems = set(_stems(query))
    for text in texts:
        for sentence in _SENTENCE_END.split(text):
            words = {stem(w) for w in _WORD.findall(sentence.lower())}
            if stems & words and _NUMBER_OR_NAME.search(sentence):
                return True
    return False


def bigram(query: str, texts: Sequence[str]) -> bool:
    """Two neighbouring words of the question said close together (within BIGRAM_REACH
    words), in one sentence of `texts`."""
    stems = _stems(query)
    pairs = set(zip(stems, stems[1:], strict=False))
    if not pairs:
        return False
    for words in _sentences(texts):
        at: dict[str, list[int]] = {}
        for i, w in enumerate(words):
            at.setdefault(w, []).append(i)
        for a, b in pairs:
            if any(abs(i - j) <= BIGRAM_REACH + 1 for i in at.get(a, ()) for j in at.get(b, ())):
                return True
    return False
