"""General update cues: a change said as old-to-new, or as a thing's new value, for any thing.

Part of deterministic fact capture, tried after the change rules (`changes.py`) and the
current-state rules (`updates.py`). Those read one phrasing per kind of thing; these read the
shapes a change takes whatever the thing is, and type the value by its form:

- old value first: "we left Leeds for York", "I swapped my old Yamaha for a Roland piano",
  "we replaced the boiler with a Worcester Bosch", "no more Tesco deliveries, it's Ocado now";
- the new value of a named thing: "my new car is a Skoda", "our energy supplier is now
  Octopus", "my laptop is a ThinkPad now", "Tom's taken over as my line manager";
- a change of a kind of thing, then its value: "switched banks, I'm with Starling now";
- a date that moved, with or without an article: "Graduation got moved to 14 July".

A value is a name (a capitalised word), a date or an amount: "I moved the sofa to the other
wall" names none. The key is the thing's own noun (the old value's, else the new one's), never
the old value itself, so the next change of the same thing supersedes it and the block never
shows the old value first. A sentence about long ago, or a plan not made ("might", "thinking
about"), states no change. Keys are a contract with stored facts.
"""

from __future__ import annotations

import re

from memory.facts.lexicon import (
    BOUNDARY,
    DEPARTMENTS,
    EMPLOYERS,
    JOIN,
    JUNK,
    KIN,
    MOVED_ABOUT,
    ONE_OFF,
    ORG_SUFFIX,
    PRONOUN,
    cue,
    word_set,
)
from memory.facts.statements import _ADV, Capture, cap, not_a_place, slug
from memory.facts.updates import when

# A change said of long ago, or one not made: never a current value ("may" in lower case:
# the month is a date, "moved to 14 May").
NOT_NOW = cue(
    r"\b(?:back\s+in|when\s+i\s+was|years\s+ago|as\s+a\s+(?:kid|child|teenager)|in\s+(?:19|20)\d\d"
    r"|might|(?-i:may)|could|would|should|considering|thinking\s+(?:about|of)|tempted|planning\s+to"
    r"|hoping\s+to|want\s+to|wanna|going\s+to\s+try|one\s+day|someday)\b"
)
_NOT_KEY = (
    PRONOUN
    | ONE_OFF
    | MOVED_ABOUT
    | JUNK
    | word_set(
        "mind minds stories shifts jokes places seats sides notes tables turns clothes password "
        "passcode passphrase pin key token secret login username favourite favorite record "
        "score best pb resolution idea theory obsession crush"
    )
)
# People and animals, not things: 'our new baby is Olivia', 'my ex is now with Steve'.
_BEINGS = word_set(
    "baby babies niece nephew cousin aunt uncle grandma grandad granddad grandmother grandfather "
    "grandson granddaughter girlfriend boyfriend fiance fiancé fiancee fiancée ex colleague "
    "puppy kitten dog cat twins bestie mate pal"
)
_ADJ = word_set("old new current previous usual second-hand secondhand used brand-new first")
_TIME_WORD = word_set("morning afternoon evening night day early late weekday weekend")
_SUBJ = rf"(?:i|we)(?:'ve|\s+have|'d|\s+had)?{_ADV}"
_WORK = cue(r"\b(?:job|work|role|position|company|employer|notice|offer|hired|team|boss)\b")
_HOMEY = cue(r"\b(?:moved|move|home|house|flat|live|living|rent|settled|relocated)\b")
_TRIP = cue(
    r"\b(?:flight|flew|trip|holiday|vacation|weekend|tonight|today|tomorrow|this\s+morning"
    r"|for\s+the\s+day|train|drive|drove)\b"
)


def _unit(word: str) -> str:
    """`word` without its trailing punctuation."""
    return word.rstrip(".,;:!?)\"'")


def _named(word: str) -> bool:
    """A word of a name: capitalised (not 'I'), or with a digit ('Model 3', '£45')."""
    return (word[:1].isupper() and word != "I") or any(ch.isdigit() for ch in word)


