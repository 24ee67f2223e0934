"""Questions that ask how many of something, and turns that say the count.

"How many colonies do I have?" finds "…I'm at seven colonies, which is more than I meant to
have" first, by its words, but at a cosine of 0.38 (a beekeeper's turns are all alike to
MiniLM) the abstention gate read it as one more turn on bees and withheld it. A turn that
puts a number before the very thing the question counts answers it: the gate stays open
(`memory/recall/abstention.py`). The thing is one of the two words after "how many" ("How
many bumblebee species…": bumblebee or species), matched by stem, at most two words after
the number ("seven colonies", "12 of the sites", "eight people").
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from memory.records import Hit
from memory.store.fts import stem

# The best kept hits read, as for identifiers (`memory/recall/identifiers.py`).
COUNT_HITS = 3

_ASKED = re.compile(r"\bhow\s+many\s+([a-z][\w'-]*)(?:\s+([a-z][\w'-]*))?", re.IGNORECASE)
# Words after "how many" that end the counted thing ("How many do I have?", "How many books
# in total…", "How many kids my sister has?"): a number before one of them in a kept turn
# ("3 hours in the garden") counts nothing the question asks.
_NOT_A_THING = frozenset(
    "do does did are is was were have has had will would can could should of more times "
    "in on at to for from with by about into per than as and or "
    "i you we they he she it my your our their his her its the a an this that these those "
    "there here left so".split()
)
_NUMBER = (
    r"(?:\d[\d,.]*|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen"
    r"|fourteen|fifteen|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty"
    r"|seventy|eighty|ninety|hundred|a\s+dozen|a\s+couple\s+of|a\s+hundred)"
)
_WORD = r"[a-z][\w'-]*"


def counted_thing(query: str) -> set[str]:
    """The stems of what the question counts ("How many colonies…" → {"coloni"}); empty when
    it asks no "how many" of a thing."""
    asked = _ASKED.search(query)
    if asked is None:
        return set()
    words = [w.lower() for w in asked.groups() if w]
    if words[0] in _NOT_A_THING:
        return set()
    if len(words) > 1 and words[1] in _NOT_A_THING:
        words = words[:1]
    return {stem(w) for w in words}


def gives_the_count(query: str, kept: Sequence[Hit]) -> bool:
    """True when one of the best kept hits says a number of the thing the question counts."""
    things = counted_thing(query)
    if not things:
        return False
    said = re.compile(rf"\b{_NUMBER}\s+(?:{_WORD}\s+){{0,2}}?({_WORD})", re.IGNORECASE)
    for hit in kept[:COUNT_HITS]:
        for found in said.finditer(hit.chunk.text):
            if stem(found.group(1).lower()) in things:
                return True
            tail = hit.chunk.text[found.end(1) : found.end(1) + 40].split()[:2]
            if any(stem(re.sub(r"\W+$", "", w.lower())) in things for w in tail):
                return True
    return False
