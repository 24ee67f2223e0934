"""The change cue rules: "I started at …", "we moved the wedding to …", "my new manager is …".

Part of deterministic fact capture (`memory/facts/capture.py` tries these after the
self-statement rules of `memory/facts/statements.py`). Each fires only on words that say
something changed or is now so, and writes the current value under a key a later change of the
same thing reuses, so the older value is superseded in the fact's history (DMF §4.5) and the
block leads with the current one. A first statement of a person in a role ("my manager is
Priya") is deliberately not captured: if the later change were phrased in a way no cue reads,
a stale fact would head every block, which is worse than none. Keys are a contract with stored
facts: changing how a key is built orphans the facts stored under the old one.
"""

from __future__ import annotations

import re

from memory.facts.lexicon import (
    BOUNDARY,
    EMPLOYERS,
    JUNK,
    KIN,
    MOVED_ABOUT,
    NOT_OWNER,
    ONE_OFF,
    PRONOUN,
    cue,
    word_set,
)
from memory.facts.statements import _ADV, Capture, _lower_ok, _proper, cap, slug

# Words that end a value: the start of a new clause or of a detail about it.
_STOP = word_set(
    "and but because cause since so as instead rather starting from until till after before "
    "this next last when while which who where if though although now then too also btw lol "
    "due thanks"
)
_JOB_NOUN = (
    r"(?:engineer|developer|designer|teacher|nurse|doctor|manager|analyst|consultant|scientist"
    r"|researcher|lawyer|accountant|architect|administrator|admin|editor|writer|journalist"
    r"|technician|pharmacist|paramedic|physiotherapist|therapist|chef|cook|lecturer|professor"
    r"|programmer|director|coordinator|officer|specialist|assistant|intern|producer|marketer"
    r"|recruiter|midwife|surgeon|dentist|librarian|electrician|plumber|mechanic|pilot"
    # occupations only, never a hobby said the same way ('a keen baker', 'a careful driver')
    r"|tester|cashier|clerk|waiter|waitress|barista|bartender|receptionist|firefighter"
    r"|paralegal|translator|interpreter|secretary|veterinarian|optometrist|radiographer"
    r"|physician|psychologist|psychiatrist|counsell?or|caregiver|carpenter|welder|attorney"
    r"|auditor|actuary|economist|statistician|sysadmin|salesperson|social\s+worker"
    r"|head\s+of\s+[a-z]+(?:\s+[a-z]+)?|lead|owner|founder|cto|ceo|vp)"
)
_ROLE_NOUN = (
    r"(?:manager|boss|lead|coach|tutor|teacher|trainer|instructor|drummer|guitarist|bassist"
    r"|singer|keyboardist|doctor|dentist|therapist|physio|physiotherapist|neurologist"
    r"|gp|landlord|landlady|mentor|accountant|lawyer|vet|babysitter|nanny|cleaner|supervisor"
    r"|flatmate|roommate|housemate|pt|consultant|midwife|hairdresser|optician|psychiatrist"
    r"|psychologist|counsell?or|dietitian|nutritionist|teammate|captain|carer)"
)
_SECRET = cue(r"\b(?:password|passcode|passphrase|pin|key|token|secret|login|username)\b")