def value_of(text: str, nouns: int = 2) -> tuple[str, str] | None:
    """The value `text` opens with and its head noun: 'a Roland digital piano, …' ->
    ('Roland digital piano', 'digital piano'); 'the Kenwood' -> ('Kenwood', ''). A name or an
    amount first, then up to `nouns` lowercase words, then the end of the clause."""
    words = text.split()
    while words and words[0].lower() in {"a", "an", "the", "my", "our"} | _ADJ:
        words = words[1:]
    named: list[str] = []
    head: list[str] = []
    for at, raw in enumerate(words):
        word = _unit(raw)
        if not word or word.lower() in BOUNDARY - {"a", "an", "the"} and not _named(word):
            break
        if named and not head and re.fullmatch(r"[a-z]+ing", word) and _naming(words[at + 1 :]):
            break  # 'a Synology NAS running Docker' ('a Yamaha recording interface' goes on)
        if head or not (_named(word) or (named and word in JOIN | {"&"})):
            if not re.fullmatch(r"[a-z][a-z-]*", word) or len(head) == nouns:
                return None
            head.append(word)
        else:
            named.append(word)
        if word != raw:
            break
    if not named or named[-1] in JOIN | {"&"} or named[-1].endswith("'s") or len(named) > 5:
        return None
    return " ".join(named + head), " ".join(head)


def _naming(words: list[str]) -> bool:
    return bool(words) and (_named(words[0]) or words[0] in ("a", "an", "the", "my", "our"))


def thing_of(text: str) -> str | None:
    """The common noun an old value names its thing by: 'the old boiler' -> 'boiler', 'Tesco
    deliveries' -> 'deliveries', 'BT' -> None."""
    words = [_unit(w) for w in text.split()]
    nouns = [w.lower() for w in words if w and re.fullmatch(r"[a-z][a-z-]*", w)]
    nouns = [w for w in nouns if w not in _ADJ | {"a", "an", "the", "my", "our"}]
    if not nouns or len(nouns) > 3 or not ok_thing(nouns):
        return None
    return " ".join(nouns)


def ok_thing(words: list[str]) -> bool:
    """A thing whose state a user keeps: no pronoun, person, event, journey or furniture."""
    people = KIN | _BEINGS | {w + "s" for w in KIN} | {"neighbours", "neighbors", "friends"}
    return not (words[0] in _NOT_KEY or words[-1] in _NOT_KEY or set(words) & people)


# 'we left Leeds for York', 'I swapped my old Yamaha for a Roland', 'we replaced the boiler
# with a Worcester Bosch', 'I moved from Deloitte to EY', 'we ditched BT for Zen'.
_FOR = cue(
    rf"{_SUBJ}\s+(?P<verb>left|quit|ditched|dropped|swapped|traded|exchanged|replaced|moved"
    r"|switched|changed|jumped|upgraded)\s+(?:(?:from|off)\s+)?(?P<old>.+?)(?:\s+in)?\s+(?P<prep>for|with"
    r"|to|onto)\s+(?P<new>.+)"
)
_PLACE_VERBS = word_set("left moved")
_JOB_VERBS = word_set("left quit moved switched jumped")
_THING_VERBS = word_set(
    "ditched dropped swapped traded exchanged replaced switched changed upgraded"
)


def _rule_for(clause: str, sentence: str) -> list[Capture]:
    if not (match := _FOR.fullmatch(clause)):
        return []
    verb, prep = match["verb"].lower(), match["prep"].lower()
    new = value_of(match["new"])
    old = value_of(match["old"], 0)
    if not new or prep == "with" and verb != "replaced":
        return []  # 'I swapped shifts with Dave': a favour, not a replacement
    value, head = new
    org_like = value.lower() in EMPLOYERS or value.split()[-1].lower() in ORG_SUFFIX
    old_org = old is not None and (
        old[0].lower() in EMPLOYERS or old[0].split()[-1].lower() in ORG_SUFFIX
    )
    we = match.group(0).lower().startswith("we")
    if old and not head and verb in _JOB_VERBS and not we and (org_like or old_org):
        return [cap("employer", value, "profile", "left_for")]
    if old and not head and verb in _PLACE_VERBS and prep in ("for", "to") and not org_like:
        if not not_a_place(value) and not not_a_place(old[0]) and not _TRIP.search(sentence):
            if we or _HOMEY.search(sentence):  # 'I left Leeds for London' alone may be a trip
                return [cap("home_city", value, "profile", "left_for")]
        return []
    thing = thing_of(match["old"]) or (head.lower() if head and ok_thing(head.split()) else None)
    if verb not in _THING_VERBS or prep == "to" or not thing:
        return []
    return [cap(f"current:{slug(thing, 3)}", value, "profile", "replaced_with")]


