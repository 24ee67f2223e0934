"""A correction: the user takes back a value they gave and says the right one.

Part of deterministic fact capture, read over a whole sentence when no other rule fired. "Actually
it's Salford, not Manchester", "Sorry, I meant Thursday, not Tuesday", "I said Lisbon earlier
but it's Porto", "not Manchester — Salford": the sentence names no thing a key could be built
from, only the old value and the new. So the capture is keyed `CORRECTED`, carries the old value
in `replaces`, and the apply step (`corrected`, called by `memory/facts/rules.py`) finds the
user's fact that holds the old value and writes the new one in its place, under that fact's own
key: the old value stays in its history, and the block leads with the new one.

With a correction word and no old value ("Correction: the dose is 20 mg", "No wait, it's the
14th") the new value's kind stands for it: an amount in the same unit, a day of the month, a
weekday, a month or a clock time replaces the one of the same kind in the fact whose subject
(its key's words: 'medication:ibuprofen' is ibuprofen's) or whose value the correcting message
names, or else the user's message before it ("I take ibuprofen 400 mg" then "Correction: the
dose is 200 mg"); nothing when neither names one, when it names several, or when it holds another
value of the kind ("Rex is on carprofen 75 mg. Oops, make that 50 mg" leaves sertraline's alone).

When no fact holds the old value (a correction of the assistant's words, or of something never
captured), a correction that names its thing ("the physio is on Fridays, not Mondays", "it's
Thursday evenings for the classes") writes the new value under `current:<thing>` (`about`);
any other writes nothing. Nothing either for a sentence about someone else ("my brother lives
in Leeds, not Manchester"), a question, or a hypothetical.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from memory.facts.general import ok_thing
from memory.facts.lexicon import KIN, TAINT, cue
from memory.facts.statements import Capture, cap, slug
from memory.records import Fact

CORRECTED = "correction:said"

_MARK = (
    r"(?:actually|sorry|oops|whoops|my\s+(?:mistake|bad)|no\s+wait|wait|correction|scratch\s+that"
    r"|(?:let\s+me\s+)?correct(?:ing)?\s+(?:myself|that)|i\s+mis(?:spoke|typed))"
)
_MARKS = rf"(?:{_MARK}[\s,:;!.\-—–]*)+(?:no[\s,!.]+)?"
# Marks that say a correction on their own; 'Actually it's 5 pm', 'Sorry, it's the 3rd' do not.
_STRONG = cue(
    r".*\b(?:oops|whoops|mistake|my\s+bad|no\s+wait|correction|scratch|correct|mis\w+)\b.*"
)
# The frame before a new value: 'it's', 'I meant', 'the wedding is on', 'make that'.
_MEANT = r"i\s+meant|i\s+mean|make\s+that|it\s+should\s+(?:be|have\s+been)|that\s+should\s+be"
_FRAME = (
    rf"(?:(?P<meant>{_MEANT})|it'?s|it\s+is|that'?s|that\s+is"
    r"|(?:the|my|our)\s+(?P<thing>[\w' -]{1,30}?)\s+(?:is|are|was|were|'s|'re))"
    r"(?:\s+(?:actually|really))?(?:\s+(?:on|at|in|for|from|to|with|by))?\s+"
)
# What may follow a correction after a comma or a dash: 'Actually it's Salford, not Manchester,
# I always mix them up'.
_TAIL = r"(?:\s*(?:,(?!\d{3})|[;:—–])\s*.*|\s+-+\s+.*)?"
_VALUE = r"\w(?:[\w'.&/ -]|,(?=\d{3}))" + "{0,40}?"  # '1,200 pounds'; no other comma
# 'Actually it's Salford, not Manchester', 'Sorry, the wedding is on Thursday, not Tuesday'.
_NEW_NOT_OLD = cue(
    rf"(?P<mark>{_MARKS})?(?P<frame>{_FRAME})?(?P<new>{_VALUE}),?\s+not\s+(?:on\s+|at\s+|in\s+)?"
    rf"(?P<old>{_VALUE})(?:,?\s+(?:as|like)\s+i\s+(?:said|wrote|told\s+you)(?:\s+before)?)?{_TAIL}"
)
# 'not Manchester — Salford', 'not Tuesday, Thursday'.
_NOT_OLD_NEW = cue(
    rf"(?P<mark>{_MARKS})?not\s+(?P<old>{_VALUE})\s*(?:[—–]+|-{{1,2}}|,)\s*"
    rf"(?:it'?s\s+|i\s+meant\s+)?(?P<new>{_VALUE})"
)
# 'I said Lisbon earlier but it's Porto', 'when I said Lisbon I meant Porto', also after a
# clause ('Oh, one correction, I said Wednesday earlier but it's Thursday').
_SAID_OLD = cue(
    rf"(?:.*?[,;]\s+)?(?P<mark>{_MARKS})?(?:when\s+)?i\s+(?:said|wrote|told\s+you|put)\s+(?P<old>{_VALUE})"
    r"(?:\s+(?:earlier|before|above|yesterday|last\s+time))?,?\s*(?:but\s+|[-—–]+\s*)?"
    rf"(?:i\s+meant|it'?s(?:\s+actually)?|it\s+is|it\s+should\s+(?:be|have\s+been)"
    rf"|that\s+should\s+be)\s+(?P<new>{_VALUE}){_TAIL}"
)
# A correction word and a new value only: 'Correction: the dose is 20 mg', 'No wait, it's the 14th'.
_MARKED = cue(rf"(?P<mark>{_MARKS})?(?P<frame>{_FRAME})(?P<new>{_VALUE}){_TAIL}")
_SOMEONE_ELSE = cue(rf"\b(?:he|she|they|his|her|their|him|them|{'|'.join(sorted(KIN))})\b")
_NOT_VALUES = cue(
    r"(?:the\s+|a\s+|an\s+)?(?:it|that|this|one|me|you|him|her|them|us|really|sure|yet|now|just|yes|no"
    r"|so|too|quite|exactly|only|even|always|never|much|many|bad|good|great|fine|ok|okay|true"
    r"|right|wrong|here|there|again|anymore|at\s+all|for\s+long|a\s+problem|a\s+big\s+deal)"
)
# A value is a name, a place, a date or an amount, never a clause: 'Not Manchester, I said'.
_CLAUSE = cue(r"(?:i|we|you|he|she|they|it|there|this|that)(?:'\w+)?\b.*")
_WORDS = 5
_VAGUE = frozenset("thing things one ones stuff bit part".split())  # 'the thing is on …'
# The thing a correction names after its value: 'it's Thursday evenings for the classes'.
_FOR_THING = cue(r"(?P<v>.+?)\s+for\s+(?:the|my|our)\s+(?P<thing>[a-z][\w-]*(?:\s+[a-z][\w-]*)?)")
_BARE_WORDS = 3  # a new value with no frame before it: 'Actually Salford, not Manchester'

# The kinds a value without an old one is matched by: its pattern, found in an old fact's value.
_UNIT = r"(?:mg|mcg|µg|g|kg|ml|l|iu|units?|%|percent|pounds?|euros?|dollars?|k|km|miles?)"
_AMOUNT = cue(rf"\d+(?:[.,]\d+)?\s*(?P<unit>{_UNIT})(?!\w)")
_A_UNIT = cue(_UNIT)
_KINDS = (
    _AMOUNT,
    cue(r"\d{1,2}(?:st|nd|rd|th)(?!\w)"),
    cue(r"(?:mon|tues|wednes|thurs|fri|satur|sun)day"),
    cue(
        r"(?:january|february|march|april|may|june|july|august|september|october|november"
        r"|december)(?!\w)"
    ),
    cue(r"\d{1,2}(?:[:.]\d{2})?\s*(?:am|pm)(?!\w)|\d{1,2}:\d{2}"),
)


def correction(sentence: str) -> list[Capture]:
    """'Actually it's Salford, not Manchester' -> a `CORRECTED` capture of 'Salford' that
    replaces 'Manchester'; 'Correction: the dose is 20 mg' -> one of '20 mg' replacing an
    amount in mg; [] for any other sentence."""
    text = re.sub(r"[\s.!]+$", "", sentence.strip().replace("’", "'"))
    if not text or text.endswith("?") or TAINT.search(text):
        return []
    for shape in (_SAID_OLD, _NEW_NOT_OLD, _NOT_OLD_NEW):
        match = shape.fullmatch(text)
        if match is None:
            continue
        if shape is _NEW_NOT_OLD and not _said_as_correction(match):
            continue  # 'I want tea, not coffee', 'It's a marathon, not a sprint'
        thing = match.groupdict().get("thing") or ""
        return _captured(match["new"], match["old"], text[: match.start("new")], thing)
    match = _MARKED.fullmatch(text)
    if match is None or not (match["meant"] or match["mark"] and _STRONG.fullmatch(match["mark"])):
        return []
    kind = _kind(match["new"])
    return _captured(kind.group(0), "", text[: match.start("new")]) if kind else []


def _said_as_correction(match: re.Match[str]) -> bool:
    """'<new>, not <old>' corrects with a correction word before it ('Actually it's Salford'),
    'I meant' or a thing named ('the wedding is on Thursday, not Tuesday'); with a correction
    word and no frame, the new value is a short one ('Sorry, Salford, not Manchester')."""
    frame = (match["frame"] or "").lower()
    if match["meant"] or frame.startswith(("the ", "my ", "our ")):
        return True
    return bool(match["mark"]) and (bool(frame) or len(match["new"].split()) <= _BARE_WORDS)


def _captured(new: str, old: str, before: str, thing: str = "") -> list[Capture]:
    new, old = new.strip(), old.strip()
    if for_thing := _FOR_THING.fullmatch(new):  # 'it's Thursday evenings for the classes'
        new, thing = for_thing["v"], thing or for_thing["thing"]
    if _SOMEONE_ELSE.search(before) or not _a_value(new) or old and not _a_value(old):
        return []
    if new.casefold() == old.casefold():
        return []
    about = _about(thing) if old and _named_value(new) and _named_value(old) else ""
    return [replace(cap(CORRECTED, new, "profile", "correction"), replaces=old, about=about)]


def _about(thing: str) -> str:
    """The key of the thing a correction names ('the physio is on …' -> current:physio), or ""
    for no thing a user keeps the state of (a pronoun, a person, an event …)."""
    words = thing.lower().split()
    if not words or len(words) > 3 or not all(re.fullmatch(r"[a-z][\w-]*", w) for w in words):
        return ""
    if words[-1] in _VAGUE or not ok_thing(words):
        return ""
    return f"current:{slug(' '.join(words), 3)}"


def _named_value(value: str) -> bool:
    """A name, a date, a day or an amount ('Porto', 'Thursday evenings'), not 'too late'."""
    return value[:1].isupper() or _kind(value) is not None


def _a_value(value: str) -> bool:
    if _NOT_VALUES.fullmatch(value) or _CLAUSE.fullmatch(value):
        return False
    return 0 < len(value.split()) <= _WORDS


def _kind(value: str) -> re.Match[str] | None:
    """The part of `value` of a kind a correction may stand on alone (an amount, a date …)."""
    for kind in _KINDS:
        if (found := kind.search(value)) and len(value.split()) <= _WORDS:
            return found
    return None


def corrected(
    capture: Capture, facts: Sequence[Fact], message: str = "", before: str = ""
) -> Capture | None:
    """`capture` (a `CORRECTED` one) written on the user's fact it corrects: that fact's key,
    its value with the old value (or, with none, the value of the new one's kind) replaced by
    the new. With an old value, of the active `facts` holding it, one whose whole value it is
    first ("not Manchester" is the home city's "Manchester" before a later employer's
    "Manchester Metropolitan University"), else the one updated last. With none, the one
    `message` (the correcting one) or else `before` (the user's message before it) names
    (`_named`). None when no fact is found."""
    new, held = _bare(capture.value), _held(capture)
    if held is None:
        return None
    old = _bare(capture.replaces).casefold()

    def order(fact: Fact) -> tuple[bool, float]:
        return bool(old) and _bare(fact.value).casefold() == old, fact.updated_at

    holding = [
        (f, m) for f in sorted(facts, key=order, reverse=True) if (m := held.search(f.value))
    ]
    if not old:
        named = _named([f for f, _ in holding], held, new, message, before)
        holding = [(f, m) for f, m in holding if f is named]
    if not holding:  # no fact held it: the thing it names holds the new value now, if any
        key = capture.about
        return replace(capture, key=key, replaces="", about="") if key else None
    fact, match = holding[0]
    value = fact.value[: match.start()] + new + fact.value[match.end() :]
    return replace(capture, key=fact.key, value=value, category=fact.category, replaces="")


def by_kind(captures: Sequence[Capture]) -> bool:
    """Whether one of `captures` corrects a value by its kind alone ('make that 5 mg'), so the
    user's message before it is needed to tell which fact it is about."""
    return any(c.key == CORRECTED and not c.replaces for c in captures)


def _named(
    facts: Sequence[Fact], held: re.Pattern[str], new: str, message: str, before: str
) -> Fact | None:
    """Of `facts` (each holding a value of the corrected kind), the one the correcting
    `message` names (its subject, or the value it holds: 'no wait, it's the 19th, the 12th is
    the christening'), or, when the message names none and holds no other value of the kind,
    the one `before` names; None when the first of them to name one or hold such a value names
    several, or holds more than one value of the kind (which one was corrected?)."""
    for text, own in ((message, new), (before, "")):  # the message holds the new value itself
        words = set(re.findall(r"[a-z0-9]+", text.lower()))
        said = [_squeezed(m[0]) for m in held.finditer(text)]
        if own and _squeezed(own) in said:
            said.remove(_squeezed(own))
        named = [f for f in facts if _subject(f) & words or _holds_one_of(f, held, said)]
        if named or said:
            return named[0] if len(named) == 1 and len(said) <= 1 else None
    return None


def _holds_one_of(fact: Fact, held: re.Pattern[str], said: list[str]) -> bool:
    value = held.search(fact.value)
    return value is not None and _squeezed(value[0]) in said


def _squeezed(value: str) -> str:
    """'100 mg' and '100mg' are one value."""
    return re.sub(r"\s+", "", value).casefold()


def _subject(fact: Fact) -> set[str]:
    """What names a fact's subject: its key's words ('medication:ibuprofen' -> ibuprofen,
    'current:pip_s_apoquel' -> pip, apoquel), not the key's own 'current' nor a unit."""
    words = re.findall(r"[a-z0-9]+", fact.key.lower())
    return {w for w in words if len(w) > 2 and w != "current" and not _A_UNIT.fullmatch(w)}


def _held(capture: Capture) -> re.Pattern[str] | None:
    """What a correction's old value is found by: the old value said, or the new one's kind."""
    if capture.replaces:
        return re.compile(rf"(?<!\w){re.escape(_bare(capture.replaces))}(?!\w)", re.I)
    value = _bare(capture.value)
    if unit := _AMOUNT.search(value):  # '200 mg' stands for an amount in mg, not one in km
        return cue(rf"\d+(?:[.,]\d+)?\s*{re.escape(unit['unit'].rstrip('sS'))}s?(?!\w)")
    return next((k for k in _KINDS if k.search(value)), None)


def _bare(value: str) -> str:
    """'the 14th' is '14th' in 'Tuesday the 12th of May'; the article is the sentence's."""
    return re.sub(r"^(?:the|a|an)\s+", "", value.strip(), flags=re.I)


def replaced_by(text: str) -> list[re.Pattern[str]]:
    """What the corrections said in `text` replace, as patterns to find it in an earlier turn:
    the old value ('Sorry, I meant Thursday, not Tuesday' -> Tuesday), or with none, a value of
    the new one's kind ('Correction: the dose is 200 mg' -> an amount in mg); [] for most.

    Read for each line of a block (`memory/block/excerpts.py`), so a sentence is read only when
    it holds a word every correction has (substring tests: a regex search cost ~30 µs a line).
    """
    lower = text.lower()
    if not any(word in lower for word in _HINTS):
        return []
    found = (
        _held(c)
        for sentence in _SENTENCE.split(text)
        if any(word in sentence.lower() for word in _HINTS)
        for c in correction(sentence)
    )
    return [held for held in found if held is not None]


# A word each correction shape holds: 'not', 'said', 'meant', or a correction word of `_MARK`.
_HINTS = (
    "not ",
    "said",
    "wrote",
    "meant",
    "mean ",
    "make that",
    "should",
    "oops",
    "mistake",
    "bad",
    "wait",
    "correct",
    "scratch",
    "mis",
)
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
