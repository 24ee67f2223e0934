"""Deterministic fact capture from one user message: cue rules, no LLM.

Part of the remember step: `memory/layer.py` calls it on each newly stored user message and
`memory/facts/rules.py` applies what it returns. It proposes `Capture`s, upserts (`set`) or
archivals (`forget`) keyed so that a newer value supersedes an older one (DMF §4.5: phrase cues,
first-person statements, "not X but Y" replacements), and writes nothing itself. Precision over
recall, as the durable-memory blog's write gate argues: a wrong memory reads as uncanny, a missed
one the user simply repeats. So every rule is anchored at the start of a clause, quotes and code
are removed first, and questions, hypotheticals, reported speech and third-person statements are
skipped rather than guessed at. Keys are a contract with stored facts: changing how a key is
built orphans the facts stored under the old one.

This module splits a message into sentences and clauses and holds the command rules
("remember that …", "forget …", "I no longer …", "always/never …"); the self-statement rules
("my name is …", "I live in …") are in `memory/facts/statements.py`.
"""

from __future__ import annotations

import re
from dataclasses import replace

from memory.facts.cars import car_now
from memory.facts.changes import change, employer_now, i_am_a, joined_at_work
from memory.facts.corrections import correction
from memory.facts.endings import ended
from memory.facts.general import general
from memory.facts.lexicon import (
    ABBREV,
    ASK_MEMORY,
    CLAUSE,
    CLIP,
    CODE_LINE,
    CODEISH,
    COLON_CMD,
    DEICTIC,
    ELIDED_AND,
    FROM_NOW,
    LEAD,
    MAX_SENTENCE,
    POLITE,
    PROCESSING,
    QUESTION,
    QUESTION_TAIL,
    QUOTES,
    RETRACTED,
    SENTENCE,
    SPEAKER,
    TAG,
    TAINT,
    cue,
    holds_credential,
    own_words,
    word_set,
)
from memory.facts.replaced import replaced_plan
from memory.facts.shifts import named_role, shift
from memory.facts.spans import AND_CHANGE, DROPPED_AND, NO_SUBJECT, sentence_change
from memory.facts.statements import Capture, Op, cap, phrase, slug, statement
from memory.facts.updates import in_place_now, now_at, update

