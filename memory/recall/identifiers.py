"""An identifier in the question: named exactly, or asked for by its kind.

MiniLM reads codes poorly (`INC-48213`, `SN-4471-XQ9`), so their cosines say little: for a
question that names one, the turn holding it verbatim is the answer, and for one that asks for
one by its kind ('What was the support ticket id?'), the turn that gives a code of that kind
next to what it is of. The abstention gate stays open for both (`memory.recall.abstention`),
and recall keeps a turn that gives the kind asked for even under the cosine floor: a code said
in a long chatty message shares little of its meaning with the question (`giving_the_kind`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from memory.records import Hit
from memory.store.fts import fts_terms, stem

# An identifier: a word with a digit in it (INC-48213, v2.4.1, 10.0.3.7), or joined by `_`,
# `-`, `.` or `/` between letters (feature_flag, api.internal). MiniLM reads such tokens
# poorly, so their cosines say little; an exact match of one is the answer, not a topic.
# Each branch is tried only where a run of its characters starts (the look-behinds): a match
# never starts inside one, and trying from every position of a long run made the question's
# scan quadratic (16 kB of letters: 27 s of a recall thread; 100 kB: 0.05 s now).
_IDENTIFIER = re.compile(r"(?<![\w./-])[\w./-]*\d[\w./-]*|(?<!\w)\w+(?:[_./-]\w+)+")


def names_identifiers(query: str) -> bool:
    """Whether the gate reads the kept hits' text for this question (it names an identifier,
    or asks for one by its kind: see `names_a_stored_identifier`, `gives_the_kind_asked_for`);
    recall reads a large user's text only then."""
    return bool(_identifiers(query)) or asks_for_a_kind(query)


def asks_for_a_kind(query: str) -> bool:
    """Whether the question asks for an identifier by its kind ('What is the vault code?')."""
    return _KIND.search(query) is not None


def names_a_stored_identifier(query: str, kept: Sequence[Hit]) -> bool:
    """True when the question names an identifier that a kept hit holds verbatim.

    The gate judges by cosines alone; for a question asking after an exact identifier that was
    said, the lexical match is the evidence, and withholding it would lose a detail the user
    can name exactly.
    """
    wanted = _identifiers(query)
    if not wanted:
        return False
    return any(t in h.chunk.text.lower() for h in kept for t in wanted)


# An identifier asked for by its kind ('What is the vault code?', 'my NHS number?'), and a
# kept hit that gives one: the kind's word, then within two words a token with a digit ('the
# vault code is QX-7741-ZZ', 'PIN 4471'). A code said inside a long message shares little of
# its meaning with the question, so no cosine stands out; the kind and the code next to it do.
_KIND = re.compile(
    r"\b(code|number|id|pin|passcode|password|reference|ref|serial|version|postcode|zip"
    r"|iban|extension)s?\b",
    re.IGNORECASE,
)
_GIVEN = r"s?\b\W{1,3}(?:\w+\W{1,3}){0,2}?[\w./-]*\d"
# Further on in the same clause ('the serial on the back of the dishwasher is SN-4471-XQ9',
# 'order number for the desk is #A-20931-77'), up to eight words after the kind's word and no
# comma or sentence end between: a token that reads as a code, with a digit and a letter, a
# separator between digits or four digits ('has 11 characters' is a count, not a code).
_CODE = r"(?=[\w./-]*\d)(?=[\w./-]*?(?:[^\W\d_]|\d[./-]\d|\d{4}))[\w./-]+"
_GIVEN_IN_CLAUSE = rf"s?\b(?:[^\w,.;:!?]{{1,3}}[\w']+){{0,8}}?[^\w,.;:!?]{{1,3}}#?{_CODE}"


def gives_the_kind_asked_for(query: str, kept: Sequence[Hit]) -> bool:
    """True when the question asks for an identifier by its kind and one of the three best
    kept hits gives one of that kind (`_KIND`: within two words, `_GIVEN`, or a code further
    on in its clause, `_GIVEN_IN_CLAUSE`) and holds another of the question's words."""
    gives = _giver(query)
    return gives is not None and any(gives(h.chunk.text) for h in kept[:CODE_HITS])


def giving_the_kind(query: str, found: Sequence[Hit]) -> list[Hit]:
    """The hits of `found` that give the identifier the question asks for by its kind, next to
    a word naming what it is of ('the support ticket id is 3f2b8c1e-9a4d' for 'What was the
    support ticket id?'; a question with no such word, 'What's my PIN?', needs the kind alone).

    Recall keeps them whatever their cosine: said inside a paragraph of small talk, the code's
    turn scores under the floor (0.1) although the question's words found it."""
    gives = _giver(query)
    return [] if gives is None else [h for h in found if gives(h.chunk.text)]


