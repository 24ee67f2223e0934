"""The current-state cue rules: "the new flat is in Hackney", "the wedding is now on …".

Part of deterministic fact capture, tried after the change rules of `memory/facts/changes.py`.
A knowledge update is often said as the new state rather than the change ("we're in Brixton
now", "the launch is now on 4 March", "we switched to Octopus for electricity"), and the turn
that says it often names the old value first ("we left Rye Lane, the new place is in …"), so
only a fact at the top of the block puts the current value before the superseded one. Each
rule fires only on a word that says the state is new or now so ("new", "now", "settled",
"switched", "stepping down"), and keys the value so that the next change of the same thing
supersedes it. Keys are a contract with stored facts: changing how a key is built orphans the
facts stored under the old one.
"""

from __future__ import annotations

import re

from memory.facts.lexicon import JUNK, KIN, ONE_OFF, PRONOUN, STAY, cue, word_set
from memory.facts.statements import _DATE, Capture, _place, _proper, cap, slug

# Words that are not a thing whose state a user keeps: pronouns, people, and one-off events
# or journeys ("the meeting is now on Friday", "the train is now at Platform 4").
_NOT_THING = (
    KIN
    | PRONOUN
    | ONE_OFF
    | word_set(
        "train bus tram flight plane taxi uber parcel package delivery order weather "
        "temperature kettle oven water password passcode pin key token score scores record"
    )
)
_HOME_NOUN = (
    r"(?:flat|house|home|place|apartment|flatshare|room|bungalow|cottage|condo|address|digs"
    r"|townhouse|maisonette|terrace|semi)"
)
_WEEKDAY = r"(?:mon|tues|wednes|thurs|fri|satur|sun)days?\b"
_MONTH_ALONE = (
    r"(?:(?:early|mid|late)\s+|the\s+(?:start|end|middle)\s+of\s+)?(?:january|february|march"
    r"|april|may|june|july|august|september|october|november|december)\b"
)

