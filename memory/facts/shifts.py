"""Standing-state cue rules: who was hired, the job taken, the home and the premises now.

Part of deterministic fact capture, tried after the current-state rules of
`memory/facts/updates.py`. Questions about the user's own standing attributes ("Where do we
live?", "What do I do for work?", "Where is our office?", "Who runs engineering now?") are
the ones the abstention gate and the cosine floor most often leave without an excerpt: a short
question against a long chatty turn has a low cosine. A fact leads the block whatever the gate
does, so these shapes write the new standing value as one:

- "we hired / brought in a <role> (to replace X), <Name>", "we hired <Name> as our <role>"
  -> person:<role>;
- "I've started / taken a (new) job / role / position as a <job> (at <Org>)" -> job_title
  (and employer);
- "I'm (now) sharing / renting / living in a <home> in <Place>", "we've been in the new
  <home> in <Place>" -> home_city;
- "we took / rented / leased / moved into a (new) office / studio / workshop … in / on
  <Place>" -> current:<premises>;
- "I'll be <job>" with no article ("I'll be executive chef across both sites") -> job_title.

Each reads only the user's own (I / we) statements, a name or a place as the value, and a
trip, a hypothetical or a wish states nothing. Keys are those of the older rules, so a later
change of the same thing supersedes the value and keeps the old one in the fact's history.
"""

from __future__ import annotations

import re

from memory.facts.changes import _JOB_NOUN, _ROLE_NOUN, _job, job_and_employer
from memory.facts.lexicon import KIN, PRONOUN, STAY, cue, word_set
from memory.facts.statements import _ADV, Capture, _place, _proper, cap, slug

