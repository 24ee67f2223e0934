"""A plan called off and replaced, said in one sentence: the replacement is the current value.

Part of deterministic fact capture, read over a whole sentence after its clauses' rules. A
newer turn that cancels a plan often names the old value first ("the nursery place isn't
happening, …, so the twins are starting with a nanny called Rosa instead"): an excerpt of it
then puts the superseded value before the current one whatever the excerpts' order, and a
fact leading the block is what puts the current one first. The shape, each part required:

    the / our / my <thing> fell through | is off | was cancelled | called off | scrapped |
    isn't happening … <subject> <verb> (<preposition>) <value> instead

-> current:<thing> = <value>. The key is the cancelled thing's head noun ("our Cornwall cottage
booking" -> booking), so a later change of the same plan supersedes it; its modifiers are
left out, as they often name the old plan ("the evening pottery class" -> class: the block
says "current (class): <the new one>", not the old one first). The value is an arrangement the
subject is now in, after a verb of one ("doing", "taking", "starting with", "booked", "going
with", "switched to" …), at most eight words, cut before a time or purpose ("two weeks in
Crete for August" -> "two weeks in Crete"). A hypothetical ("if the trip is off, we'd …") or
a question states nothing.
"""

from __future__ import annotations

import re

from memory.facts.lexicon import cue
from memory.facts.statements import Capture, cap, slug

_CALLED_OFF = (
    r"(?:fell\s+through|(?:is|was|'s|has\s+been|got|had\s+been)\s+(?:off|cancell?ed|called\s+off"
    r"|scrapped)|(?:isn't|is\s+not|wasn't|was\s+not)\s+(?:happening|going\s+ahead))"
)
# Verbs of an arrangement one is now in ('going with', not 'going to': 'we're going to Jo's
# instead' is an outing, not a plan that stands).
_ARRANGED = (
    r"doing|taking|starting|selling|using|renting|booked|booking|going\s+with|switched\s+to"
    r"|switching\s+to|signed\s+up\s+for|enrolled\s+(?:on|in)|chose|picked"
)
_REPLACED = cue(
    rf"(?:.*?\b)?(?:the|our|my)\s+(?P<what>[^,;.!?]{{1,40}}?)\s+{_CALLED_OFF}\b[^.!?]*?"
    r"\b(?:i|we|they|he|she|the\s+\w+)(?:'ve|'re|'m|'s|\s+have|\s+are|\s+am|\s+is)?\s+"
    rf"(?:now\s+)?(?P<verb>{_ARRANGED})(?:\s+(?:with|through|to|at|for|on|in))?\s+"
    r"(?P<v>[^,;.!?]{3,80}?)\s+instead\b.*"
)
_HYPOTHETICAL = cue(r"\b(?:if|unless|would|'d|could|might|maybe|in\s+case)\b")
# Where the value ends: a time or a purpose after it ('for the same week', 'from May').
_TAIL = cue(r"\s+(?:for|from|since|until|over|during|this|next|last|on\s+(?:the\s+)?\w+day)\b")
_NOT_A_THING = cue(r"^(?:whole|entire|big|original|old|planned|usual)\s+")
_NOT_A_HEAD = cue(r"one|ones|thing|things|it|that|this|plan|plans|\w+ly|to|of|in|on|at|for|with")
_VALUE_WORDS = 8


def replaced_plan(sentence: str) -> list[Capture]:
    """'the whole cruise got cancelled, so we've booked two weeks in Crete for August instead'
    -> current:cruise = two weeks in Crete; [] for any other sentence."""
    if "instead" not in sentence.lower() or sentence.rstrip().endswith("?"):
        return []
    if not (match := _REPLACED.fullmatch(sentence.strip())):
        return []
    if _HYPOTHETICAL.search(sentence[: match.start("v")]):
        return []
    thing = _thing(match["what"])
    value = _TAIL.split(match["v"])[0].strip()
    if not thing or not value or len(value.split()) > _VALUE_WORDS:
        return []
    return [cap(f"current:{thing}", value, "profile", "replaced_plan")]


def _thing(what: str) -> str | None:
    """The cancelled thing's head noun: its last word, when a common noun ends it ('the trip to
    Lisbon' and 'the Kew one' name no thing a key can hold)."""
    words = _NOT_A_THING.sub("", what.strip()).split()
    if not words or len(words) > 3 or not all(re.fullmatch(r"[\w'-]+", w) for w in words):
        return None
    head = words[-1]
    if head[:1].isupper() or _NOT_A_HEAD.fullmatch(head):
        return None
    return slug(head, 1) or None