_NEW_HOME = cue(
    rf"(?:.*?[,;:]\s+)?(?:the|my|our)\s+new\s+{_HOME_NOUN}\s+(?:is|'s)\s+(?:now\s+)?in\s+(?P<v>.+)"
)
_MOVED_INTO = cue(
    r"(?:i|we)(?:'ve|\s+have)?(?:\s+(?:just|finally|now|recently))*\s+moved\s+into\s+"
    rf"(?:an?|the|our|my)\s+(?:[\w-]+\s+){{0,2}}?{_HOME_NOUN}\s+in\s+(?P<v>.+)"
)
_SETTLED = cue(
    r"(?:(?:i|we)(?:'ve|\s+have|'re|\s+are|'m|\s+am)?\s+)?(?:(?:all|finally|now|fully)\s+)*"
    r"settled\s+(?:in|into)\s+(?P<v>.+)"
)
# 'we're in Brixton now', 'I'm now in Cardiff': home only in a sentence about a home (the
# caller checks, as for 'I'm at Lyft now'): 'I'm in Leeds now, the train was late' is a trip.
_IN_NOW = cue(
    r"(?:i|we)(?:'m|\s+am|'re|\s+are)\s+(?:(?:now|finally|properly|over|out|down|up|back)\s+)*"
    r"in\s+(?P<v>.+?)"
    r"(?:\s+now)?(?P<rest>(?:[\s,.!;].*)?)"
)
_NEW_EMPLOYER = cue(
    r"(?:.*?[,;:]\s+)?my\s+new\s+(?:employer|company|firm|workplace|job)\s+(?:is|'s)\s+"
    r"(?:(?:at|with)\s+)?(?P<v>.+)"
)
_NOW_AT = cue(r"i(?:'m|\s+am)\s+now\s+(?:working\s+)?(?:at|with)\s+(?P<v>.+)")
_STEP_DOWN = cue(
    r"i(?:'m|\s+am|'ve|\s+have)?(?:\s+(?:just|finally|officially))*\s+(?P<verb>(?:stepping|stepped"
    r"|step)\s+down|resign(?:ed|ing)|quit(?:ting)?)\s+as\s+(?:the\s+)?(?P<role>[a-z][\w' -]+)"
    r"(?P<rest>[^\w\s].*)?"
)
_IS_NOW = cue(
    r"(?:.*?[,;:]\s+)?(?:the|my|our)\s+(?P<thing>[\w-]+(?:\s+[\w-]+){0,2}?)(?:\s+(?:is|are|has"
    r"\s+been|have\s+been)|'s(?:\s+been)?)\s+now\s+(?:(?:set|booked|scheduled|planned|fixed)\s+(?:for"
    r"|on)\s+|(?P<prep>on|at|in|for)\s+)?(?P<v>.+)"
)
# '… so the submission deadline is March 2027 now': the same, 'now' after the value (a date
# or an amount only), also after 'so', 'and' or 'but'.
_IS_THEN_NOW = cue(
    r"(?:.*?(?:[,;:]|\s(?:so|and|but))\s+)?(?:the|my|our)\s+(?P<thing>[\w-]+(?:\s+[\w-]+){0,2}?)"
    r"(?:\s+(?:is|are)|'s)\s+(?P<v>(?!now\b)(?:[^,;]|,\d)+?)\s+now\b(?:\W.*)?"
)
_SWITCHED_FOR = cue(
    r"(?:i|we)(?:'ve|\s+have)?(?:\s+(?:just|finally|now))*\s+(?:switched|moved|changed|gone)"
    r"\s+(?:over\s+)?to\s+(?P<v>.+?)\s+for\s+(?:(?P<det>our|my|the)\s+)?(?P<thing>[\w-]+(?:\s+[\w-]+)?)"
    r"(?:\s+now)?(?:[,;.!].*)?"
)
_COMES_FROM = cue(
    r"(?:.*?[,;:]\s+)?(?:all\s+)?(?:the|my|our)\s+(?P<thing>[\w-]+(?:\s+[\w-]+)?)\s+(?:all\s+)?"
    r"(?:comes?|is\s+coming|are\s+coming)\s+from\s+(?P<v>.+?)\s+now\b.*"
)
_HOME_IS = cue(r"(?:.*?[,;:]\s+)?home\s+is\s+now\s+(?P<v>.+)")
_RENTING = cue(
    r"(?:i|we)(?:'m|\s+am|'re|\s+are)\s+(?:now\s+)?renting\s+(?:a\s+(?:[\w-]+\s+)?\w+\s+)?in"
    r"\s+(?P<v>.+)"
)
_TOOK_JOB = cue(
    r"i(?:'ve|\s+have)?(?:\s+(?:just|finally|now|officially))*\s+(?:taken|took|accepted|started"
    r"|landed)\s+an?\s+(?:new\s+)?(?:job|position|role|post)\s+(?:at|with)\s+(?P<org>.+)"
)
# 'the wedding has moved to 5 July': intransitive, so only a date is a value ('my sister moved
# to Leeds' is someone's news, not the user's plan).
_THING_MOVED_TO = cue(
    r"(?:.*?[,;:]\s+)?(?:the|my|our)\s+(?P<thing>[\w-]+(?:\s+[\w-]+){0,2}?)(?:\s+has|'s)?\s+"
    r"(?:moved|shifted|changed)\s+(?:to|until)\s+(?P<v>.+)"
)
_REBOOKED = cue(
    r"(?:i|we)(?:'ve|\s+have)?(?:\s+(?:just|now|had\s+to|finally))*\s+(?:rebooked|re-booked"
    r"|rescheduled|moved|pushed|changed)\s+(?:the|my|our)\s+(?P<thing>[\w-]+(?:\s+[\w-]+)?)\s+"
    r"(?:back\s+)?for\s+(?P<v>.+)"
)
_NEW_DATE = cue(
    r"(?:.*?[,;:]\s+)?(?:the\s+)?new\s+(?:date|day|time)\s+for\s+(?:the|my|our)\s+(?P<thing>"
    r"[\w-]+(?:\s+[\w-]+)?)\s*(?::|is|'s)\s*(?P<v>.+)"
)
_WENT_WITH = cue(
    r"(?:i|we)(?:'ve|\s+have)?(?:\s+(?:just|finally|now))*\s+(?:went|gone|decided\s+to\s+go)"
    r"\s+with\s+(?P<v>.+?)\s+for\s+(?:(?P<det>our|my|the)\s+)?(?P<thing>[\w-]+(?:\s+[\w-]+)?)"
    r"(?:\s+now)?(?:[,;.!].*)?"
)
# 'we're going to Lisbon instead (of Porto)': a trip's new destination ('instead' required).
_INSTEAD = cue(
    r"(?:i|we)(?:'m|\s+am|'re|\s+are|'ll|\s+will)\s+(?:now\s+)?(?:going|flying|heading|driving"
    r"|travell?ing|off|sailing|taking\s+the\s+train)\s+to\s+(?P<v>.+?)\s+instead\b.*"
)
# 'the plan is now to rent in Bath', 'our new plan is to …': the plan, in the user's words.
_PLAN = cue(
    r"(?:.*?[,;:]\s+)?(?:the|my|our)\s+(?:(?P<new>new)\s+)?plan\s+(?:(?P<now>now)\s+)?(?:is|'s)"
    r"\s+(?:(?P<now2>now)\s+)?(?P<v>to\s+.+)"
)
# After a bare 'for', a reason or a time, not a service: 'I moved to Deloitte for work'.
_NOT_A_SERVICE = word_set(
    "work good now years months weeks ages fun money health life love it that this me us them "
    "sure real once free starters example instance ever"
)
_VAGUE_PLAN = word_set("it this that them these those today tonight tomorrow")
_ROLE_JUNK = word_set("well soon possible usual always planned expected")