_STARTED = cue(
    rf"i(?:'ve|\s+have)?{_ADV}\s+(?:started\s+(?:a\s+new\s+job\s+)?at|(?P<joined>joined)|got\s+(?:the|a|an"
    r"|that)\s+(?:new\s+)?job\s+(?:offer\s+)?(?:at|with))\s+(?P<org>.+?)(?:\s+(?:this|last|next"
    r"|today|yesterday)\s+\w+)?(?:\s+as\s+(?:an?\s+)?(?P<job>.+))?"
)
_I_AM_A = cue(
    rf"i(?:'m|\s+am){_ADV}\s+(?:now\s+)?an?\s+(?P<job>(?:[\w-]+\s+){{0,3}}?{_JOB_NOUN})"
    r"(?:\s+(?:at|for|with)\s+(?P<org>.+)|\s+(?:in|on|based|working|living|from)\s+.+)?"
    r"(?:\s+now\b.*)?"
)
_MADE = cue(
    rf"i(?:'ve|\s+have|'ve\s+been|\s+have\s+been|\s+was|\s+got|'m|\s+am){_ADV}\s+(?:been\s+)?"
    rf"(?:made|promoted\s+to|appointed(?:\s+as)?|named)\s+(?:the\s+)?(?P<job>(?:[\w-]+\s+){{0,3}}?"
    rf"{_JOB_NOUN}.*)"
)
_NEW_ROLE = cue(
    rf"(?:.*?[,;:]\s+)?(?:my|our)\s+(?P<new>new\s+|current\s+)?(?P<role>(?:[a-z]+\s+){{0,2}}?{_ROLE_NOUN})\s+"
    r"(?:is|'s)\s+(?P<now>now\s+)?(?:(?:called|named)\s+)?(?P<v>.+)"
)
# Someone's or something's own thing, by name: 'Pip's Apoquel went from 16 mg to 8 mg', 'Gran's
# pension went up to 203' (a capitalised name, never a pronoun: 'It's gone from 5 to 10').
_OWNER = r"(?P<owner>(?-i:[A-Z])[a-z]+)'s\s+"
_MOVED_THING = cue(
    rf"(?:i|we|they)(?:'ve|\s+have)?{_ADV}(?:\s+(?:had|have|needed|need)\s+to)?\s+(?:moved?"
    r"|push(?:ed)?|postponed?|rescheduled?|shift(?:ed)?|changed?|switch(?:ed)?|swapped|migrated"
    r"|bumped|delay(?:ed)?|brought\s+forward|bring\s+forward)\s+(?:(?P<det>the|my|our|both|all(?:\s+(?:the|my|our))?)\s+)?"
    r"(?P<thing>[\w-]+(?:\s+[\w-]+){0,2}?)(?:\s+back)?(?:\s+(?P<from>(?:from|off|away\s+from)\s+.+?))?"
    r"(?:\s+(?:to|until|till|onto)|,?\s+(?:it'?s|it\s+is)\s+now)\s+(?P<v>.+)"
)
_THING_MOVED = cue(
    r"(?:the|my|our)\s+(?P<thing>[\w-]+(?:\s+[\w-]+){0,2}?)(?:\s+(?:has\s+been|have\s+been|was|were|got"
    r"|is\s+being|is)|'s\s+been)\s+(?:now\s+)?(?:moved|pushed|postponed|rescheduled|shifted"
    r"|changed|switched|delayed|brought\s+forward)\s+(?:back\s+)?(?:to|until|till|for)\s+(?P<v>.+)"
)
_WENT = cue(
    rf"(?:.*?[,;:]\s+)?(?:(?:the|my|our)\s+|{_OWNER})?(?P<thing>[\w-]+(?:\s+[\w-]+){{0,3}}?)\s+(?:has\s+|have\s+)?"
    r"(?:went|gone|rose|risen|fell|fallen|dropped|climbed|jumped|increased|decreased|grew"
    r"|shrank|is|are)\s+(?:up\s+|down\s+)?from\s+(?P<old>\S+(?:\s+\S+){0,3}?)\s+to\s+(?P<v>.+)"
)
_WENT_TO = cue(
    rf"(?:.*?[,;:]\s+(?:and\s+|so\s+|but\s+)?)?(?:(?:the|my|our)\s+|{_OWNER})(?P<thing>[\w-]+(?:\s+[\w-]+){{0,3}}?)(?:'s|\s+(?:has|have|is|are))?\s+"
    r"(?:going|gone|goes|went|crept|creeping|risen|rose|climbed|jumped|grown|grew|shot|dropped|fallen"
    r"|fell|come|came|is|are|now)\s+(?:now\s+)?(?:up|down)\s+to\s+(?P<v>.+)"
)
_COUNT_TAIL = word_set("left remaining per each total between")
_NUMBER = (
    r"(?:\d[\d,.]*|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty"
    r"|thirty|forty|fifty|a\s+(?:dozen|hundred))"
)
_DOWN_TO = cue(
    rf"(?:i|we)(?:'m|'re|\s+am|\s+are){_ADV}\s+(?:down|up)\s+to\s+(?:just\s+|only\s+|about\s+)?"
    rf"(?P<n>{_NUMBER})\s+(?P<noun>[a-z][\w-]+)(?P<rest>\W.*)?"
)
# 'I'm at Lyft now' (an employer only in a sentence about work: see `employer_now`)
_AT_NOW = cue(rf"i(?:'m|\s+am){_ADV}\s+(?:working\s+)?at\s+(?P<org>.+?)\s+now\b(?P<rest>.*)")
_NEW_JOB = cue(
    rf"i(?:'ve|\s+have)?{_ADV}\s+(?:got|landed|accepted|took)\s+(?:the|that)\s+"
    r"(?P<what>[\w-]+(?:\s+[\w-]+){0,2}?)\s+(?P<noun>job|position|role|post)(?P<rest>\W.*)?"
)
_DOSE = (
    r"\d+(?:[.,]\d+)?\s?(?:mg|mcg|µg|g|ml|iu|units?)\b(?:\s+(?:once|twice|three\s+times)\s+(?:a"
    r"|per)\s+day|\s+daily)?"
)
_DRUG = r"[a-z][a-z-]{3,}"
# A dose changed without naming the drug: the key is resolved to the user's one medication.
UNNAMED_DRUG = "medication:unnamed"
_DOSE_ONLY = cue(
    rf".*?\b(?:raised|increased|upped|lowered|reduced|decreased|doubled|halved|changed|adjusted"
    rf"|bumped|cut|put|moved|pushed|brought)\s+(?:my|the)\s+(?:dose|dosage|meds|medication)\s+"
    rf"(?:(?:up|down)\s+)?to\s+"
    rf"(?P<dose>{_DOSE})(?P<rest>.*)"
)
_OFF = cue(
    rf".*?\b(?:(?:taken|took|came|come|weaned)\s+(?:me\s+)?off|stopped\s+taking)\s+"
    rf"(?:my\s+)?(?P<drug>{_DRUG})\b.*"
)
_NOT_DRUG = word_set(
    "dose dosage medication medicine meds pill pills tablet tablets prescription intake "
    "caffeine coffee sugar salt water protein budget rent weight limit"
)
# A 'dose' that is no medication's ('the dose of patience went up to 11', 'my daily dose of
# news'): never a value of its own; a medication's dose is the dose rules'.
_FIGURATIVE_DOSE = cue(r"\b(?:dose|doses|dosage)\b")
_DOSE_CHANGED = cue(  # also advised: 'The GP suggested I drop the melatonin to 1 mg'
    rf".*?\b(?:(?:raised|increased|upped|lowered|reduced|decreased|dropped|doubled|halved|changed"
    rf"|adjusted|bumped|cut|moved)\s+my|(?:suggested|advised|recommended)\s+(?:that\s+)?i\s+"
    rf"(?:raise|increase|up|lower|reduce|decrease|drop|cut|halve|double)\s+(?:my|the))\s+"
    rf"(?P<drug>{_DRUG})(?:\s+dose)?\s+(?:up\s+|down\s+)?to\s+(?P<dose>{_DOSE}).*"
)
_PUT_ON = cue(
    rf".*?\b(?:put|started|switched|moved|has|have|keeps|kept)\s+me\s+(?:from\s+\S+\s+)?(?:on|onto|to)\s+(?:(?P<d1>"
    rf"{_DOSE})\s+of\s+(?P<drug1>{_DRUG})|(?P<drug2>{_DRUG})\s+(?P<d2>{_DOSE}))(?P<rest>.*)"
)
_MY_DOSE = cue(
    rf"(?:my\s+(?P<drug1>{_DRUG})(?:'s|\s+dose\s+is|\s+is)(?:\s+now(?=\s)|(?=\s+\d.*\bnow\b))|i(?:'m|\s+am|'ve\s+been|\s+have\s+been)"
    rf"{_ADV}\s+(?:on|taking)\s+(?:(?P<d2>{_DOSE})\s+of\s+(?P<drug2>{_DRUG})|(?P<drug3>{_DRUG})"
    rf"(?:\s+now)?,?\s+(?P<d3>{_DOSE})))"
    rf"(?:\s+(?P<d1>{_DOSE}))?(?P<rest>.*)"
)


