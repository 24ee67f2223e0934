"""Facts that end: a statement that one of the user's facts no longer holds, with no new value.

Part of deterministic fact capture (`memory/facts/capture.py` runs `ended` on each clause): "I
quit my job at St Mary's", "I've retired", "I was made redundant", "my cat died", "we had to put
Rufus down", "we sold the car". Each proposes a `forget` of the key the fact is held under, so
the fact is archived (`memory/facts/rules.py`) and no later block says the user still works
there. Nothing new is set: the statement names what ended, not what replaced it.

Precision first, as for every capture rule: the clause must start with the user ("I", "we",
"my", "our"), the verb must be said as done ("I want to quit", "I almost quit", "if I quit", "my
sister quit her job" match nothing), and it must name what ended: the job ("my job", an employer
by name, a field such as "nursing"), the pet (its name, or its kind when the user has one pet of
that kind), the car ("the car", never a make: "I sold my Honda" may not be the car on file). A
forget that names a value (an employer, a field) archives only a fact holding that value
(`same_job` for a field against the job title), so "I left Berlin" or "I quit smoking" forget
nothing on file.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import replace

from memory.facts.lexicon import PRONOUN, cue
from memory.facts.statements import _ADV, Capture, _proper, cap, slug
from memory.records import Fact

# A pet's kind said without its name ('my cat died'): resolved to the user's one pet of it.
UNNAMED_PET = "pet:unnamed"

# When it happened, after the statement: nothing else may follow what ended.
_WHEN = (
    r"(?:\s*,?\s+(?:last|this|yesterday|today|on|in|at|after|a\s+few|two|three|some|earlier"
    r"|recently|finally|at\s+last|for\s+good|now)\b[^,;]*)?"
)
_I = rf"(?:i|we)(?:'ve|\s+have)?{_ADV}"
_JOB = cue(
    rf"i(?:'ve|\s+have)?{_ADV}\s+(?:(?:quit|left|resigned\s+from|walked\s+out\s+of)\s+(?:(?P<field>[a-z]+ing)|(?!(?:my|the)\s)"
    r"(?P<name>[A-Z].*?))|(?:quit|left|resigned\s+from|walked\s+out\s+of|lost)\s+(?:my|the)\s+(?:job|"
    r"position|role)(?:\s+(?:at|with)\s+(?P<org>.+?))?)"
    rf"{_WHEN}"
)
_RETIRED = cue(
    rf"i(?:'ve|\s+have|'m|\s+am)?{_ADV}\s+(?:retired|taken\s+(?:early\s+)?retirement|took\s+"
    rf"(?:early\s+)?retirement)(?:\s+from\s+(?:my\s+job|(?P<field>[a-z]+ing)|(?P<name>[A-Z].*?)))?"
    rf"{_WHEN}"
)
_LET_GO = cue(
    r"i(?:'ve|\s+have)?(?:\s+just)?\s+(?:been|was|got|'ve\s+been)\s+(?:made\s+redundant|laid\s+off"
    r"|let\s+go|fired|sacked)(?:\s+(?:from|by)\s+(?P<name>[A-Z].*?))?"
    rf"{_WHEN}"
)
# Habits one quits, not a line of work ('I quit smoking' is no field of work).
_NOT_FIELD = frozenset("smoking drinking vaping gambling snacking caffeine dating".split())

_NOT_PET = frozenset("he she it they someone everyone nobody".split())
_KIND = (
    r"(?P<kind>cat|dog|puppy|kitten|rabbit|bunny|hamster|guinea\s+pig|horse|parrot|budgie"
    r"|tortoise|fish)"
)
_DIED = (
    r"(?:died|passed(?:\s+away)?|was\s+put\s+(?:down|to\s+sleep)|had\s+to\s+be\s+put\s+(?:down"
    r"|to\s+sleep)|got\s+run\s+over|was\s+run\s+over)"
)
_PET_DIED = cue(
    rf"(?:(?:my|our)\s+(?:(?:old|poor|lovely|beloved|sweet|dear|little|elderly)\s+)*{_KIND}"
    rf"(?:,?\s+(?P<named>[A-Z][\w'-]+),?)?|(?P<name>[A-Z][\w'-]+))\s+{_DIED}{_WHEN}"
)
_PUT_DOWN = cue(
    rf"(?:i|we)(?:'ve|\s+have)?(?:\s+(?:had|needed)\s+to|\s+just)?\s+(?:put|have\s+put)\s+"
    rf"(?:(?:my|our)\s+(?:(?:old|poor|lovely|beloved|sweet|dear|little|elderly)\s+)*{_KIND}"
    rf"(?:,?\s+(?P<named>[A-Z][\w'-]+),?)?|(?P<name>[A-Z][\w'-]+))\s+(?:down|to\s+sleep){_WHEN}"
)
_CAR = cue(
    rf"(?:{_I}\s+(?:sold|scrapped|got\s+rid\s+of|gave\s+away|wrote\s+off|written\s+off|totall?ed)"
    r"\s+(?:the|my|our)\s+(?:old\s+)?car|(?:my|our|the)\s+(?:old\s+)?car\s+(?:was|got|has\s+been)"
    r"\s+(?:written\s+off|stolen|scrapped|sold|totall?ed))(?:\s+(?:to|for)\b[^,;]*)?"
    rf"{_WHEN}"
)


def ended(clause: str) -> list[Capture]:
    """Forgets of the facts `clause` says have ended; [] when it says no such thing."""
    for rule in (_job_ended, _pet_ended, _car_ended):
        if found := rule(clause):
            return found
    return []


def _job_ended(clause: str) -> list[Capture]:
    """'I quit my job at St Mary's', 'I left nursing', 'I've retired', 'I was made redundant'."""
    match = _JOB.fullmatch(clause) or _RETIRED.fullmatch(clause) or _LET_GO.fullmatch(clause)
    if not match:
        return []
    groups = match.groupdict()
    field, name, org = groups.get("field"), groups.get("name"), groups.get("org")
    if field:
        if field.lower() in _NOT_FIELD:
            return []
        return [cap("job_title", field.lower(), "profile", "job_ended", "forget")]
    employer = _proper(name or org or "", 5, lower_ok=False, org=True, the_ok=True)
    if name and not employer or employer and employer.lower() in PRONOUN:
        return []  # 'I left Berlin in a hurry': not a name alone
    if re.search(r"\s(?:for|to)\s", name or org or ""):
        return []  # 'I left Barclays for Monzo': a change, said by the change rules
    if name and match.re is _JOB:  # 'I left Google': the employer, maybe not the line of work
        return [cap("employer", employer or "", "profile", "job_ended", "forget")]
    return [
        cap("employer", employer or "", "profile", "job_ended", "forget"),
        cap("job_title", "", "profile", "job_ended", "forget"),
    ]


def _pet_ended(clause: str) -> list[Capture]:
    """'my cat died', 'we had to put Rufus down': the pet by name, or by kind (`UNNAMED_PET`)."""
    if not (match := _PET_DIED.fullmatch(clause) or _PUT_DOWN.fullmatch(clause)):
        return []
    name = match["named"] or match["name"]
    if name and (not name[0].isupper() or name.lower() in PRONOUN | _NOT_PET):
        return []
    if name:
        return [cap(f"pet:{slug(name)}", "", "profile", "pet_ended", "forget")]
    kind = re.sub(r"\s+", " ", match["kind"].lower())
    return [cap(UNNAMED_PET, kind, "profile", "pet_ended", "forget")]


def _car_ended(clause: str) -> list[Capture]:
    """'we sold the car', 'my car was written off' -> forget current:car."""
    if not _CAR.fullmatch(clause):
        return []
    return [cap("current:car", "", "profile", "car_ended", "forget")]


def one_pet(capture: Capture, active: Iterable[Fact]) -> Capture | None:
    """`capture` (a forget of `UNNAMED_PET`) keyed to the user's one pet of its kind, or None
    when there is none or more than one ('my cat died' with two cats on file: which?)."""
    kinds = {capture.value, {"puppy": "dog", "kitten": "cat", "bunny": "rabbit"}.get(capture.value)}
    pets = [f for f in active if f.key.startswith("pet:") and f.value.split(" named ")[0] in kinds]
    return replace(capture, key=pets[0].key, value="") if len(pets) == 1 else None


def same_job(held: str, named: str) -> bool:
    """Whether a field of work ('nursing') is the job title on file ('nurse', 'staff nurse'):
    the title's last word and the field share their stem (four letters or more)."""
    title = held.split()[-1] if held.split() else ""
    stem = re.sub(r"(?:ing|er|or|ist|e)$", "", named)
    return len(stem) >= 4 and title.startswith(stem)