def _home(clause: str, pattern: re.Pattern[str], rule: str) -> list[Capture]:
    if not (match := pattern.fullmatch(clause)):
        return []
    place = _place(match["v"], lower_ok=False)
    return [cap("home_city", place, "profile", rule)] if place else []


def in_place_now(clause: str) -> list[Capture]:
    """'we're in Brixton now', 'I'm now in Cardiff': the home, for a clause of a sentence about
    a home (the caller checks the sentence)."""
    if not (match := _IN_NOW.fullmatch(clause)):
        return []
    if not re.search(r"\bnow\b", clause, re.I):
        return []
    place = _place(match["v"] + match["rest"], lower_ok=False)
    return [cap("home_city", place, "profile", "in_now")] if place else []


def _rule_home_is(clause: str) -> list[Capture]:
    """'home is now Bristol', 'we're renting in Kentish Town now'."""
    if STAY.search(clause):
        return []  # 'we're renting a villa in Crete for the week'
    for pattern, rule in ((_HOME_IS, "home_is_now"), (_RENTING, "renting_in")):
        if found := _home(clause, pattern, rule):
            return found
    return []


def _rule_employer(clause: str) -> list[Capture]:
    """'my new employer is Siemens', 'my new job is at the Royal Free', 'I've taken a job at
    Ocado'."""
    match = _NEW_EMPLOYER.fullmatch(clause) or _TOOK_JOB.fullmatch(clause)
    if not match:
        return []
    raw = match["v"] if match.re is _NEW_EMPLOYER else match["org"]
    org = _proper(raw, 5, lower_ok=False, org=True, the_ok=True)
    return [cap("employer", org, "profile", "new_employer")] if org else []


def now_at(clause: str) -> list[Capture]:
    """'I'm now at Shopify': the employer, for a clause of a sentence about work (the caller
    checks, as for 'I'm at Lyft now')."""
    if not (match := _NOW_AT.fullmatch(clause)):
        return []
    org = _proper(match["v"], 4, lower_ok=False, org=True, the_ok=True)
    return [cap("employer", org, "profile", "now_at")] if org else []


def _rule_step_down(clause: str) -> list[Capture]:
    """'I'm stepping down as head of year', 'I resigned as treasurer': the role is ending,
    said in the user's own words, under a key the role names."""
    if not (match := _STEP_DOWN.fullmatch(clause)):
        return []
    role = re.split(
        r"\s+(?:at|for|in|on|from|because|since|so|and|but|after|before|to|last|this|next|today"
        r"|yesterday|now|effective)\b",
        match["role"],
    )
    words = role[0].split()
    if not 1 <= len(words) <= 5 or words[0].lower() in JUNK | _ROLE_JUNK:
        return []
    role_text = " ".join(words)
    verb = " ".join(match["verb"].lower().split())
    return [cap(f"role:{slug(role_text, 4)}", f"{verb} as {role_text}", "profile", "step_down")]


def when(text: str) -> str | None:
    """A date, a weekday or an amount with a digit at the start of `text`, up to a clause end."""
    head = re.split(
        r"\s*(?:[;!?]|,(?!\d{3}\b))\s*|\.\s|\.$|\s+(?:because|since|so|but|and|as|instead)\s", text
    )[0]
    head = head.strip()
    dated = _DATE.match(head) or re.match(rf"{_WEEKDAY}|{_MONTH_ALONE}", head, re.I)
    if dated or re.match(r"(?:the\s+)?[£$€]?\d", head):
        words = head.split()
        return head if len(words) <= 6 else None
    return None


def _rule_is_now(clause: str) -> list[Capture]:
    """'the wedding is now on the 3rd of October' -> current:wedding; 'our office is now in
    Leeds' -> current:office_place (a place and a date of one thing are two facts); 'the
    deadline is March 2027 now' -> current:deadline (a date or an amount only)."""
    if not (match := _IS_NOW.fullmatch(clause) or _IS_THEN_NOW.fullmatch(clause)):
        return []
    thing = match["thing"].lower()
    words = thing.split()
    if words[0] in _NOT_THING or words[-1] in _NOT_THING or words[-1] in JUNK:
        return []
    value = match["v"].rstrip(".! ")
    date = when(value)
    if match.re is _IS_THEN_NOW:
        return [cap(f"current:{slug(thing, 4)}", date, "profile", "is_now")] if date else []
    if match["prep"] in ("at", "in") and not date:
        place = _proper(value, 4, lower_ok=False, the_ok=True)
        if place and place.split()[-1].lower() not in JUNK:
            return [cap(f"current:{slug(thing, 4)}_place", place, "profile", "is_now")]
        return []
    return [cap(f"current:{slug(thing, 4)}", date, "profile", "is_now")] if date else []