def _value(text: str, max_words: int = 8) -> str | None:
    """`text` up to the first punctuation or clause word: 'the Riverside Park pavilion'."""
    words: list[str] = []
    for raw in text.split():
        word = raw.rstrip(".,;:!?)")
        if raw[:1] in "(\"'" or word.lower() in _STOP:
            break
        words.append(word)
        if word != raw or len(words) > max_words:
            break
    if not words or len(words) > max_words or words[0].lower() in JUNK - {"the", "a", "an"}:
        return None
    return " ".join(words)


# A judgement or a hobby before the noun, not a job title: 'a terrible cook', 'a beta tester'.
_EVALUATIVE = word_set(
    "terrible awful bad good great decent keen amateur beta avid hopeless lousy excellent "
    "mediocre wannabe aspiring budding natural born reluctant casual occasional home hobby "
    "weekend armchair backseat"
)


def _job(text: str) -> str | None:
    job = _value(text, 5)
    if job is None or re.search(r"[^\w\s-]", job):
        return None
    if re.sub(r"^(?:an?|the)\s+", "", job, flags=re.I).split()[0].lower() in _EVALUATIVE:
        return None
    return re.sub(r"^(?:an?|the)\s+", "", job, flags=re.I)


def _rule_started(clause: str, about_work: bool = False) -> list[Capture]:
    """'I started at Spotify this week as a staff engineer', 'I got the job at Kaiser'.

    'Joined' names an employer only with a job ('as a nurse'), a well-known employer, or in a
    sentence about work (`joined_at_work`): 'I joined Strava / the Ramblers' is a club or an app.
    """
    if not (match := _STARTED.fullmatch(clause)):
        return []
    org = _proper(match["org"], 5, lower_ok=_lower_ok(clause), org=True, the_ok=True)
    if not org:
        return []
    if match["joined"] and not (match["job"] or about_work or org.lower() in EMPLOYERS):
        return []
    out = [cap("employer", org, "profile", "started_at")]
    job = _job(re.split(r"\s+(?:in|on|at|for|with)\s+", match["job"])[0]) if match["job"] else None
    return out + ([cap("job_title", job, "profile", "started_at")] if job else [])