__all__ = ["Capture", "capture_facts"]


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
# 'I've had to give up being vegan', 'I stopped being vegetarian': the state is over.
_GAVE_UP = cue(
    r"(?P<s>i|we)(?:'ve|\s+have)?(?:\s+(?:had|decided|needed)\s+to)?\s+(?:give|gave|given|giving"
    r"|stop|stopped|quit)\s+(?:up\s+)?being\s+(?P<r>.+)"
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
# What capture reads of a message: facts are told in a few sentences, and beyond this is a
# pasted document. Each sentence goes through every rule (~0.1 ms), so 200 kB of one-letter
# lines held the writer 12 s, and a 32 MB body (`server.max_body_bytes`) most of an hour.
MAX_CAPTURED_CHARS = 8_000
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
    return cap(f"note:{slug(note)}", note, category, rule, op)


def _rule_remember(clause: str) -> list[Capture]:
    """'remember that …': a self-statement keeps its own key; anything else becomes a note."""
    if not (match := _REMEMBER.fullmatch(clause)):
        return []
    if inner := statement(match["x"]) or _rule_always(match["x"]):
        return [replace(c, rule=f"remember_command:{c.rule}") for c in inner]
    note = None if match["bare"] else _note(match["x"])  # a bare 'note that' is usually prose
    return [_note_capture(note, "set", "remember_command")] if note else []


def _rule_forget(clause: str) -> list[Capture]:
    """'forget …' archives the key the same words would set ('forget my name' -> name)."""
    if not (match := _FORGET.fullmatch(clause)):
        return []
    target = POLITE.sub("", re.sub(r"[\s.!?]+$", "", match["x"]))
    if found := statement(target):
        return [replace(c, op="forget", rule="forget_command") for c in found]
    if match["that"]:
        note = _note(target)
        return [_note_capture(note, "forget", "forget_command")] if note else []
    key = _FORGET_TARGETS.get(target.lower())
    category = "constraint" if key == "diet" else "profile"
    return [cap(key, "", category, "forget_command", "forget")] if key else []


def _rule_no_longer(clause: str) -> list[Capture]:
    """'I no longer live in Berlin', 'I'm not vegan anymore', 'I'm no longer a nurse' ->
    forget the key (or keys: a job and its employer) the same words unnegated would set."""
    match = _NO_LONGER.fullmatch(clause)
    if not match or not (match["neg"].lower().startswith("no ") or _ANYMORE.search(clause)):
        return []
    said = f"{match['s']} {_ANYMORE.sub('', match['r'])}"
    found = statement(said) or i_am_a(said)
    return [replace(c, op="forget", rule="no_longer") for c in found]


def _rule_gave_up(clause: str) -> list[Capture]:
    """'I've had to give up being vegan' -> forget the diet (as 'I'm no longer vegan')."""
    if not (match := _GAVE_UP.fullmatch(clause)):
        return []
    being = "I'm" if match["s"].lower() == "i" else "we're"
    return [replace(c, op="forget", rule="gave_up") for c in statement(f"{being} {match['r']}")]


def _rule_always(clause: str) -> list[Capture]:
    """'always answer in French', 'from now on, never use emojis': a rule for the assistant."""
    match = _ALWAYS.fullmatch(clause)
    pol = re.sub(r"\s+", " ", (match["pol"] or "").lower()) if match else ""
    if not match or not (match["fn"] or pol in ("always", "never") or pol.endswith("ever")):
        return []
    rest = phrase(match["v"], 12)
    value = f"{'always' if pol in ('', 'always') else 'never'} {rest}"
    return [cap(f"constraint:{slug(value)}", value, "protocol", "always_never")] if rest else []


def _employer_now(clause: str, work_words: int) -> list[Capture]:
    """'I'm at Lyft now', 'I'm now at Shopify', and 'I joined Monzo' when another word than
    'joined' says the sentence is about work ('I joined Strava to track my runs' is not)."""
    lead = LEAD.match(clause)
    body = re.sub(r"[\s.!]+$", "", clause[lead.end() if lead else 0 :])
    found = employer_now(body) or now_at(body)
    return found or (joined_at_work(body) if work_words > 1 else [])


def _home_now(clause: str) -> list[Capture]:
    lead = LEAD.match(clause)
    return in_place_now(re.sub(r"(?<!\b[A-Z])[\s.!]+$", "", clause[lead.end() if lead else 0 :]))


# A sentence about a job: 'I'm at Lyft now' in it names an employer, not where the user stands.
_WORK_WORDS = cue(
    r"\b(?:work(?:ed|ing)?|job|jobs|left|quit|joined|started|hired|team|company|role|position"
    r"|employer|colleagues?|manager|boss|offer|onboarding|office|no\s+longer\s+(?:at|with))\b"
)
# ... unless it says the user is looking for work or travelling: 'I'm at Starbucks now, the
# job hunt goes on', 'I'm at Heathrow now, my flight to the new job leaves soon'.
_NOT_AT_WORK = cue(
    r"\b(?:flight|flights|flying|boarding|airport|gate|layover|train|station|holiday|vacation"
    r"|trip|job[- ]?(?:hunt|hunting|search|searching|seeking|less)|between\s+jobs|unemployed"
    r"|out\s+of\s+work|looking\s+for\s+(?:a\s+)?(?:new\s+)?(?:job|work))\b"
)
# A sentence about a home: 'we're in Brixton now' in it names where the user lives.
_HOME_WORDS = cue(
    r"\b(?:moved|move|moving|relocated|flat|house|home|apartment|rent|lease|landlord|live|living"
    r"|settled|neighbou?rs?)\b"
)

_CLAUSE_RULES = (
    _rule_remember,
    _rule_forget,
    _rule_no_longer,
    _rule_gave_up,
    _rule_always,
    statement,
    change,
    update,
    shift,
    ended,
)


def _clause(clause: str) -> list[Capture]:
    lead = LEAD.match(clause)
    body = re.sub(r"(?<!\b[A-Z])[\s.!]+$", "", clause[lead.end() if lead else 0 :])  # keep 'D.C.'
    for rule in _CLAUSE_RULES:
        if found := rule(body):
            return found
    return []


def _general(clause: str, sentence: str) -> list[Capture]:
    """The general update rules (`memory/facts/general.py`) on `clause`, also when it has
    dropped its 'I' ('Moved our hosting off AWS onto Hetzner') or says the old value first and
    the new one after 'and' ('we ditched BT and went with Zen for broadband')."""
    lead = LEAD.match(clause)
    body = re.sub(r"(?<!\b[A-Z])[\s.!]+$", "", clause[lead.end() if lead else 0 :])
    if found := general(body, sentence):
        return found
    if match := DROPPED_AND.fullmatch(body) or AND_CHANGE.fullmatch(body):
        body = f"{match['s']} {match['rest']}"
    elif NO_SUBJECT.match(body):
        body = f"I {body}"
    else:
        return []
    return _clause(body) or general(body, sentence)


def _sentence(sentence: str) -> list[Capture]:
    """Captures of one sentence, or else the correction it says ('I said Lisbon earlier but
    it's Porto': read also where the rules below see reported speech or a question)."""
    if len(sentence) > MAX_SENTENCE:
        return []
    return _stated(sentence) or correction(sentence)


def _stated(sentence: str) -> list[Capture]:
    """Captures of one sentence: a question tail is dropped, a tainting word ends the sentence."""
    body = COLON_CMD.sub(r"\1 that ", TAG.sub("", FROM_NOW.sub(r"\1 ", sentence.strip())))
    whole = body  # 'No more X, it's Y now' keeps its 'no' for `sentence_change`
    lead = LEAD.match(body)
    body = body[lead.end() if lead else 0 :]
    asks = ASK_MEMORY.match(body)
    if body.endswith("?") and not asks:
        tail = QUESTION_TAIL.search(body)
        body = body[: tail.start()] if tail else ""
    if not body or QUESTION.match(body) and not asks:
        return []
    if (own := own_words(body)) != body:
        body = whole = own
        if not body:
            return []
    if RETRACTED.search(body):
        return []
    out: list[Capture] = []
    work_words = 0 if _NOT_AT_WORK.search(body) else len(_WORK_WORDS.findall(body))
    about_home = _HOME_WORDS.search(body) is not None
    for n, clause in enumerate(_with_elided(CLAUSE.split(body.rstrip("?")))):
        found = (
            _clause(clause)
            or (_employer_now(clause, work_words) if work_words else [])
            or (_home_now(clause) if about_home else [])
            or _general(clause, body)
        )
        if n and not out and found and found[0].rule == "always_never":
            found = []  # 'In Python, always use …' is advice, not a rule for the assistant
        out += found
        if TAINT.search(clause):
            break
    if TAINT.search(body):
        return out
    whole_rules = replaced_plan(body) + named_role(body) + car_now(body)
    out += [c for c in whole_rules if all(o.key != c.key or o.op == "forget" for o in out)]
    out = [c for c in out if not _ends_what_is_set(c, out)]
    return out or sentence_change(whole)


def _ends_what_is_set(capture: Capture, out: list[Capture]) -> bool:
    """An ending whose key the same sentence sets anew ('I left nursing, I'm a tester now'):
    the new value supersedes the old one, so the ending says nothing more."""
    ending = capture.op == "forget" and capture.rule.endswith("_ended")
    return ending and any(o.key == capture.key and o.op == "set" for o in out)


def _with_elided(clauses: list[str]) -> list[str]:
    """`clauses`, each with a second statement its subject left out read on its own:
    'I live in Sheffield and work as a network engineer' -> 'I live in Sheffield', 'I work as
    a network engineer'."""
    out = []
    for clause in clauses:
        lead = LEAD.match(clause)
        match = ELIDED_AND.fullmatch(clause, lead.end() if lead else 0)
        if match is None:
            out.append(clause)
            continue
        out += [clause[: match.start("first")] + match["first"], f"{match['s']} {match['rest']}"]
    return out


def _sentences(text: str) -> list[str]:
    """The sentences of `text`; a split after an abbreviation ('Mr. Smith') is undone.

    Only the last piece is searched for the abbreviation: the sentence it ends grows with each
    piece joined to it, and searching the whole of it again each time made a message of many
    abbreviations ('Mr. ' 25,000 times) take minutes. A piece starts after a split's blank, so
    the abbreviation's word boundary is the same in it as in the sentence.
    """
    parts: list[str] = []
    joins = False
    for piece in SENTENCE.split(text):
        if joins:
            parts[-1] += " " + piece
        elif piece.strip():
            parts.append(piece)
        else:
            continue
        joins = ABBREV.search(piece) is not None
    return parts


def _head(text: str) -> str:
    """The whole lines or sentences of `text` within its first `MAX_CAPTURED_CHARS` (a cut
    sentence could read as another fact: 'I moved to Lis')."""
    if len(text) <= MAX_CAPTURED_CHARS:
        return text
    head = text[:MAX_CAPTURED_CHARS]
    return head[: max(head.rfind("\n"), *(head.rfind(end) for end in (". ", "! ", "? "))) + 1]


def capture_facts(text: str) -> list[Capture]:
    """Facts stated in one user message's first `MAX_CAPTURED_CHARS`; [] when none.
    Conservative: precision over recall.

    Deterministic and in text order, so applying the captures in order lets a later value of a
    key supersede an earlier one. Quoted text, code, blockquotes and transcripts are ignored.
    """
    clean = QUOTES.sub(" ", _head(text)).replace("’", "'").replace("`", "")
    lines = clean.splitlines()
    clean = "\n".join(s for s in lines if not CODE_LINE.search(s) and not SPEAKER.match(s))
    if PROCESSING.search(clean):
        return []
    out: list[Capture] = []
    for sentence in _sentences(clean):
        out += [c for c in _sentence(sentence) if c not in out and _no_credential(c)]
    return out


def _no_credential(capture: Capture) -> bool:
    """False for a fact whose value holds a credential ("remember that my OpenAI key is
    sk-…"): a fact is in every later block, so the key would go with each request the user
    makes, in every session and to every provider. The turn itself is stored, as any is."""
    return not holds_credential(capture.value)