# 'my new car is a Skoda', 'our energy supplier is now Octopus', 'my laptop is a ThinkPad now'
_IS = cue(
    r"(?:.*?[,;:]\s+)?(?:(?:the|my|our)\s+(?P<new>new\s+)?|(?P<new2>new)\s+)(?P<thing>[a-z][\w-]*"
    r"(?:\s+[a-z][\w-]*){0,2}?)(?:\s+is|'s)\s+(?P<now>now\s+)?(?:(?P<prep>with|through)\s+)?"
    r"(?P<v>.+)"
)


def _rule_is(clause: str) -> list[Capture]:
    if not (match := _IS.fullmatch(clause)):
        return []
    found = value_of(match["v"], 1)
    if not found:
        return []
    value = found[0]
    after = match["v"].split(value.split()[-1], 1)[-1]
    now = match["now"] or re.match(r"\W*\s*(?:now|these\s+days|nowadays)\b", after)
    new = match["new"] or match["new2"]
    thing = match["thing"].lower().split()
    if not (new or now) or not ok_thing(thing) or thing[-1] in _TIME_WORD:
        return []
    if when(match["v"]) and not new or match["prep"] and not now:
        return []  # 'the wedding is now 3 May' is the date rules' (they read dates whole)
    if thing[-1] in _ROLES:  # 'new piano teacher is Mrs Adeyemi': a person in a role
        return _person(" ".join(thing), value, "is_new") if not match["prep"] else []
    return [cap(f"current:{slug(' '.join(thing), 3)}", value, "profile", "is_new")]


# 'Tom's taken over as my line manager', 'Priya replaced Ben as our bassist'
_TAKEN_OVER = re.compile(
    r"(?P<v>(?:(?:Dr|Mr|Mrs|Ms|Prof)\.?\s+)?[A-Z][\w-]+(?:\s+[A-Z][\w-]+)?)(?:'s|\s+has)?\s+"
    r"(?:taken\s+over|took\s+over|is\s+taking\s+over|stepped\s+in|replaced\s+\S+(?:\s+\S+)?"
    r"|took\s+over\s+from\s+\S+(?:\s+\S+)?)\s+as\s+(?:my|our)\s+(?:new\s+)?"
    r"(?P<role>[a-z]+(?:\s+[a-z]+)?)(?P<rest>\W.*)?"
)
# 'I've been assigned a new consultant, Mr Banerjee', 'I'm seeing a different therapist now,
# Dr Hale', 'I've got a new physio, a guy called Sam Reid'
_NEW_PERSON = cue(
    rf"(?:{_SUBJ}\s+(?:(?:been\s+)?(?:assigned|given|got|gotten)|have|found)|(?:i|we)(?:'m|\s+am"
    r"|'re|\s+are)\s+(?:now\s+)?seeing)\s+an?\s+(?:new|different)\s+(?P<role>[a-z]+(?:\s+[a-z]+)??)(?:\s+now)?\s*[,:—-]+\s*"
    r"(?:(?:a|this)\s+(?:guy|woman|man|lady|bloke|chap|girl)\s+)?(?:(?:called|named)\s+)?(?P<v>.+)"
)
_ROLES = word_set(
    "manager boss coach tutor teacher trainer instructor drummer guitarist bassist singer "
    "keyboardist doctor dentist therapist physio physiotherapist neurologist gp consultant "
    "landlord landlady mentor accountant lawyer vet supervisor midwife hairdresser optician "
    "psychiatrist psychologist counsellor counselor dietitian nutritionist teammate captain "
    "carer surgeon cleaner nanny babysitter"
)


def _person(role: str, raw: str, rule: str) -> list[Capture]:
    role = role.lower()
    if role.split()[-1] not in _ROLES:
        return []
    found = value_of(raw, 0)
    if not found or re.search(r"\d", found[0]) or found[0].split()[0].lower() in JUNK:
        return []
    return [cap(f"person:{slug(role, 3)}", found[0], "profile", rule)]


def _rule_person(clause: str) -> list[Capture]:
    if match := _TAKEN_OVER.fullmatch(clause):
        return _person(match["role"], match["v"], "taken_over")
    if match := _NEW_PERSON.fullmatch(clause):
        return _person(match["role"], match["v"], "new_person")
    return []