def _giver(query: str) -> Callable[[str], bool] | None:
    """Whether a text gives the kind of identifier `query` asks for (None: it asks for none).
    A question that names what the code is of ('passport number') needs a word of it in the
    text, the code next to its kind or further on ('my locker at the pool is number 118' gives
    no passport number)."""
    kinds = {kind.lower() for kind in _KIND.findall(query)}
    if not kinds:
        return None
    named = rf"\b(?:{'|'.join(sorted(kinds))})"
    near = re.compile(rf"{named}{_GIVEN}", re.IGNORECASE)
    far = re.compile(rf"{named}{_GIVEN_IN_CLAUSE}", re.IGNORECASE)
    of = [word for word in fts_terms(query) if word.lower() not in kinds]
    whose = re.compile(rf"\b(?:{'|'.join(map(re.escape, of))})", re.IGNORECASE) if of else None

    def gives(text: str) -> bool:
        if whose is None:
            return near.search(text) is not None
        named_of = whose.search(text) is not None
        return named_of and (near.search(text) is not None or far.search(text) is not None)

    return gives


def _identifiers(query: str) -> set[str]:
    """The identifiers `query` names, lowercased, of three characters or more."""
    wanted = {t.strip("./-").lower() for t in _IDENTIFIER.findall(query)}
    return {t for t in wanted if len(t) >= 3}


# A token that reads as a code: letters and two digits or more ('DE89', 'v2.14.3-rc1',
# 'SN-4471-XQ9'), digits split by dashes or slashes into three runs or five digits or more
# ('31-07-19', '555-0142') or by two dots ('10.0.3.7'), an address, a path or a name joined by
# '_' ('dana.k+billing@fastmail.com', '/etc/nginx/…', 'shop_v2.conf', 'git.example.org'). Not
# an amount, a range, a measure or a time ('1,500', '5-10', '24/7', '2.1%', '25-minute',
# '10am', '22nd'): said beside a topic's words they answer many questions never
# asked about them ("How much did the couch cost?" beside "it cost 1,200"). A name before a
# domain is tried only where a run of letters starts: tried from each letter of a long run, a
# question of one 16,000-character word took 3 s (a kept turn's 100 kB: minutes).
_CODE_LIKE = re.compile(
    r"\d\.\d+\.\d|[@_]|^/\w|\w/\w+/|://"
    r"|(?<![^\W\d_])[^\W\d_]{2,}\.(?:com|org|net|io|dev|app|co|uk|de|fr|eu|edu|gov)\b",
    re.IGNORECASE,
)
_MEASURE = re.compile(r"[\d,.]+%?-?[^\W\d_]+", re.IGNORECASE)
_SPLIT_DIGITS = re.compile(r"\d[-/]\d")
_DIGIT_RUN = re.compile(r"\d+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
# The kept hits read, best first: those the learned gate reads the words of.
CODE_HITS = 3


def is_a_code(token: str) -> bool:
    """Whether `token` (a run of non-space characters) reads as a code, an address or a path."""
    token = token.strip("()[]{}<>\"'“”‘’,;:!?.")
    if token.isalpha():  # most words: no digit, '.', '/', '@' or '_' (~0.2 ms a gated recall)
        return False
    if _CODE_LIKE.search(token):
        return True
    digits = sum(c.isdigit() for c in token)
    if _SPLIT_DIGITS.search(token) and (digits >= 5 or len(_DIGIT_RUN.findall(token)) >= 3):
        return True  # '31-07-19', '555-0142'; not a range or a day: '5-10', '24/7', '12/05'
    if digits < 2 or not any(c.isalpha() for c in token):
        return False
    return _MEASURE.fullmatch(token) is None


def gives_a_code_on_its_words(query: str, kept: Sequence[Hit]) -> bool:
    """True when one of the three best kept hits says a code in a sentence that holds a word
    of the question other than a kind's ('the landlord's IBAN for the rent is DE89 3704 …' for
    'What's the bank account I pay rent to?'): the question asks for something said exactly.
    A question naming an identifier itself asks about that one (`names_a_stored_identifier`)."""
    words = {stem(w) for w in fts_terms(query) if _KIND.fullmatch(w) is None}
    if not words or any(is_a_code(token) for token in query.split()):
        return False
    for hit in kept[:CODE_HITS]:
        for sentence in _SENTENCE_END.split(hit.chunk.text):
            coded = any(is_a_code(token) for token in sentence.split())
            if coded and words & {stem(w) for w in fts_terms(sentence)}:
                return True
    return False