def _rule_new_date(clause: str) -> list[Capture]:
    """'the wedding has moved to 5 July', 'we've rebooked the holiday for August', 'new date for
    the launch: 3 May' -> current:<thing>, a date only."""
    for pattern in (_THING_MOVED_TO, _REBOOKED, _NEW_DATE):
        if not (match := pattern.fullmatch(clause)):
            continue
        thing = match["thing"].lower()
        words = thing.split()
        if words[0] in _NOT_THING or words[-1] in _NOT_THING or words[-1] in JUNK:
            return []
        date = when(match["v"].rstrip(".! "))
        return [cap(f"current:{slug(thing, 4)}", date, "profile", "new_date")] if date else []
    return []


def _rule_switched_for(clause: str) -> list[Capture]:
    """'we switched to Octopus for our electricity', 'we went with Skyline for the kitchen' ->
    current:electricity, current:kitchen."""
    if not (match := _SWITCHED_FOR.fullmatch(clause) or _WENT_WITH.fullmatch(clause)):
        return []
    thing = match["thing"].lower()
    if thing.split()[0] in _NOT_THING or thing.split()[-1] in _NOT_THING:
        return []
    bare_ok = match.re is _WENT_WITH or not re.search(r"\bmoved\b", match[0], re.I)
    if not match["det"] and (" " in thing or thing in _NOT_A_SERVICE or not bare_ok):
        return []  # 'we went with Zen for broadband', not 'we moved to Teams for calls'
    value = _proper(match["v"], 4, lower_ok=False, org=True, the_ok=True)
    return [cap(f"current:{slug(thing, 4)}", value, "profile", "switched_for")] if value else []


def _rule_comes_from(clause: str) -> list[Capture]:
    """'all our flour comes from Shipton Mill now' -> current:flour_source ('now' required:
    'my coffee comes from Kenya' is a description, not a change)."""
    if not (match := _COMES_FROM.fullmatch(clause)):
        return []
    thing = match["thing"].lower()
    if thing.split()[0] in _NOT_THING or thing.split()[-1] in JUNK:
        return []
    value = _proper(match["v"], 4, lower_ok=False, org=True, the_ok=True)
    if not value:
        return []
    return [cap(f"current:{slug(thing, 4)}_source", value, "profile", "comes_from")]


def _rule_new_home(clause: str) -> list[Capture]:
    """'the new flat is in Hackney', 'we've moved into a flat in Leith', 'settled in Galway'."""
    for pattern, rule in (
        (_NEW_HOME, "new_home"),
        (_MOVED_INTO, "moved_into"),
        (_SETTLED, "settled_in"),
    ):
        if found := _home(clause, pattern, rule):
            return found
    return []


def _rule_plan(clause: str) -> list[Capture]:
    """'we're flying to Crete instead' -> current:destination; 'the plan is now to rent in
    Bath for a year' -> current:plan (one plan at a time: the next supersedes it)."""
    if match := _INSTEAD.fullmatch(clause):
        place = _proper(match["v"], 4, lower_ok=False, the_ok=False)
        return [cap("current:destination", place, "profile", "instead")] if place else []
    match = _PLAN.fullmatch(clause)
    if not match or not (match["new"] or match["now"] or match["now2"]):
        return []
    plan = re.split(r"\s*[,;!?]\s*|\.\s|\.$|\s+(?:because|since|but|so)\s", match["v"])[0]
    words = plan.split()
    if not 2 <= len(words) <= 12 or _VAGUE_PLAN & {w.lower().strip(".") for w in words}:
        return []  # 'the new plan is to do it tomorrow': no lasting plan said
    return [cap("current:plan", plan, "profile", "plan_now")]


_RULES = (
    _rule_new_home,
    _rule_home_is,
    _rule_employer,
    _rule_step_down,
    _rule_is_now,
    _rule_new_date,
    _rule_plan,
    _rule_switched_for,
    _rule_comes_from,
)


def update(clause: str) -> list[Capture]:
    """The first current-state rule that fires on `clause`."""
    for rule in _RULES:
        if found := rule(clause):
            return found
    return []