# 'Graduation got moved to the 14th of July', 'the move-in date slipped to 28 February',
# 'Half marathon's now the 5th of October', 'we've brought the christening forward to 9 March'
_DATE_MOVED = cue(
    r"(?:(?:the|my|our)\s+)?(?P<thing>[a-z][\w-]*(?:\s+[a-z][\w-]*){0,2}?)(?:'s|\s+(?:has|have"
    r"|had|is|was))?(?:\s+been|\s+got|\s+now)*\s+(?:moved|pushed|postponed|rescheduled|shifted"
    r"|changed|delayed|slipped|slid|put\s+back|brought\s+forward)\s+(?:back\s+|forward\s+)?"
    r"(?:to|until|till|for)\s+(?P<v>.+)"
    r"|(?:(?:the|my|our)\s+)?(?P<thing2>[a-z][\w-]*(?:\s+[a-z][\w-]*){0,2}?)(?:'s|\s+is)\s+now\s+"
    r"(?P<v2>.+)"
    rf"|{_SUBJ}?\s*(?:brought|pulled|pushed|moved|put)\s+(?:the|my|our)\s+(?P<thing3>[\w-]+"
    r"(?:\s+[\w-]+)?)\s+(?:forward|back)\s+(?:to|until)\s+(?P<v3>.+)"
)
# 'the wedding's off till spring, new date is 12 April'; 'turns out the party's on the 14th'
_NEW_DATE_AFTER = cue(
    r"(?:the|my|our)\s+(?P<thing>[\w-]+(?:\s+[\w-]+)?)(?:'s|\s+is|\s+has\s+been)\s+(?:off"
    r"|cancelled|canceled|postponed|delayed|moved)\b.*?[,;:]\s*(?:the\s+)?new\s+date\s*(?:is|'s"
    r"|:)\s*(?P<v>.+)"
)
_TURNS_OUT = cue(
    r"(?:it\s+)?turns\s+out\s+(?:that\s+)?(?:the|my|our)\s+(?P<thing>[\w-]+(?:\s+[\w-]+)?)"
    r"(?:'s|\s+is)\s+(?:on\s+|for\s+)?(?P<v>.+?)\s+(?:after\s+all|instead)\b.*"
)


def _rule_date(clause: str) -> list[Capture]:
    match = (
        _DATE_MOVED.fullmatch(clause)
        or _NEW_DATE_AFTER.fullmatch(clause)
        or _TURNS_OUT.fullmatch(clause)
    )
    if not match:
        return []
    groups = match.groupdict()
    thing = next(groups[k] for k in ("thing", "thing2", "thing3") if groups.get(k))
    raw = next(groups[k] for k in ("v", "v2", "v3") if groups.get(k))
    words = thing.lower().split()
    if not ok_thing(words) or words[0] in ("i", "we", "they", "he", "she", "you"):
        return []
    date = when(raw.rstrip(".! "))
    if not date or not re.search(r"[a-z]", date, re.I) and not re.match(r"[£$€]", date):
        return []  # a bare number is no date ('the score is now 3')
    return [cap(f"current:{slug(thing, 4)}", date, "profile", "date_moved")]


# 'Doc halved the prednisolone, so it's 20 mg now'
_DOSE_NOW = cue(
    r".*?\b(?:halved|doubled|raised|increased|upped|lowered|reduced|dropped|cut|changed|adjusted)"
    r"\s+(?:the|my)\s+(?P<drug>[a-z][a-z-]{3,})(?:\s+dose)?\s*[,;]?\s*(?:so\s+)?(?:it'?s|it\s+is)"
    r"\s+(?:now\s+)?(?P<dose>\d+(?:[.,]\d+)?\s?(?:mg|mcg|µg|g|ml|iu|units?))\b.*"
)


def _rule_dose(clause: str) -> list[Capture]:
    if not (match := _DOSE_NOW.fullmatch(clause)):
        return []
    drug = match["drug"].lower()
    if drug in ("dose", "dosage", "meds", "medication", "rent", "budget", "price"):
        return []
    dose = " ".join(match["dose"].split())
    return [cap(f"medication:{slug(drug)}", f"{drug} {dose}", "profile", "dose_now")]