_ROLE = rf"(?P<role>(?:[a-z-]+\s+){{0,2}}?(?:{_JOB_NOUN}|{_ROLE_NOUN}))"
_HIRED = cue(
    rf"(?:i|we)(?:'ve|\s+have)?{_ADV}\s+(?:hired|taken\s+on|took\s+on|brought\s+in|recruited"
    rf"|appointed)\s+(?:an?|our|my)\s+(?:new\s+)?{_ROLE}(?:\s+to\s+replace\s+\S+)?,\s+(?P<v>.+)"
)
_HIRED_AS = cue(
    rf"(?:i|we)(?:'ve|\s+have)?{_ADV}\s+(?:hired|taken\s+on|took\s+on|brought\s+in|recruited"
    rf"|appointed)\s+(?P<v>.+?)\s+as\s+(?:an?|our|my|the)\s+(?:new\s+)?{_ROLE}\b.*"
)
_JOB_AS = cue(
    rf"(?:i|we)(?:'ve|\s+have)?{_ADV}\s+(?:started|taken|took|accepted|landed|begun|began|got)\s+"
    r"(?:an?|the|my)\s+(?:new\s+)?(?:job|role|position|post)\s+as\s+(?:an?\s+)?(?P<job>.+?)"
    r"(?:\s+(?:at|with|for)\s+(?P<org>.+?))?(?:[,;.!]\s*.*|\s+(?:in|from|since|this|last|next"
    r"|starting|on)\b.*)?"
)
_HOME = (
    r"(?:flat|house|home|apartment|flatshare|room|bungalow|cottage|condo|townhouse|maisonette"
    r"|terrace|semi|studio)"
)
_HOME_IN = cue(
    rf"(?:i|we)(?:'m|\s+am|'re|\s+are){_ADV}\s+(?:sharing|renting|living\s+in)\s+(?:an?|the|our"
    rf"|my)\s+(?:[\w-]+\s+){{0,2}}?{_HOME}\s+in\s+(?P<v>.+)"
)
_BEEN_IN_NEW = cue(
    rf"(?:i|we)(?:'ve|\s+have){_ADV}\s+been\s+(?:living\s+)?in\s+(?:the|our|my)\s+new\s+"
    rf"(?:[\w-]+\s+)?{_HOME}\s+in\s+(?P<v>.+)"
)
_FOUND_HOME = cue(
    rf"(?:i|we)(?:'ve|\s+have){_ADV}\s+(?:found|rented|taken|got)\s+an?\s+(?:[\w-]+\s+){{0,2}}?"
    rf"{_HOME}(?:\s+in\s+an?\s+(?:[\w-]+\s+){{0,2}}?(?:{_HOME}|share))?\s+(?:in|on)\s+(?P<v>.+)"
)
# 'Since we got the keys to the house in Drumcondra the boys have their own room'
_KEYS_TO = cue(
    rf"(?:(?:since|now\s+that|once|after)\s+)?(?:i|we)(?:'ve|\s+have)?{_ADV}\s+got\s+the\s+keys?"
    rf"\s+(?:to|for)\s+(?:the|our|my|an?)\s+(?:[\w-]+\s+){{0,2}}?{_HOME}\s+(?:in|on)\s+(?P<v>.+)"
)
# 'Prof. Lindqvist has agreed to take me on as main supervisor' (a name, then the role).
_TAKES_ME_ON = cue(
    r"(?:.*?(?:,|\s(?:and|so|but|now))\s+)?(?:then\s+|and\s+|so\s+)?(?P<v>(?-i:[A-Z])[\w.'-]*(?:\s+(?-i:[A-Z])[\w.'-]*){0,2})"
    r"\s+(?:has\s+agreed\s+to\s+take|agreed\s+to\s+take|has\s+taken|took|is\s+taking|will\s+take)"
    rf"\s+me\s+on\s+as\s+(?:my\s+)?(?:new\s+)?{_ROLE}\b.*"
)
_HIRES = (_HIRED, _HIRED_AS, _TAKES_ME_ON)
# 'Dev from the assessment team is our acting manager', 'Mark, our Year 5 teacher, is acting
# deputy until she's back', 'So Lina is going to be head chef at Clifton instead': a name in a
# role it newly holds (acting, interim, new; or said with 'now' or 'instead').
_NAMED_ROLE = cue(
    r"(?:.*?(?:[,;:]|\bso)\s+)?(?P<v>(?-i:[A-Z])[\w'-]+(?:\s+(?-i:[A-Z])[\w'-]+)?)(?:\s+from\s+"
    r"(?:the\s+)?[a-z][\w-]*(?:\s+[a-z][\w-]*){0,2}|,\s+[^,]{3,40},)?\s+(?:is|'s)\s+"
    r"(?P<now>now\s+)?(?:going\s+to\s+be\s+)?(?:(?:our|my|the)\s+)?"
    r"(?:(?P<marker>acting|interim|new|temporary)\s+)?(?!(?:an?|his|her|their)\s)"
    rf"(?P<role>(?:[a-z-]+\s+)??(?:{_JOB_NOUN}|{_ROLE_NOUN}|deputy|head|chair|treasurer"
    r"|secretary|principal|headteacher))(?P<rest>\s+(?:until|at|for|while|from|since|now"
    r"|instead|and|but|so)\b.*|[,;.!].*)?"
)
_NOT_NAME = word_set("the it this that there here he she they we our my so and but what who")
# Where a place name ends and a time or purpose begins: 'in Hockley over the summer'.
_TIME_TAIL = cue(r"\s+(?:over|during|for|since|from|last|this|next|until|by|with)\b")
_PREMISES = r"(?P<what>office|workshop|unit|premises|shop|warehouse|kitchen|clinic|surgery)"
_TOOK_PREMISES = cue(
    rf"(?:i|we)(?:'ve|\s+have)?{_ADV}\s+(?:took|taken|rented|leased|moved\s+into|signed\s+for"
    rf"|got|opened)\s+(?:an?|the|our|my)\s+(?:(?:new|small|smaller|big|bigger|little|proper"
    rf"|tiny)\s+)*{_PREMISES}(?:\s+(?!in\b|on\b)[\w'-]+){{0,5}}?\s+(?:in|on)\s+(?P<v>.+)"
)
_WILL_BE = cue(
    rf"(?P<head>(?:.*?[\s,])?)i(?:'ll|\s+will){_ADV}\s+be\s+(?P<job>(?:[a-z-]+\s+){{0,2}}?{_JOB_NOUN}"
    r"(?:\s+of\s+[a-z]+)?)(?P<rest>\s.*)?"
)
# 'I'll be head chef for the night', 'I'll be lead developer one day': no standing role.
_NOT_STANDING = cue(
    r"^\s*(?:for\s+(?:the|a|one|this|tonight|today)|one\s+day|someday|at\s+some\s+point"
    r"|tonight|today|tomorrow)\b"
)
_HYPOTHETICAL = cue(r"\b(?:if|unless|would|could|might|maybe|hopefully|perhaps)\b")


