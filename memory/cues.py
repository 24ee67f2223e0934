"""Deterministic fact capture from one user message: cue rules, no LLM.

Part of the remember step: `memory/layer.py` calls it on each newly stored user message and
`memory/facts.py` applies what it returns. It proposes `Capture`s, upserts (`set`) or archivals
(`forget`) keyed so that a newer value supersedes an older one (DMF §4.5: phrase cues,
first-person statements, "not X but Y" replacements), and writes nothing itself. Precision over
recall, as the durable-memory blog's write gate argues: a wrong memory reads as uncanny, a missed
one the user simply repeats. So every rule is anchored at the start of a clause, quotes and code
are removed first, and questions, hypotheticals, reported speech and third-person statements are
skipped rather than guessed at. Keys are a contract with stored facts: changing how a key is
built orphans the facts stored under the old one.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Literal

from memory.cue_words import (
    ABBREV,
    ASK_MEMORY,
    BOUNDARY,
    CLAUSE,
    CLIP,
    CODE_LINE,
    CODEISH,
    COLON_CMD,
    DEICTIC,
    FEEDBACK,
    FROM_NOW,
    JOIN,
    JUNK,
    LEAD,
    MAX_SENTENCE,
    ORG_WORD,
    PHRASE_JUNK,
    POLITE,
    PROCESSING,
    QUESTION,
    QUESTION_TAIL,
    QUOTES,
    REGION,
    REPORTED,
    SENTENCE,
    SPEAKER,
    TAG,
    TAINT,
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


def _ends(rest: str) -> bool:
    """True when `rest`, the text after a value, is empty or opens a new clause."""
    words = rest.split()
    return not words or not words[0][0].isalnum() or words[0].lower().strip(",.") in BOUNDARY


def _is_cap(word: str) -> bool:
    return not word[0].islower() and word != "I" and not word.lower().startswith("i'")


def _lower_ok(text: str) -> bool:
    """A lowercase word is a name only from a user who types in lowercase ('my name is dana')."""
    return not re.search(r"[A-Z]", re.sub(r"\bI(?:'\w+)?\b", "", text))


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
        if not WORD.fullmatch(word) or len(word) < 2 or word.endswith(("ous", "ful", "ble")):
            return None
        words, rest = [word], ([] if word != tokens[0] else tokens[1:])
    if not words or len(words) > max_words or words[0].lower() in JUNK | JOIN:
        return None
    return prefix + " ".join(words) if words[-1] not in JOIN and _ends(" ".join(rest)) else None


def _phrase(text: str, max_words: int) -> str | None:
    """`text` cut at the first punctuation or trailing clause; None if empty, long or deictic."""
    match = CLIP.search(text)
    head = POLITE.sub("", text[: match.start()] if match else text)
    head = re.sub(r"[^\w)'+#]+$", "", head).strip()
    words = head.split()
    if not words or len(words) > max_words or words[0] in PHRASE_JUNK or DEICTIC.search(head):
        return None
    return head


def _slug(text: str, words: int = 6) -> str:
    return "_".join(re.sub(r"[\W_]+", "_", text.lower()).strip("_").split("_")[:words])


def _cap(key: str, value: str, category: str, rule: str, op: Op = "set") -> Capture:
    policy: Policy = "adapt" if category in _ADAPT else "speak"  # the blog's surface policies
    if re.match(r"never (?:mention|bring|talk|discuss)\b", value):
        policy = "avoid"  # a boundary: kept, never surfaced (the blog's 'avoid' policy)
    return Capture(op=op, key=key, value=value, category=category, rule=rule, policy=policy)


def _replacement(value: str) -> str | None:
    """'not in Berlin but in Lisbon' -> 'in Lisbon' (DMF's 'not X but Y'); None for a bare 'not'."""
    if match := re.match(r"not\s+.+?,?\s+(?:but|it'?s|it is)\s+(?:rather\s+)?(.+)$", value, re.I):
        return match[1]
    return None if value.lower().startswith("not ") else value


def _place(raw: str, lower_ok: bool) -> str | None:
    """A city, with its region when one follows a comma ('Portland, Oregon', 'Washington, D.C.')."""
    raw = " ".join(raw.split())
    value = _proper(raw, 4, lower_ok=lower_ok, the_ok=True)
    if value is None or value.split()[-1].lower() in TECH:
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
_NAME = cue(r"(?:my\s+name(?:\s+is|'s)|(?P<bare>name's))(?P<n>\s+not|n't)?\s+(?P<v>.+)")
_CALL_ME = cue(r"(?:(?:you\s+can|please|just)\s+)*(?:call\s+me|i\s+go\s+by)\s+(?P<v>.+)")
_LIVE = cue(rf"(?:i|we)(?:'?m|\s+am|'re|\s+are)?{_ADV}\s+(?:live|reside|living|based)\s+(?P<v>.+)")
_MOVED = cue(
    rf"(?:i|we)(?:'ve|\s+have)?{_ADV}\s+(?:moved|relocated)(?:\s+(?:back|over))?\s+(?P<v>(?:not"
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
    r"(?:i'?m|i\s+am)(?:\s+(?:also|very|really|severely|extremely|mildly|deathly|super))*\s+"
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
            out += [_cap("employer", org, "profile", "works_at")] if org else []
        else:
            job = _phrase(part["job"], 4)
            ok = job and not _NOT_A_JOB.search(job)  # 'I work as hard as I can'
            out.append(_cap("job_title", job, "profile", "works_as") if job and ok else None)
    return [c for c in out if c] if all(out) else []


def _rule_allergy(clause: str) -> list[Capture]:
    """'allergic to peanuts, shellfish, and eggs' -> one fact per item, up to a non-item."""
    if not (match := _ALLERGY.fullmatch(clause)):
        return []
    out = []
    for raw in re.split(r"\s*,\s*(?:and\s+|or\s+)?|\s+(?:and|or|&)\s+", match["v"] or match["w"]):
        item = _phrase(raw, 3) or ""
        if not re.fullmatch(r"[^\W\d_][\w' -]*", item) or item.split()[0].lower() in JUNK:
            break
        out.append(_cap(f"allergy:{_slug(item)}", f"allergic to {item}", "constraint", "allergy"))
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
        out.append(_cap(f"pet:{_slug(name)}", f"{animal} named {name}", "profile", "pet"))
    return out


def _rule_favorite(clause: str) -> list[Capture]:
    match = _FAVORITE.fullmatch(clause)
    if not match or len(match["x"].split()) > 3 or _FAV_JUNK.search(match["x"]):
        return []
    value = _phrase(match["v"], 5)
    return [_cap(f"favorite:{_slug(match['x'])}", value, "preference", "favorite")] if value else []


def _rule_prefer(clause: str) -> list[Capture]:
    """'I prefer X (over Y)', 'I like X better than Y', 'I don't like X' -> preference/dislike."""
    if not (match := _PREFER.fullmatch(clause)):
        return []
    raw = match["b"] or match["v"]
    bare = re.sub(r"^to\s+", "", raw, flags=re.I) if match["p"] else raw  # 'prefer to work…'
    value = _phrase(bare, 8)  # a dislike 'to …' is a hedge: 'I hate to bother you'
    other = _phrase(match["y"], 4) if match["y"] else None
    if not value or FEEDBACK.search(value) or match["y"] and not other:
        return []
    head = re.split(r"\s+(?:over|to|rather than|instead of|than)\s+", value, maxsplit=1)[0]
    kind, verb = ("dislike", "dislikes") if match["d"] else ("preference", "prefers")
    text = f"{verb} {'to ' if bare != raw else ''}{value}" + (f" over {other}" if other else "")
    rule = "dislikes" if match["d"] else "likes_better" if match["b"] else "prefers"
    key = f"{kind}:{_slug(re.sub(r'^an? ', '', head, flags=re.I), 4)}"
    return [_cap(key, text, "preference", rule)]


def _statement(clause: str) -> list[Capture]:
    """The first self-statement rule that fires on `clause`."""
    for rule, key, category, pattern, value_of in _SINGLE:
        if (match := pattern.fullmatch(clause)) and (value := value_of(match)):
            return [_cap(key, value, category, rule)]
    for multi in (_rule_work, _rule_allergy, _rule_pet, _rule_favorite, _rule_prefer):
        if found := multi(clause):
            return found
    return []


_ADAPT = word_set("preference constraint protocol")  # shape the reply silently, never announce
_REMEMBER = cue(
    r"(?:(?P<bare>note)\s+that|(?:please\s+)?(?:remember|keep\s+in\s+mind|make\s+a\s+note|(?:don'?t"
    r"|do\s+not|never)\s+forget|note)\s+that|(?:please\s+(?:remember|note)|(?:don'?t|do\s+not"
    r"|never)\s+forget)(?!\s+(?:to|that|about|it)\b)|(?:can|could|would|will)\s+you\s+(?:please"
    r"\s+)?(?:remember|note|keep\s+in\s+mind)(?:\s+that)?)\s+(?P<x>(?!to\s)\S.*)"
)
_FORGET = cue(
    r"(?:please\s+)?(?:(?:can|could|would)\s+you\s+(?:please\s+)?)?(?:forget|stop\s+remembering"
    r"|(?:don'?t|do\s+not)\s+remember)\s+(?:about\s+)?(?P<that>that\s+)?(?P<x>\S.*)"
)
_FORGET_PAIRS = (
    "my name=name,my nickname=preferred_name,what to call me=preferred_name,where i live="
    "home_city,my city=home_city,my address=home_city,my location=home_city,where i work=employer,"
    "my employer=employer,my company=employer,my job=job_title,my job title=job_title,my role="
    "job_title,what i do=job_title,my birthday=birthday,my date of birth=birthday,my diet=diet"
)
_FORGET_TARGETS = {phrase: key for phrase, key in (p.split("=") for p in _FORGET_PAIRS.split(","))}
_NO_LONGER = cue(
    r"(?P<s>(?:i|we)(?:'?m|\s+am|'re|\s+are)?)\s+(?P<neg>no\s+longer|not|don'?t|do\s+not)\s+"
    r"(?P<r>.+)"
)
_ANYMORE = cue(r"\s*\b(?:anymore|any\s+more|any\s+longer)\b")
_ALWAYS = cue(
    r"(?:please\s+)?(?P<fn>(?:from\s+now\s+on|going\s+forward|moving\s+forward|in\s+(?:the\s+)?"
    r"future)\s+(?:please\s+)?)?(?:(?P<pol>always|never|don'?t\s+ever|do\s+not\s+ever|don'?t|do\s+"
    r"not)\s+)?(?P<v>(?:answer|respond|reply|use|write|include|add|mention|bring|talk|ask|call"
    r"|address|format|give|show|explain|keep|start|end|sign|speak|suggest|recommend|put|assume|cite"
    r"|provide|make|send|check|double-check|spell|refer|wrap|greet|remind|comment|return|output|be"
    r"|swear|apologi[sz]e|tell|summari[sz]e|label|quote|link|list|offer|discuss|round|convert"
    r"|reference|stick|avoid|skip)\b.*)"
)
_NOTE_KINDS = (  # the first that matches; else "protocol"
    ("protocol", cue(r"\b(?:you|your|reply|respond|answer|format|tone)\b")),
    ("open_loop", cue(r"\b(?:tomorrow|tonight|next \w+|deadline|due|appointment|remind)\b")),
    ("open_loop", cue(r"\b(?:need to|have to|(?:mon|tues|wednes|thurs|fri|satur|sun)day)\b")),
    ("episodic_event", cue(r"\b(?:yesterday|last (?:week|night|month|year)|ago)\b")),
    ("project", cue(r"\b(?:project|repo|codebase|app|api|server|db|database|staging|port)\b")),
    ("profile", cue(r"\b(?:i|i'm|my|me|we|our)\b")),
)
_NOTE_VERB = cue(
    r"\b(?:is|are|am|was|were|'m|'re|'s|have|has|had|do|does|don't|doesn't|can|can't|will|won't"
    r"|should|must|need|needs|want|wants|use|uses|live|lives|work|works|like|likes|prefer|go|run"
    r"|runs|get|gets|start|starts)\b|^(?:i|we|my|our)\b"
)
_NOTE_START = word_set("time day night one guy thing when how what where why who to it this that")


def _note(text: str) -> str | None:
    """A free-text note worth keeping: a short statement with a verb, no code, no 'this'."""
    match = CLIP.search(text)
    value = re.sub(r"[\s.!?]+$", "", text[: match.start()] if match else text).strip()
    words = value.split()
    if not 2 <= len(words) <= 25 or words[0].lower() in _NOTE_START:
        return None
    ok = _NOTE_VERB.search(value) and not DEICTIC.search(value) and not CODEISH.search(value)
    return value if ok else None


def _note_capture(note: str, op: Op, rule: str) -> Capture:
    category = next((c for c, rx in _NOTE_KINDS if rx.search(note)), "protocol")
    return _cap(f"note:{_slug(note)}", note, category, rule, op)


def _rule_remember(clause: str) -> list[Capture]:
    """'remember that …': a self-statement keeps its own key; anything else becomes a note."""
    if not (match := _REMEMBER.fullmatch(clause)):
        return []
    if inner := _statement(match["x"]) or _rule_always(match["x"]):
        return [replace(c, rule=f"remember_command:{c.rule}") for c in inner]
    note = None if match["bare"] else _note(match["x"])  # a bare 'note that' is usually prose
    return [_note_capture(note, "set", "remember_command")] if note else []


def _rule_forget(clause: str) -> list[Capture]:
    """'forget …' archives the key the same words would set ('forget my name' -> name)."""
    if not (match := _FORGET.fullmatch(clause)):
        return []
    target = POLITE.sub("", re.sub(r"[\s.!?]+$", "", match["x"]))
    if found := _statement(target):
        return [replace(c, op="forget", rule="forget_command") for c in found]
    if match["that"]:
        note = _note(target)
        return [_note_capture(note, "forget", "forget_command")] if note else []
    key = _FORGET_TARGETS.get(target.lower())
    category = "constraint" if key == "diet" else "profile"
    return [_cap(key, "", category, "forget_command", "forget")] if key else []


def _rule_no_longer(clause: str) -> list[Capture]:
    """'I no longer live in Berlin', 'I'm not vegan anymore' -> forget that key."""
    match = _NO_LONGER.fullmatch(clause)
    if not match or not (match["neg"].lower().startswith("no ") or _ANYMORE.search(clause)):
        return []
    found = _statement(f"{match['s']} {_ANYMORE.sub('', match['r'])}")
    return [replace(c, op="forget", rule="no_longer") for c in found]


def _rule_always(clause: str) -> list[Capture]:
    """'always answer in French', 'from now on, never use emojis': a rule for the assistant."""
    match = _ALWAYS.fullmatch(clause)
    pol = re.sub(r"\s+", " ", (match["pol"] or "").lower()) if match else ""
    if not match or not (match["fn"] or pol in ("always", "never") or pol.endswith("ever")):
        return []
    rest = _phrase(match["v"], 12)
    value = f"{'always' if pol in ('', 'always') else 'never'} {rest}"
    return [_cap(f"constraint:{_slug(value)}", value, "protocol", "always_never")] if rest else []


_CLAUSE_RULES = (_rule_remember, _rule_forget, _rule_no_longer, _rule_always, _statement)


def _clause(clause: str) -> list[Capture]:
    lead = LEAD.match(clause)
    body = re.sub(r"(?<!\b[A-Z])[\s.!]+$", "", clause[lead.end() if lead else 0 :])  # keep 'D.C.'
    for rule in _CLAUSE_RULES:
        if found := rule(body):
            return found
    return []


def _sentence(sentence: str) -> list[Capture]:
    """Captures of one sentence: a question tail is dropped, a tainting word ends the sentence."""
    if len(sentence) > MAX_SENTENCE:
        return []
    body = COLON_CMD.sub(r"\1 that ", TAG.sub("", FROM_NOW.sub(r"\1 ", sentence.strip())))
    lead = LEAD.match(body)
    body = body[lead.end() if lead else 0 :]
    asks = ASK_MEMORY.match(body)
    if body.endswith("?") and not asks:
        tail = QUESTION_TAIL.search(body)
        body = body[: tail.start()] if tail else ""
    if not body or QUESTION.match(body) and not asks or REPORTED.search(body):
        return []
    out: list[Capture] = []
    for n, clause in enumerate(CLAUSE.split(body.rstrip("?"))):
        found = _clause(clause)
        if n and not out and found and found[0].rule == "always_never":
            found = []  # 'In Python, always use …' is advice, not a rule for the assistant
        out += found
        if TAINT.search(clause):
            break
    return out


def _sentences(text: str) -> list[str]:
    parts: list[str] = []
    for piece in SENTENCE.split(text):
        if parts and ABBREV.search(parts[-1]):
            parts[-1] += " " + piece
        elif piece.strip():
            parts.append(piece)
    return parts


def capture_facts(text: str) -> list[Capture]:
    """Facts stated in one user message; [] when none. Conservative: precision over recall.

    Deterministic and in text order, so applying the captures in order lets a later value of a
    key supersede an earlier one. Quoted text, code, blockquotes and transcripts are ignored.
    """
    clean = QUOTES.sub(" ", text).replace("’", "'").replace("`", "")
    lines = clean.splitlines()
    clean = "\n".join(s for s in lines if not CODE_LINE.search(s) and not SPEAKER.match(s))
    if PROCESSING.search(clean):
        return []
    out: list[Capture] = []
    for sentence in _sentences(clean):
        out += [c for c in _sentence(sentence) if c not in out]
    return out