# 'I changed my title to …', 'my title's changed to Principal Engineer'
_TITLE = cue(
    r"(?:my|our)\s+(?:job\s+)?title(?:'s|\s+has|\s+is)?\s+(?:now\s+|(?:been\s+)?changed\s+to\s+)"
    r"(?P<v>.+)"
)
# 'got poached by Atlassian', 'ended up taking the offer from Octopus Energy'
_HIRED_BY = cue(
    rf"(?:{_SUBJ}\s+)?(?:(?:got|been|was)\s+(?:poached|headhunted|hired|snapped\s+up)\s+by"
    r"|(?:ended\s+up\s+|finally\s+)?(?:taking|took|accepted|accepting)\s+(?:the|their|an?)\s+"
    r"(?:job\s+)?offer\s+(?:from|with|at))\s+(?P<v>.+)"
)
# 'these days I drive a Kia Niro', 'I play a Taylor now'
_USE = cue(
    r"(?:these\s+days,?\s+|nowadays,?\s+)?i\s+(?:now\s+)?(?P<verb>drive|ride|play)\s+an?\s+(?P<v>.+)"
)
_USE_KEY = {"drive": "car", "ride": "bike", "play": "instrument"}


def _rule_work_and_use(clause: str) -> list[Capture]:
    if match := _TITLE.fullmatch(clause):
        found = value_of(match["v"], 0)
        return [cap("job_title", found[0], "profile", "title_now")] if found else []
    if match := _HIRED_BY.fullmatch(clause):
        found = value_of(match["v"], 0)
        if not found or not_a_place(found[0]) and found[0].lower() not in EMPLOYERS:
            return (
                []
                if not found or found[0].split()[-1].lower() not in ORG_SUFFIX
                else [cap("employer", found[0], "profile", "hired_by")]
            )
        return [cap("employer", found[0], "profile", "hired_by")]
    if match := _USE.fullmatch(clause):
        now = re.search(r"\b(?:now|these\s+days|nowadays)\b", clause, re.I)
        found = value_of(match["v"], 0)
        key = _USE_KEY[match["verb"].lower()]
        return [cap(f"current:{key}", found[0], "profile", "uses_now")] if found and now else []
    return []


# A class or a shift: 'I've switched to the Thursday evening pottery class'
_GROUP = cue(
    rf"{_SUBJ}\s+(?:switched|moved|changed|transferred)\s+(?:over\s+)?to\s+the\s+(?P<v>(?:[\w-]+"
    r"\s+){0,4}?(?P<noun>class|course|group|set|squad|programme|program|module|stream"
    r"|choir|league|division))\b(?P<rest>.*)"
)


def _rule_group(clause: str) -> list[Capture]:
    if not (match := _GROUP.fullmatch(clause)) or re.match(r"\s*\w", match["rest"]):
        return []
    words = match["v"].split()
    before = words[-2].lower() if len(words) > 1 else ""
    plain = not before or before in _TIME_WORD | DEPARTMENTS or _named(words[-2])
    key = match["noun"].lower() if plain else f"{before}_{match['noun'].lower()}"
    return [cap(f"current:{slug(key, 2)}", f"the {match['v']}", "profile", "switched_group")]


# 'the gym put the membership up to £45', 'they've bumped our rent up to 1,300'
_PUT_UP = cue(
    r".*?\b(?:put|pushed|bumped|hiked|raised|upped|knocked|brought)\s+(?:the|my|our)\s+"
    r"(?P<thing>[a-z][\w-]*(?:\s+[a-z][\w-]*)?)\s+(?:up|down)\s+to\s+(?P<v>[£$€]?\d[\d,.]*)\b.*"
)


def _rule_put_up(clause: str) -> list[Capture]:
    """An amount someone changed for the user: the thing's new amount."""
    if not (match := _PUT_UP.fullmatch(clause)) or not ok_thing(match["thing"].split()):
        return []
    if re.search(r"\b(?:dose|dosage|meds|medication)\b", match["thing"]):
        return []  # a dose is the dose rules'
    return [cap(f"current:{slug(match['thing'], 3)}", match["v"], "profile", "put_up")]


_RULES = (
    _rule_date,
    _rule_is,
    _rule_put_up,
    _rule_person,
    _rule_dose,
    _rule_work_and_use,
    _rule_group,
)


def general(clause: str, sentence: str) -> list[Capture]:
    """The first general update rule that fires on `clause` of `sentence`."""
    if NOT_NOW.search(sentence):
        return []
    if found := _rule_for(clause, sentence):
        return found
    for rule in _RULES:
        if found := rule(clause):
            return found
    return []
