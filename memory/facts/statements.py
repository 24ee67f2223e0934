"""The self-statement cue rules: "my name is …", "I live in …", "I work at …", "I'm allergic to …".

Part of deterministic fact capture (`memory/facts/capture.py` splits a message into clauses and
tries the command rules there, then `statement` here). Each rule is anchored at the start of a
clause and returns `Capture`s or nothing; the helpers keep values short, proper and clean.
Keys are a contract with stored facts: changing how a key is built orphans the facts stored
under the old one.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from memory.facts.lexicon import (
    BOUNDARY,
    CALENDAR,
    CLIP,
    COMMON_NOUNS,
    DEICTIC,
    DEPARTMENTS,
    DIRECTIONS,
    EMPLOYERS,
    EVALUATIVE,
    FEEDBACK,
    FIGURATIVE,
    GERUND_FOODS,
    JOIN,
    JUNK,
    LANGUAGES,
    NUMBERING,
    ORG_SUFFIX,
    ORG_WORD,
    PHRASE_JUNK,
    POLITE,
    REGION,
    TECH,
    TITLES,
    WORD,
    cue,
    word_set,
)

Op = Literal["set", "forget"]
Policy = Literal["speak", "adapt", "avoid"]


@dataclass(frozen=True, slots=True)
class Capture:
    """One fact stated by the user; `rule` names the cue that fired, for audit."""

    op: Literal["set", "forget"]
    key: str
    value: str
    category: str
    rule: str
    policy: Literal["speak", "adapt", "avoid"] = "speak"
    replaces: str = ""  # a correction's old value (`memory/facts/corrections.py`)
    about: str = ""  # the key of the thing a correction names, for when no fact held the old value


def _ends(rest: str) -> bool:
    """True when `rest`, the text after a value, is empty or opens a new clause."""
    words = rest.split()
    return not words or not words[0][0].isalnum() or words[0].lower().strip(",.") in BOUNDARY


def _is_cap(word: str) -> bool:
    return not word[0].islower() and word != "I" and not word.lower().startswith("i'")


def _lower_ok(text: str) -> bool:
    """A lowercase word is a name only from a user who types in lowercase ('my name is dana')."""
    return not re.search(r"[A-Z]", re.sub(r"\bI(?:'\w+)?\b", "", text))


# Lowercase words with these endings are adjectives or abstract nouns, never a name or a
# place: 'i'm based in reality', 'i work for attention' (not -ing, -ness or -ence: 'reading',
# 'inverness', 'florence').
_NOT_NAME_ENDINGS = ("ous", "ful", "ble", "ity", "tion", "sion", "ment", "ism", "ship", "hood")


def _proper(
    text: str, max_words: int, *, lower_ok: bool, org: bool = False, the_ok: bool = False
) -> str | None:
    """The proper noun `text` starts with ('Dana Smith', 'the Netherlands'), or None.

    What follows must open a new clause (punctuation or a boundary word such as 'and', 'since'),
    so 'hard to pronounce' or 'a small town' never pass as a name or a place.
    """
    tokens, prefix = text.split(), ""
    if the_ok and len(tokens) > 1 and tokens[0].lower() == "the" and _is_cap(tokens[1]):
        tokens, prefix = tokens[1:], "the "
    pattern, words, rest = (ORG_WORD if org else WORD), list[str](), list[str]()
    for n, raw in enumerate(tokens):
        word = raw if raw in TITLES else raw.rstrip(".,;:!?)\"'")
        if word not in JOIN and not (pattern.fullmatch(word.rstrip(".")) and _is_cap(word)):
            rest = tokens[n:]
            break
        words.append(word)
        if word != raw:
            break  # punctuation closes the value
    if not words and lower_ok and tokens:
        word = tokens[0].rstrip(".,;:!?")
        if not WORD.fullmatch(word) or len(word) < 2 or word.endswith(_NOT_NAME_ENDINGS):
            return None
        if word.lower() in COMMON_NOUNS:  # 'I work for peanuts'
            return None
        words, rest = [word], ([] if word != tokens[0] else tokens[1:])
    if not words or len(words) > max_words or words[0].lower() in JUNK | JOIN:
        return None
    return prefix + " ".join(words) if words[-1] not in JOIN and _ends(" ".join(rest)) else None


def phrase(text: str, max_words: int) -> str | None:
    """`text` cut at the first punctuation or trailing clause; None if empty, long or deictic."""
    match = CLIP.search(text)
    head = POLITE.sub("", text[: match.start()] if match else text)
    head = re.sub(r"[^\w)'+#]+$", "", head).strip()
    words = head.split()
    if not words or len(words) > max_words or words[0] in PHRASE_JUNK or DEICTIC.search(head):
        return None
    return head


def slug(text: str, words: int = 6) -> str:
    return "_".join(re.sub(r"[\W_]+", "_", text.lower()).strip("_").split("_")[:words])


_ADAPT = word_set("preference constraint protocol")  # shape the reply silently, never announce


def cap(key: str, value: str, category: str, rule: str, op: Op = "set") -> Capture:
    policy: Policy = "adapt" if category in _ADAPT else "speak"  # the blog's surface policies
    if re.match(r"never (?:mention|bring|talk|discuss)\b", value):
        policy = "avoid"  # a boundary: kept, never surfaced (the blog's 'avoid' policy)
    return Capture(op=op, key=key, value=value, category=category, rule=rule, policy=policy)


def _replacement(value: str) -> str | None:
    """'not in Berlin but in Lisbon' -> 'in Lisbon' (DMF's 'not X but Y'); None for a bare 'not'."""
    if match := re.match(r"not\s+.+?,?\s+(?:but|it'?s|it is)\s+(?:rather\s+)?(.+)$", value, re.I):
        return match[1]
    return None if value.lower().startswith("not ") else value


def not_a_place(value: str) -> bool:
    """True for a capitalised value that names no place a user lives in: a team, a tool, a
    language, a day, a numbered option or a well-known employer ('I moved to Marketing', 'I
    live in Excel', 'we've moved to Plan B', 'I've moved to Accenture')."""
    words = value.lower().split()
    whole = " ".join(words)
    if whole in DEPARTMENTS | LANGUAGES | CALENDAR | EMPLOYERS or words[-1] in TECH:
        return True
    named = len(words) > 1 and words[-1] in ORG_SUFFIX and words[-2] not in DIRECTIONS
    return named or len(words) > 1 and words[0] in NUMBERING


def _place(raw: str, lower_ok: bool) -> str | None:
    """A city, with its region when one follows a comma ('Portland, Oregon', 'Washington, D.C.')."""
    raw = " ".join(raw.split())
    value = _proper(raw, 4, lower_ok=lower_ok, the_ok=True)
    if value is None or not_a_place(value):
        return None
    region = REGION.match(raw[len(value) :]) if raw.startswith(value) else None
    if region and _is_cap(region[1]) and region[1].lower() not in JUNK and _ends(region[2]):
        value += ", " + re.sub(r"(?<![A-Z])[.!?]$", "", region[1])
    return value


def _name(match: re.Match[str]) -> str | None:
    """'my name is not Dana but Dara' -> 'Dara'; a bare "name's jordan" must be capitalised."""
    raw = _replacement(("not " if match["n"] else "") + match["v"])
    lower_ok = not match["bare"] and _lower_ok(match.string)
    return _proper(raw, 3, lower_ok=lower_ok) if raw else None


def _call_me(match: re.Match[str]) -> str | None:
    return _proper(match["v"], 3, lower_ok=False)  # 'call me later', 'call me crazy'


def _home(match: re.Match[str]) -> str | None:
    """'in Lisbon', 'from Berlin to Lisbon', 'not in Berlin but in Lisbon' -> the destination."""
    raw = _replacement(match["v"])
    prep = r"(?:from\s+.+?\s+)?to" if match.re is _MOVED else "in"
    dest = re.match(rf"{prep}\s+(.+)", raw, re.I) if raw else None
    return _place(dest[1], _lower_ok(match.string)) if dest else None


def _diet(match: re.Match[str]) -> str | None:
    return match["v"].lower() if _ends(match["r"]) else None  # not 'a vegan restaurant'


_MONTH = (
    r"(?:january|february|march|april|may|june|july|august|september|october|november|december"
    r"|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec)\.?"
)
_DATE = cue(
    rf"(?:{_MONTH}\s+\d{{1,2}}(?:st|nd|rd|th)?(?:,?\s+\d{{4}})?|(?:the\s+)?\d{{1,2}}(?:st|nd|rd"
    rf"|th)?\s+(?:of\s+)?{_MONTH}(?:,?\s+\d{{4}})?|\d{{1,2}}/\d{{1,2}}(?:/\d{{2,4}})?"
    rf"|\d{{4}}-\d\d-\d\d|in\s+{_MONTH})(?![\w/])"
)


def _date(match: re.Match[str]) -> str | None:
    """A calendar date only: 'my birthday is tomorrow' is not durable."""
    date = _DATE.match(match["v"])
    if not date or not _ends(match["v"][date.end() :]):
        return None
    return re.sub(r"^in\s+", "", date[0], flags=re.I)


_ADV = r"(?:\s+(?:just|recently|finally|actually|currently|now|still|also|really|officially))*"
_NAME = cue(
    r"(?:my\s+name(?:\s+is|'s)|(?P<bare>name's))(?P<n>\s+not|n't)?(?:\s+actually)?\s+(?P<v>.+)"
)
_CALL_ME = cue(r"(?:(?:you\s+can|please|just)\s+)*(?:call\s+me|i\s+go\s+by)\s+(?P<v>.+)")
_LIVE = cue(rf"(?:i|we)(?:'?m|\s+am|'re|\s+are)?{_ADV}\s+(?:live|reside|living|based)\s+(?P<v>.+)")
_MOVED = cue(
    rf"(?:i|we)(?:'ve|\s+have)?{_ADV}\s+(?:(?:packed\s+up|sold\s+up|upped\s+sticks)\s+and\s+)?"
    r"(?:moved|relocated)(?:\s+(?:back|over))?\s+(?P<v>(?:not"
    r"\s+)?(?:from\s+.+?\s+)?to\s+.+)"
)
_DIET = cue(
    r"(?:i'?m|i\s+am|i'?ve\s+been|i\s+have\s+been)(?:\s+(?:now|also|strictly|fully|a))*\s+(?P<v>"
    r"vegetarian|vegan|pescatarian|pescetarian|keto|kosher|halal|plant-based)(?![\w-])(?P<r>.*)"
)
_BIRTHDAY = cue(r"(?:my\s+(?:birthday|bday)(?:\s+is|'s)|i\s+was\s+born)\s+(?:on\s+)?(?P<v>.+)")
# One value per clause: (rule, key, category, pattern, value from the match or None).
_SINGLE: tuple[tuple[str, str, str, re.Pattern[str], Callable[[re.Match[str]], str | None]], ...]
_SINGLE = (
    ("self_name", "name", "profile", _NAME, _name),
    ("call_me", "preferred_name", "profile", _CALL_ME, _call_me),
    ("lives_in", "home_city", "profile", _LIVE, _home),
    ("moved_to", "home_city", "profile", _MOVED, _home),
    ("diet", "diet", "constraint", _DIET, _diet),
    ("birthday", "birthday", "profile", _BIRTHDAY, _date),
)
_WORK = cue(rf"i(?:'m|\s+am|'ve\s+been|\s+have\s+been)?{_ADV}\s+work(?:ing)?\s+(?P<v>.+)")
_WORK_PART = cue(
    r"(?:(?:at|for)\s+(?P<org>.+?)|as\s+(?:an?\s+)?(?P<job>.+?))(?=\s+(?:at|for|as)\s|$)"
)
_NOT_A_JOB = cue(r"\b(?:as|well|much|hard|long|fast|usual|team)\b|(?:^|\s)I\b|[^\w\s/-]")
_ALLERGY = cue(
    r"(?:i'?m|i\s+am)(?:\s+(?:also|actually|very|really|severely|extremely|mildly|deathly|super))*\s+"
    r"allergic\s+to\s+(?P<v>.+)|i\s+have\s+an?\s+(?:severe\s+)?allergy\s+to\s+(?P<w>.+)"
)
_ANIMAL = (
    r"(?:dog|cat|pupp(?:y|ie)|kitten|rabbit|bunn(?:y|ie)|hamster|parrot|bird|horse|fish|turtle"
    r"|tortoise|lizard|snake|ferret|gecko|budgie|retriever|labrador|poodle|beagle|terrier"
    r"|husk(?:y|ie)|corgi|pug|dachshund|spaniel|collie)s?"
)
_PET = cue(
    rf"(?:(?:i|we)(?:'ve|\s+have)?\s+(?:have|got|own)\s+(?:an?|one|two|three|2|3)\s+(?P<a>(?:"
    rf"[a-z-]+\s+){{0,2}}?{_ANIMAL})\s+(?:named|called)|my\s+(?P<b>{_ANIMAL})(?:'s\s+name\s+is"
    rf"|\s+is\s+(?:named|called)))\s+(?P<v>.+)"
)
_FAVORITE = cue(
    r"my\s+(?:all[- ]time\s+)?favou?rite\s+(?P<x>[a-z][a-z ]{1,30}?)\s+(?:is|are|'s)\s+(?P<v>.+)"
)
_FAV_JUNK = cue(r"\b(?:thing|things|part|way|one|bit|moment|feature|line|quote|about|example)\b")
_PREFER = cue(
    r"i(?:\s+(?:really|generally|usually|always|much|definitely|strongly|also|still|now|mostly))*"
    r"\s+(?:(?P<p>prefer)|(?P<d>(?:don'?t|do\s+not)\s+(?:really\s+)?like|hate|dislike|can'?t\s+"
    r"stand|cannot\s+stand|detest|loathe)|like\s+(?P<b>.+?)\s+better(?:\s+than\s+(?P<y>.+))?$)"
    r"\s*(?P<v>.*)"
)


def _rule_work(clause: str) -> list[Capture]:
    """'I work as a nurse at St Mary's' -> job_title then employer; a muddled job voids it all."""
    match = _WORK.fullmatch(clause)
    raw = _replacement(match["v"]) if match else None
    if not raw or not re.match(r"(?:at|for|as)\s", raw, re.I):
        return []
    out: list[Capture | None] = []
    for part in _WORK_PART.finditer(raw):
        if part["org"]:
            org = _proper(part["org"], 5, lower_ok=_lower_ok(clause), org=True, the_ok=True)
            out += [cap("employer", org, "profile", "works_at")] if org else []
        else:
            job = phrase(part["job"], 4)
            ok = job and not _NOT_A_JOB.search(job)  # 'I work as hard as I can'
            out.append(cap("job_title", job, "profile", "works_as") if job and ok else None)
    return [c for c in out if c] if all(out) else []


def _figurative(item: str) -> bool:
    """'allergic to small talk / Excel / running / bad coffee': not an allergen, by the item's
    head noun (a chore, a tool, a day, an abstract noun, a gerund) or an evaluative word."""
    words = item.lower().split()
    head = words[-1]
    return (
        head in FIGURATIVE
        or bool({words[0], head} & (TECH | CALENDAR))
        or words[0] in EVALUATIVE
        or head.endswith(("ity", "ism", "ship", "hood", "ness"))  # not 'medication'
        or (head.endswith("ing") and head not in GERUND_FOODS)
    )


def _rule_allergy(clause: str) -> list[Capture]:
    """'allergic to peanuts, shellfish, and eggs' -> one fact per item, up to a non-item (a
    figure of speech: 'allergic to small talk')."""
    if not (match := _ALLERGY.fullmatch(clause)):
        return []
    out = []
    for raw in re.split(r"\s*,\s*(?:and\s+|or\s+)?|\s+(?:and|or|&)\s+", match["v"] or match["w"]):
        item = phrase(raw, 3) or ""
        if not re.fullmatch(r"[^\W\d_][\w' -]*", item) or item.split()[0].lower() in JUNK:
            break
        if _figurative(item):
            break
        out.append(cap(f"allergy:{slug(item)}", f"allergic to {item}", "constraint", "allergy"))
    return out


def _rule_pet(clause: str) -> list[Capture]:
    """'I have two cats named Salt and Pepper' -> pet:salt, pet:pepper."""
    if not (match := _PET.fullmatch(clause)):
        return []
    animal = re.sub(r"ies$", "y", (match["a"] or match["b"]).lower())
    animal = animal[:-1] if animal.endswith("s") and not animal.endswith("ss") else animal
    out = []
    for raw in re.split(r"\s*,\s*(?:and\s+)?|\s+(?:and|&)\s+", match["v"]):
        if not (name := _proper(raw, 2, lower_ok=_lower_ok(clause))):
            break
        out.append(cap(f"pet:{slug(name)}", f"{animal} named {name}", "profile", "pet"))
    return out


def _rule_favorite(clause: str) -> list[Capture]:
    match = _FAVORITE.fullmatch(clause)
    if not match or len(match["x"].split()) > 3 or _FAV_JUNK.search(match["x"]):
        return []
    value = phrase(match["v"], 5)
    return [cap(f"favorite:{slug(match['x'])}", value, "preference", "favorite")] if value else []


def _rule_prefer(clause: str) -> list[Capture]:
    """'I prefer X (over Y)', 'I like X better than Y', 'I don't like X' -> preference/dislike."""
    if not (match := _PREFER.fullmatch(clause)):
        return []
    raw = match["b"] or match["v"]
    bare = re.sub(r"^to\s+", "", raw, flags=re.I) if match["p"] else raw  # 'prefer to work…'
    value = phrase(bare, 8)  # a dislike 'to …' is a hedge: 'I hate to bother you'
    other = phrase(match["y"], 4) if match["y"] else None
    if not value or FEEDBACK.search(value) or match["y"] and not other:
        return []
    head = re.split(r"\s+(?:over|to|rather than|instead of|than)\s+", value, maxsplit=1)[0]
    kind, verb = ("dislike", "dislikes") if match["d"] else ("preference", "prefers")
    text = f"{verb} {'to ' if bare != raw else ''}{value}" + (f" over {other}" if other else "")
    rule = "dislikes" if match["d"] else "likes_better" if match["b"] else "prefers"
    key = f"{kind}:{slug(re.sub(r'^an? ', '', head, flags=re.I), 4)}"
    return [cap(key, text, "preference", rule)]


def statement(clause: str) -> list[Capture]:
    """The first self-statement rule that fires on `clause`."""
    for rule, key, category, pattern, value_of in _SINGLE:
        if (match := pattern.fullmatch(clause)) and (value := value_of(match)):
            return [cap(key, value, category, rule)]
    for multi in (_rule_work, _rule_allergy, _rule_pet, _rule_favorite, _rule_prefer):
        if found := multi(clause):
            return found
    return []