_HOMES = (_HOME_IN, _BEEN_IN_NEW, _FOUND_HOME, _KEYS_TO)


def _rule_hired(clause: str) -> list[Capture]:
    """'we hired a lead engineer to replace him, Sofia Brandt', 'we hired Ahmed Khan as our
    new accountant', 'Dr Mensah has agreed to take me on as second supervisor' ->
    person:<role> (a hire is a change: the role's holder is new)."""
    match = next((m for p in _HIRES if (m := p.fullmatch(clause))), None)
    if not match:
        return []
    name = _proper(match["v"], 3, lower_ok=False)
    if not name or len(name.split()) > 3:
        return []
    role = re.sub(r"^(?:new|current)\s+", "", match["role"].lower())
    return [cap(f"person:{slug(role, 3)}", name, "profile", "hired")]


def _rule_job_as(clause: str) -> list[Capture]:
    """'I've started a new job as a network engineer at the council', 'I took a position as a
    clinical coordinator' -> job_title, and employer when it is a name."""
    if not (match := _JOB_AS.fullmatch(clause)):
        return []
    job = _job(match["job"])
    if not job or not re.search(rf"\b{_JOB_NOUN}$", job, re.I):
        return []  # 'a job as a kid delivering papers': no job named
    return job_and_employer(job, match["org"], clause, "job_as")


def _rule_home_in(clause: str) -> list[Capture]:
    """'I'm now sharing a flat in Sandviken', 'we've been in the new flat in Leith for three
    weeks' -> home_city (a stay on a trip is none)."""
    match = next((m for p in _HOMES if (m := p.fullmatch(clause))), None)
    if not match or STAY.search(clause):
        return []
    place = _place(match["v"], lower_ok=False)
    return [cap("home_city", place, "profile", "home_in")] if place else []


def _rule_premises(clause: str) -> list[Capture]:
    """'we took a small office above a bike shop on Oldham Street' -> current:office (the last
    place named before the clause ends)."""
    if not (match := _TOOK_PREMISES.fullmatch(clause)) or STAY.search(clause):
        return []
    place = _proper(_TIME_TAIL.split(match["v"])[0], 4, lower_ok=False, org=True, the_ok=True)
    if not place:
        return []
    return [cap(f"current:{match['what'].lower()}", place, "profile", "premises")]


def _rule_will_be(clause: str) -> list[Capture]:
    """'I'll be executive chef across both', 'From April I'll be head of maths' -> job_title
    (no article: 'I'll be a nurse one day' is a wish; a condition or 'for the night' is none)."""
    if not (match := _WILL_BE.fullmatch(clause)):
        return []
    if _HYPOTHETICAL.search(match["head"]) or _NOT_STANDING.search(match["rest"] or ""):
        return []
    job = _job(match["job"])
    return [cap("job_title", job, "profile", "will_be")] if job else []


def named_role(clause: str) -> list[Capture]:
    """'Dev … is our acting manager' -> person:manager = Dev; without 'acting', 'interim' or
    'new', only said with 'now' or 'instead' ('Lina is going to be head chef … instead'), as
    `_rule_new_role` reads 'my coach is Marta now' (a first mention is no change). Also read
    over a whole sentence: a clause split at 'our' cuts 'Mark, our Year 5 teacher, is acting
    deputy' from its name."""
    if not (match := _NAMED_ROLE.fullmatch(clause)) or _HYPOTHETICAL.search(clause):
        return []
    said_now = re.search(r"\b(?:now|instead)\b", re.split(r"[,;.!]", match["rest"] or "")[0])
    if not (match["marker"] or match["now"] or said_now):
        return []
    name = match["v"]
    if name.split()[0].lower() in _NOT_NAME | PRONOUN | KIN:
        return []
    return [cap(f"person:{slug(match['role'], 3)}", name, "profile", "named_role")]


def shift(clause: str) -> list[Capture]:
    """The first standing-state rule that fires on `clause`."""
    rules = (
        _rule_hired,
        _rule_job_as,
        _rule_home_in,
        _rule_premises,
        _rule_will_be,
        named_role,
    )
    for rule in rules:
        if found := rule(clause):
            return found
    return []
