"""A car the user has now, said by its make: the new value of `current:car`.

Part of deterministic fact capture, read over a whole sentence after its clauses' rules. A newer
turn about a new car often names the old one first ("the old Corsa finally died, so we've bought
a second-hand electric Fiat 500", "our old Zafira died … now we've got a Kia Sorento"): an
excerpt of it then puts the old car before the new one, and a fact leading the block is what
puts the current one first. The old car is said by its make or model, which names no thing a
key could be built from; the new one is known for a car by its make (`CAR_MAKES`). The shape:

    I / we ('ve) (now / just / finally) bought | got | picked up | leased | am in  a / an
    (a few lowercase words) <make> (<model>)

-> current:car = "<make> <model>", only when the sentence says it is the user's now: "now", or
the old one gone ("died", "written off", "traded it in", "scrapped", "sold"). Not one bought for
someone else ("for my daughter"), hired, a question, a plan or a wish ("might", "thinking
about", "want to"), nor a make followed by another noun ("a Honda lawnmower").
"""

from __future__ import annotations

import re

from memory.facts.general import NOT_NOW
from memory.facts.lexicon import CAR_MAKES, cue
from memory.facts.statements import Capture, cap

_GOT = cue(
    r"(?:.*?\b)?(?:(?:i|we)(?:'ve|\s+have)?\s+(?:(?:now|just|finally)\s+)*(?:bought|got|gotten"
    r"|picked\s+up|leased)|(?:i'm|i\s+am|we're|we\s+are)\s+(?:now\s+)?(?:driving|in))\s+"
    r"(?:ourselves\s+|myself\s+)?an?\s+(?P<v>.+)"
)
# The sentence says the car is the user's now: 'now', or the old one is gone.
_NOW = cue(
    r"\b(?:now|died|written\s+off|write-off|packed\s+up|gave\s+up|conked\s+out|scrapped|traded"
    r"|sold|replaced|failed\s+its\s+mot)\b"
)
_FOR_SOMEONE = cue(r"\s*(?:for|to)\s+(?:my|our|his|her|their)\b")
_MODEL = re.compile(r"[A-Z0-9][\w-]*")
_WORDS_BEFORE = 3  # 'a second-hand electric Fiat 500'


def car_now(sentence: str) -> list[Capture]:
    """'the old Corsa finally died, so we've bought a second-hand electric Fiat 500' ->
    current:car = Fiat 500; [] for any other sentence."""
    text = sentence.strip()
    if text.endswith("?") or CAR_MAKES.isdisjoint(re.findall(r"[a-zà-ž]+", text.lower())):
        return []  # most sentences name no make: the patterns below are not run
    if not (match := _GOT.fullmatch(text)) or not _NOW.search(text):
        return []
    if NOT_NOW.search(text[: match.start("v")]):
        return []
    words = match["v"].split()
    start = next((i for i, w in enumerate(words[: _WORDS_BEFORE + 1]) if not w.islower()), None)
    if start is None or words[start].rstrip(",.;:!").lower() not in CAR_MAKES:
        return []
    car: list[str] = []
    for word in words[start:]:
        bare = word.rstrip(",.;:!")
        if len(car) > 3 or not _MODEL.fullmatch(bare):
            if bare.islower() and not _ends(bare):
                return []  # 'a Honda lawnmower'
            break
        car.append(bare)
        if bare != word:
            break
    rest = " ".join(words[start + len(car) :])
    if _FOR_SOMEONE.match(" " + rest):
        return []
    return [cap("current:car", " ".join(car), "profile", "car_now")]


def _ends(word: str) -> bool:
    """A word that ends the car's name and goes on with the sentence ('Kia Niro now through')."""
    return word in {"now", "through", "from", "with", "and", "which", "for", "on", "in", "at", "so"}
