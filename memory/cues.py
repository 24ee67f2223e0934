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


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Not the user's own words: code, blockquotes, multi-word quotes, transcripts, text to process.
_QUOTES = re.compile(
    r"```.*?(?:```|\Z)|`[^`\n]*\s[^`\n]*`|^[ \t]*>[^\n]*|“[^”]*”|‘[^’\n]*’"
    r"|\"[^\"\n]*\s[^\"\n]*\"|(?<![\w’])'[^'\n]*\s[^'\n]*'(?!\w)",
    re.S | re.M,
)
_CODE_LINE = re.compile(
    r"^(?:[ ]{4,}|\t)\S|^\s*(?:#|//|/\*|def |class |import |from \S+ import|return\b|const |let "
    r"|var |function |SELECT |\$ )|[{};]\s*$|==|!=|=>|->|\w\(|\w\s*=\s*\S"
)
_SPEAKER = re.compile(
    r"^\s*(?!(?:Note|Update|Edit|Correction|Remember|Context|Background|Also|Info|Reminder)\b)"
    r"(?:[A-Z][\w'-]{0,15}|(?i:user|assistant|human|bot|q|a)):\s"
)
_PROCESSING = _rx(
    r"\b(?:translate|translating|proofread|rephrase|paraphrase|reword|rewrite|grammar|spell-?check"
    r"|role-?play|pretend|cover letter|write (?:a|an|me a) (?:story|poem|dialogue|script|scene"
    r"|letter|email|bio|message|paragraph)|draft (?:a|an|my)|sample|placeholder|fixture)\b"
)
# Words that make the rest of their sentence hypothetical, fictional or a joke ...
_TAINT = _rx(
    r"\b(?:if|suppose|supposing|imagine|hypothetically|let'?s say|assuming|unless|whether|thinks?"
    r"|thought|believes?|jk|kidding|joking|wish(?:ed)?|dream\w*|example|e\.g|character|story"
    r"|novel|game|script|sentence)\b"
)
# ... and reported speech, which voids the whole sentence ('…, as they say').
_REPORTED = _rx(
    r"\b(?:said|says|told|tells|asked|asks|wrote|writes|claim(?:s|ed)?|according|replied|texted"
    r"|emailed|(?:they|people|everyone|you) say)\b"
)
_LEAD = _rx(
    r"(?:(?:[-*•]+|(?:hi|hello|hey|hiya|there|ok|okay|oh|so|well|also|and|but|btw|fyi|by the way"
    r"|just so you know|for the record|for context|quick (?:note|update)|actually|oops|sorry"
    r"|correction|update|ps|anyway|anyways|yeah|yes|no|nope|alright|right|um|uh|hmm|again"
    r"|heads up|one more thing|ah|wait|just|fwiw|to be clear|in fact|plus|honestly|frankly|tbh"
    r"|personally)\b)[\s,:;!.\-—]*)*"
)
_QWORDS = (
    r"(?:what|where|who|whom|whose|when|why|how|which|do|does|did|is|are|am|was|were|can|could"
    r"|would|will|should|shall|has|have|any|anything)\b(?!\s+not\b)"
)
_QUESTION = _rx(_QWORDS)
_QUESTION_TAIL = _rx(
    rf"\s*(?:[,;:]|\s[-—]+)\s*(?:(?:and|but|so|or)\s+)?(?={_QWORDS})|\s+(?:and|but|so|or)\s+"
    rf"(?={_QWORDS})"
)
_TAG = _rx(r",?\s*(?:ok|okay|alright|right|yeah|please|thanks)\s*\?$")
_ASK_MEMORY = _rx(r"(?:can|could|would|will) you (?:please )?(?:remember|note|keep in mind|forget)")
_COLON_CMD = _rx(r"\b(remember|note)(?:\s+this)?\s*:\s*")
_FROM_NOW = _rx(r"\b(from now on|going forward|moving forward|in (?:the )?future)\s*,\s*")
_SUBJ = r"(?:i|i'm|im|i've|ive|my|we|please|always|never|actually|call|forget|remember)\b"
_CLAUSE = _rx(
    rf"\s*(?:[,;:]|\s[-—–]+|\.\.\.)\s*(?:(?:and|but|so|plus|also|though)\s+)?(?={_SUBJ})"
    rf"|\s+(?:and|but|so|plus|also)\s+(?={_SUBJ})"
)
_MAX_SENTENCE = 600  # characters; longer "sentences" are pasted text, and this bounds the cost
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_ABBREV = _rx(r"\b(?:st|mr|mrs|ms|dr|jr|sr|prof|mt|ft|e\.g|i\.e|vs)\.$")