def i_am_a(clause: str) -> list[Capture]:
    """'I'm a backend engineer at Zalando' -> job_title, and employer when it is a name."""
    if not (match := _I_AM_A.fullmatch(clause)) or not (job := _job(match["job"])):
        return []
    if _for_kin(match["org"]):
        return []  # 'a caregiver for my mum': no job, and the user's own job stays
    return job_and_employer(job, match["org"], clause, "i_am_a")


def _for_kin(org: str | None) -> bool:
    """Whether `org` is one's family ('my mum', 'my elderly dad'; not 'my dad's firm')."""
    words = [w.lower() for w in re.findall(r"[\w'’-]+", org or "")[:4]]
    family = KIN - {"boss"}  # an assistant for my boss has a job
    return bool(words) and words[0] in ("my", "our") and any(w in family for w in words[1:])


def job_and_employer(job: str, org: str | None, clause: str, rule: str) -> list[Capture]:
    """The job title, and the employer `org` names when it is a name (`clause` says whether a
    lower-case name may be one)."""
    out = [cap("job_title", job, "profile", rule)]
    if org:
        employer = _proper(org, 5, lower_ok=_lower_ok(clause), org=True, the_ok=True)
        out += [cap("employer", employer, "profile", rule)] if employer else []
    return out


def _rule_made(clause: str) -> list[Capture]:
    """'I've been made head of science', 'I was promoted to senior engineer'."""
    if not (match := _MADE.fullmatch(clause)) or not (job := _job(match["job"])):
        return []
    return [cap("job_title", job, "profile", "promoted")]


def _rule_new_role(clause: str) -> list[Capture]:
    """'my new manager is called Tomás', 'our drummer is now Ana' (a change, never a first
    mention: see the module docstring)."""
    match = _NEW_ROLE.fullmatch(clause)
    later = re.sub(r"^(?:[A-Z][\w'-]*\.?\s+){1,3}", "", match["v"]) if match else ""
    if not match or not (match["new"] or match["now"] or re.match(r"now\b", later)):
        return []  # 'my coach is Marta now' is a change, 'my coach is Marta' a first mention
    name = _proper(match["v"], 3, lower_ok=False)
    if not name:
        return []
    role = re.sub(r"^(?:new|current)\s+", "", match["role"].lower())
    return [cap(f"person:{slug(role, 3)}", name, "profile", "new_role")]


def _rule_moved_thing(clause: str) -> list[Capture]:
    """'we moved the wedding to 21 September', 'we switched internet provider to Zen'."""
    match = _MOVED_THING.fullmatch(clause) or _THING_MOVED.fullmatch(clause)
    if not match:
        return []
    thing = match["thing"].lower()
    bare = match.re is _MOVED_THING and not match["det"]
    if thing.split()[0] in PRONOUN or _one_off(thing) or _SECRET.search(thing):
        return []
    if thing in ("me", "us", "back", "over", "out", "in") or thing.split()[-1] in KIN:
        return []
    if bare and not match["from"] and not re.search(r"\b(?:provider|hosting|host)\b", thing):
        return []  # 'we moved to Lisbon', 'I switched to decaf': no thing named
    value = _value(
        re.sub(
            r"\s+(?:instead(?:\s+of\b)?|for\s+(?:the|our|my|a)\b).*$", "", match["v"].rstrip(".!")
        )
    )
    if not value or _SECRET.search(value) or not re.search(r"[A-Z\d]", value):
        return []  # 'I moved the sofa to the other wall': a name, a date or an amount only
    return [cap(f"current:{slug(thing, 4)}", value, "profile", "moved_thing")]


def _rule_went(clause: str) -> list[Capture]:
    """'the ID step drop-off went from 38% to 21%', 'my rent went up from 900 to 1,050': an
    amount that changed (a digit in the old or new value; 'the kids went from school to the
    park' is a trip, not a change)."""
    if not (match := _WENT.fullmatch(clause)):
        return []
    if not re.search(r"\d", match["old"] + " " + match["v"].split()[0]):
        return []
    thing = match["thing"].lower()
    if thing.split()[0] in PRONOUN | _PERSON or _SECRET.search(thing) or _one_off(thing):
        return []
    if match["owner"]:
        return _owned(match["owner"], thing, match["v"], "went_from")
    if (dose := re.match(_DOSE, match["v"], re.I)) and re.fullmatch(_DRUG, thing):
        return _dose_capture(thing, dose[0], "went_from")  # 'ramipril went from 5 mg to 10 mg'
    value = _value(match["v"].rstrip(".!"), 4)
    if not value or _SECRET.search(value) or _FIGURATIVE_DOSE.search(thing):
        return []
    return [cap(f"current:{slug(thing, 4)}", value, "profile", "went_from")]


def _owned(owner: str, thing: str, raw: str, rule: str) -> list[Capture]:
    """'Pip's Apoquel went from 16 mg to 8 mg a day' -> current:pip_s_apoquel = '8 mg a day':
    the owner stays in the key (the dog's dose is not the user's medication), and a pronoun
    ('It's', 'That's') or a figurative dose owns nothing."""
    if owner.lower() in PRONOUN | NOT_OWNER or _FIGURATIVE_DOSE.search(thing):
        return []
    value = _value(raw.rstrip(".!"), 5)
    if not value or _SECRET.search(value):
        return []
    key = "current:" + slug(f"{owner}'s {thing}", 5)
    return [cap(key, value, "profile", rule)]


# A subject, not a thing: 'I went from 5 to 10 laps' ('the' is optional before a thing).
_PERSON = word_set("i we you he she they someone everyone everybody nobody")


def _one_off(thing: str) -> bool:
    """A conversation event, a journey, a parcel or furniture: moved about, never a state."""
    last = thing.split()[-1]  # also plural: 'we moved both meetings to Friday'
    return (
        last in ONE_OFF | MOVED_ABOUT or last.endswith("s") and last[:-1] in ONE_OFF | MOVED_ABOUT
    )


def _rule_went_to(clause: str) -> list[Capture]:
    """'the guest list has crept up to 110', 'our rent is going up to 1,200': an amount that
    changed, the new value alone (a digit in it: 'the decision is up to you' is no amount)."""
    if not (match := _WENT_TO.fullmatch(clause)) or not re.match(r"\S*\d", match["v"]):
        return []
    thing = match["thing"].lower()
    if thing.split()[0] in PRONOUN or _SECRET.search(thing) or _one_off(thing):
        return []
    if match["owner"]:
        return _owned(match["owner"], thing, match["v"], "went_to")
    dose = re.match(_DOSE, match["v"], re.I)
    drug = re.sub(r"\s+(?:dose|dosage)$|^(?:daily\s+)?(?:dose|dosage)\s+of\s+", "", thing)
    if dose and drug in ("dose", "dosage", "meds", "medication"):  # 'my dose went up to 75 mg'
        return [cap(UNNAMED_DRUG, " ".join(dose[0].split()), "profile", "went_to")]
    if dose and re.fullmatch(_DRUG, drug):  # 'my metformin went up to 1000 mg'
        return _dose_capture(drug, dose[0], "went_to") if drug not in _NOT_DRUG else []
    if _FIGURATIVE_DOSE.search(thing):
        return []
    value = _value(match["v"].rstrip(".!"), 4)
    return [cap(f"current:{slug(thing, 4)}", value, "profile", "went_to")] if value else []