# A name or place never starts with these: 'my name is important' is not a name.
_JUNK = _words(
    "a an the not no that this these those it its what who which something anything nothing "
    "everything someone here there important irrelevant relevant unknown secret private long "
    "weird hard common unusual boring funny fine ok okay whatever none same different on in at "
    "complicated difficult simple short mine spelled pronounced written just very pretty really "
    "so too also probably maybe kinda home night nights weekends myself yourself free fear hope "
    "peace denial luxury poverty misery limbo hiding later back crazy tomorrow today now please "
    "mornings mondays people work effort exercise meetings nonsense drama you your to by for of "
    "with after before like about from into over under all still listed mentioned attached"
)
# What may follow a value: the start of a new clause ('Lisbon since 2019', 'Dana and …').
_BOUNDARY = _words(
    "and but because cause since so now currently nowadays these at in for with near from on as "
    "when while after before until though although which who where if unless lol haha btw too "
    "actually also anymore then last this next a an the ago by to yesterday today recently"
)
_PHRASE_JUNK = _words(
    "not no that this these those it its what who which something anything nothing everything "
    "someone here there you your to when how the him her them myself being having whichever "
    "whatever either neither both any"
)
_TECH = _words(  # 'I moved to Rust' is a migration, not a move
    "python rust go golang java kotlin swift typescript javascript react vue angular svelte "
    "postgres postgresql mysql sqlite mongodb redis kubernetes docker aws gcp azure linux windows "
    "macos ubuntu debian arch vim neovim emacs vscode github gitlab jira slack notion django "
    "flask fastapi rails node deno terraform nix poetry conda vite webpack graphql kafka"
)
_JOIN = _words("de da del van von der la le of upon & al")
_TITLES = _words("Dr. Mr. Mrs. Ms. Prof. St. Mt.")
_WORD = re.compile(r"[^\W\d_]+(?:['-][^\W\d_]+)*")
_ORG_WORD = re.compile(r"[^\W_][\w&.'-]*")
_REGION = re.compile(r",\s+([A-Z][\w.'-]*(?:\s+[A-Z][\w.'-]*)?)(.*)")
_CLIP = _rx(
    r"\s*(?:[,;:!?()]|\.(?:\s|$)|\s(?:but|because|cause|since|so|although|though|unless|which"
    r"|anymore|any more|lol|haha|btw)\b)"
)
_POLITE = _rx(
    r"(?:\s+(?:please|pls|thanks|thank you|for me|from (?:your )?memory|now|too|at all|either"
    r"|very much|so much|that much|much|a lot|whatsoever))+$"
)
_DEICTIC = _rx(r"\b(?:this|these|those|here|above|below|following|latter|former)\b")
_FEEDBACK = _rx(r"\b(?:you|your|option|version|snippet|solution|approach|answer|response|code)\b")
_CODEISH = re.compile(r"[(){}=<>\[\]_\\]|\w\.\w")