def _rule_down_to(clause: str) -> list[Capture]:
    """'I'm down to nine students now', 'we're up to 12 staff': a count of something the user
    has, keyed by the thing counted."""
    if not (match := _DOWN_TO.fullmatch(clause)):
        return []
    noun = match["noun"].lower()
    if noun in PRONOUN or noun in JUNK or _SECRET.search(noun):
        return []
    goes_on = re.match(r"\s+([a-z][\w-]*)", match["rest"] or "")
    if goes_on and goes_on[1] not in _STOP | BOUNDARY | _COUNT_TAIL:
        return []  # 'down to two brain cells': the noun goes on, and what is counted is unclear
    value = f"{' '.join(match['n'].split())} {match['noun']}"
    return [cap(f"current:{slug(noun, 2)}", value, "profile", "down_to")]


def joined_at_work(clause: str) -> list[Capture]:
    """'I joined Monzo last month', for a clause of a sentence about work (the caller checks)."""
    return _rule_started(clause, about_work=True)


def employer_now(clause: str) -> list[Capture]:
    """'I'm at Lyft now': the employer, for a clause of a sentence about work (the caller
    checks: 'I'm at Heathrow now' alone is a place, not a job)."""
    if not (match := _AT_NOW.fullmatch(clause)):
        return []
    org = _proper(match["org"], 4, lower_ok=False, org=True, the_ok=False)
    return [cap("employer", org, "profile", "at_now")] if org else []


def _rule_new_job(clause: str) -> list[Capture]:
    """'I got the outpatient job!', 'I accepted the Berlin position' (no employer named:
    'I got the job at Kaiser' is `_rule_started`'s)."""
    if not (match := _NEW_JOB.fullmatch(clause)):
        return []
    what = match["what"].lower()
    if what.split()[0] in PRONOUN | {"new", "same", "old", "first", "other", "next"}:
        return []
    if match["rest"] and re.match(r"\W*\s*(?:at|with|in|for)\b", match["rest"]):
        return []
    return [cap("job_title", f"{match['what']} {match['noun']}", "profile", "new_job")]


def _dose_capture(drug: str, dose: str, rule: str) -> list[Capture]:
    drug = drug.lower()
    if drug in _NOT_DRUG:
        return []
    return [cap(f"medication:{slug(drug)}", f"{drug} {' '.join(dose.split())}", "profile", rule)]


def _rule_dose(clause: str) -> list[Capture]:
    """'the doctor raised my lisinopril to 20 mg', 'she switched me to topiramate 25 mg',
    'my sertraline dose is now 100 mg', 'the GP suggested I drop the melatonin to 1 mg'."""
    if (match := _DOSE_CHANGED.fullmatch(clause)) and match["drug"].lower() not in _NOT_DRUG:
        return _dose_capture(match["drug"], match["dose"], "dose_changed")
    if match := _PUT_ON.fullmatch(clause):
        drug, dose = match["drug1"] or match["drug2"], match["d1"] or match["d2"]
        return _dose_capture(drug, dose, "put_on")
    if (match := _MY_DOSE.fullmatch(clause)) and (match["d1"] or match["d2"] or match["d3"]):
        drug = match["drug1"] or match["drug2"] or match["drug3"]
        return _dose_capture(drug, match["d1"] or match["d2"] or match["d3"], "dose_now")
    if match := _DOSE_ONLY.fullmatch(clause):
        dose = " ".join(match["dose"].split())
        return [cap(UNNAMED_DRUG, dose, "profile", "dose_only")]
    if (match := _OFF.fullmatch(clause)) and match["drug"].lower() not in _NOT_DRUG:
        return [cap(f"medication:{slug(match['drug'])}", "", "profile", "taken_off", "forget")]
    return []


def change(clause: str) -> list[Capture]:
    """The first change rule that fires on `clause`."""
    rules = (
        _rule_started,
        _rule_made,
        _rule_new_job,
        i_am_a,
        _rule_new_role,
        _rule_moved_thing,
        _rule_went,
        _rule_went_to,
        _rule_down_to,
    )
    for rule in rules:
        if found := rule(clause):
            return found
    return _rule_dose(clause)