def _ends(rest: str) -> bool:
    """True when `rest`, the text after a value, is empty or opens a new clause."""
    words = rest.split()
    return not words or not words[0][0].isalnum() or words[0].lower().strip(",.") in _BOUNDARY


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
    pattern, words, rest = (_ORG_WORD if org else _WORD), list[str](), list[str]()
    for n, raw in enumerate(tokens):
        word = raw if raw in _TITLES else raw.rstrip(".,;:!?)\"'")
        if word not in _JOIN and not (pattern.fullmatch(word.rstrip(".")) and _is_cap(word)):
            rest = tokens[n:]
            break
        words.append(word)
        if word != raw:
            break  # punctuation closes the value
    if not words and lower_ok and tokens:
        word = tokens[0].rstrip(".,;:!?")
        if not _WORD.fullmatch(word) or len(word) < 2 or word.endswith(("ous", "ful", "ble")):
            return None
        words, rest = [word], ([] if word != tokens[0] else tokens[1:])
    if not words or len(words) > max_words or words[0].lower() in _JUNK | _JOIN:
        return None
    return prefix + " ".join(words) if words[-1] not in _JOIN and _ends(" ".join(rest)) else None


def _phrase(text: str, max_words: int) -> str | None:
    """`text` cut at the first punctuation or trailing clause; None if empty, long or deictic."""
    match = _CLIP.search(text)
    head = _POLITE.sub("", text[: match.start()] if match else text)
    head = re.sub(r"[^\w)'+#]+$", "", head).strip()
    words = head.split()
    if not words or len(words) > max_words or words[0] in _PHRASE_JUNK or _DEICTIC.search(head):
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
    if value is None or value.split()[-1].lower() in _TECH:
        return None
    region = _REGION.match(raw[len(value) :]) if raw.startswith(value) else None
    if region and _is_cap(region[1]) and region[1].lower() not in _JUNK and _ends(region[2]):
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
_DATE = _rx(
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
_NAME = _rx(r"(?:my\s+name(?:\s+is|'s)|(?P<bare>name's))(?P<n>\s+not|n't)?\s+(?P<v>.+)")
_CALL_ME = _rx(r"(?:(?:you\s+can|please|just)\s+)*(?:call\s+me|i\s+go\s+by)\s+(?P<v>.+)")
_LIVE = _rx(rf"(?:i|we)(?:'?m|\s+am|'re|\s+are)?{_ADV}\s+(?:live|reside|living|based)\s+(?P<v>.+)")
_MOVED = _rx(
    rf"(?:i|we)(?:'ve|\s+have)?{_ADV}\s+(?:moved|relocated)(?:\s+(?:back|over))?\s+(?P<v>(?:not"
    r"\s+)?(?:from\s+.+?\s+)?to\s+.+)"
)
_DIET = _rx(
    r"(?:i'?m|i\s+am|i'?ve\s+been|i\s+have\s+been)(?:\s+(?:now|also|strictly|fully|a))*\s+(?P<v>"
    r"vegetarian|vegan|pescatarian|pescetarian|keto|kosher|halal|plant-based)(?![\w-])(?P<r>.*)"
)
_BIRTHDAY = _rx(r"(?:my\s+(?:birthday|bday)(?:\s+is|'s)|i\s+was\s+born)\s+(?:on\s+)?(?P<v>.+)")
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
_WORK = _rx(rf"i(?:'m|\s+am|'ve\s+been|\s+have\s+been)?{_ADV}\s+work(?:ing)?\s+(?P<v>.+)")
_WORK_PART = _rx(
    r"(?:(?:at|for)\s+(?P<org>.+?)|as\s+(?:an?\s+)?(?P<job>.+?))(?=\s+(?:at|for|as)\s|$)"
)
_NOT_A_JOB = _rx(r"\b(?:as|well|much|hard|long|fast|usual|team)\b|(?:^|\s)I\b|[^\w\s/-]")
_ALLERGY = _rx(
    r"(?:i'?m|i\s+am)(?:\s+(?:also|very|really|severely|extremely|mildly|deathly|super))*\s+"
    r"allergic\s+to\s+(?P<v>.+)|i\s+have\s+an?\s+(?:severe\s+)?allergy\s+to\s+(?P<w>.+)"
)
_ANIMAL = (
    r"(?:dog|cat|pupp(?:y|ie)|kitten|rabbit|bunn(?:y|ie)|hamster|parrot|bird|horse|fish|turtle"
    r"|tortoise|lizard|snake|ferret|gecko|budgie|retriever|labrador|poodle|beagle|terrier"
    r"|husk(?:y|ie)|corgi|pug|dachshund|spaniel|collie)s?"
)
_PET = _rx(
    rf"(?:(?:i|we)(?:'ve|\s+have)?\s+(?:have|got|own)\s+(?:an?|one|two|three|2|3)\s+(?P<a>(?:"
    rf"[a-z-]+\s+){{0,2}}?{_ANIMAL})\s+(?:named|called)|my\s+(?P<b>{_ANIMAL})(?:'s\s+name\s+is"
    rf"|\s+is\s+(?:named|called)))\s+(?P<v>.+)"
)
_FAVORITE = _rx(
    r"my\s+(?:all[- ]time\s+)?favou?rite\s+(?P<x>[a-z][a-z ]{1,30}?)\s+(?:is|are|'s)\s+(?P<v>.+)"
)
_FAV_JUNK = _rx(r"\b(?:thing|things|part|way|one|bit|moment|feature|line|quote|about|example)\b")
_PREFER = _rx(
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
        if not re.fullmatch(r"[^\W\d_][\w' -]*", item) or item.split()[0].lower() in _JUNK:
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
    if not value or _FEEDBACK.search(value) or match["y"] and not other:
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


_ADAPT = _words("preference constraint protocol")  # shape the reply silently, never announce
_REMEMBER = _rx(
    r"(?:(?P<bare>note)\s+that|(?:please\s+)?(?:remember|keep\s+in\s+mind|make\s+a\s+note|(?:don'?t"
    r"|do\s+not|never)\s+forget|note)\s+that|(?:please\s+(?:remember|note)|(?:don'?t|do\s+not"
    r"|never)\s+forget)(?!\s+(?:to|that|about|it)\b)|(?:can|could|would|will)\s+you\s+(?:please"
    r"\s+)?(?:remember|note|keep\s+in\s+mind)(?:\s+that)?)\s+(?P<x>(?!to\s)\S.*)"
)
_FORGET = _rx(
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
_NO_LONGER = _rx(
    r"(?P<s>(?:i|we)(?:'?m|\s+am|'re|\s+are)?)\s+(?P<neg>no\s+longer|not|don'?t|do\s+not)\s+"
    r"(?P<r>.+)"
)
_ANYMORE = _rx(r"\s*\b(?:anymore|any\s+more|any\s+longer)\b")
_ALWAYS = _rx(
    r"(?:please\s+)?(?P<fn>(?:from\s+now\s+on|going\s+forward|moving\s+forward|in\s+(?:the\s+)?"
    r"future)\s+(?:please\s+)?)?(?:(?P<pol>always|never|don'?t\s+ever|do\s+not\s+ever|don'?t|do\s+"
    r"not)\s+)?(?P<v>(?:answer|respond|reply|use|write|include|add|mention|bring|talk|ask|call"
    r"|address|format|give|show|explain|keep|start|end|sign|speak|suggest|recommend|put|assume|cite"
    r"|provide|make|send|check|double-check|spell|refer|wrap|greet|remind|comment|return|output|be"
    r"|swear|apologi[sz]e|tell|summari[sz]e|label|quote|link|list|offer|discuss|round|convert"
    r"|reference|stick|avoid|skip)\b.*)"
)
_NOTE_KINDS = (  # the first that matches; else "protocol"
    ("protocol", _rx(r"\b(?:you|your|reply|respond|answer|format|tone)\b")),
    ("open_loop", _rx(r"\b(?:tomorrow|tonight|next \w+|deadline|due|appointment|remind)\b")),
    ("open_loop", _rx(r"\b(?:need to|have to|(?:mon|tues|wednes|thurs|fri|satur|sun)day)\b")),
    ("episodic_event", _rx(r"\b(?:yesterday|last (?:week|night|month|year)|ago)\b")),
    ("project", _rx(r"\b(?:project|repo|codebase|app|api|server|db|database|staging|port)\b")),
    ("profile", _rx(r"\b(?:i|i'm|my|me|we|our)\b")),
)
_NOTE_VERB = _rx(
    r"\b(?:is|are|am|was|were|'m|'re|'s|have|has|had|do|does|don't|doesn't|can|can't|will|won't"
    r"|should|must|need|needs|want|wants|use|uses|live|lives|work|works|like|likes|prefer|go|run"
    r"|runs|get|gets|start|starts)\b|^(?:i|we|my|our)\b"
)
_NOTE_START = _words("time day night one guy thing when how what where why who to it this that")


def _note(text: str) -> str | None:
    """A free-text note worth keeping: a short statement with a verb, no code, no 'this'."""
    match = _CLIP.search(text)
    value = re.sub(r"[\s.!?]+$", "", text[: match.start()] if match else text).strip()
    words = value.split()
    if not 2 <= len(words) <= 25 or words[0].lower() in _NOTE_START:
        return None
    ok = _NOTE_VERB.search(value) and not _DEICTIC.search(value) and not _CODEISH.search(value)
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
    target = _POLITE.sub("", re.sub(r"[\s.!?]+$", "", match["x"]))
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
    lead = _LEAD.match(clause)
    body = re.sub(r"(?<!\b[A-Z])[\s.!]+$", "", clause[lead.end() if lead else 0 :])  # keep 'D.C.'
    for rule in _CLAUSE_RULES:
        if found := rule(body):
            return found
    return []


def _sentence(sentence: str) -> list[Capture]:
    """Captures of one sentence: a question tail is dropped, a tainting word ends the sentence."""
    if len(sentence) > _MAX_SENTENCE:
        return []
    body = _COLON_CMD.sub(r"\1 that ", _TAG.sub("", _FROM_NOW.sub(r"\1 ", sentence.strip())))
    lead = _LEAD.match(body)
    body = body[lead.end() if lead else 0 :]
    asks = _ASK_MEMORY.match(body)
    if body.endswith("?") and not asks:
        tail = _QUESTION_TAIL.search(body)
        body = body[: tail.start()] if tail else ""
    if not body or _QUESTION.match(body) and not asks or _REPORTED.search(body):
        return []
    out: list[Capture] = []
    for n, clause in enumerate(_CLAUSE.split(body.rstrip("?"))):
        found = _clause(clause)
        if n and not out and found and found[0].rule == "always_never":
            found = []  # 'In Python, always use …' is advice, not a rule for the assistant
        out += found
        if _TAINT.search(clause):
            break
    return out


def _sentences(text: str) -> list[str]:
    parts: list[str] = []
    for piece in _SENTENCE.split(text):
        if parts and _ABBREV.search(parts[-1]):
            parts[-1] += " " + piece
        elif piece.strip():
            parts.append(piece)
    return parts


def capture_facts(text: str) -> list[Capture]:
    """Facts stated in one user message; [] when none. Conservative: precision over recall.

    Deterministic and in text order, so applying the captures in order lets a later value of a
    key supersede an earlier one. Quoted text, code, blockquotes and transcripts are ignored.
    """
    clean = _QUOTES.sub(" ", text).replace("’", "'").replace("`", "")
    lines = clean.splitlines()
    clean = "\n".join(s for s in lines if not _CODE_LINE.search(s) and not _SPEAKER.match(s))
    if _PROCESSING.search(clean):
        return []
    out: list[Capture] = []
    for sentence in _sentences(clean):
        out += [c for c in _sentence(sentence) if c not in out]
    return out
