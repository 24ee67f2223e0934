"""Two-clause update cues: a change said across the clauses of one sentence.

Part of deterministic fact capture (`memory/facts/capture.py` tries these on a sentence none of
whose clauses stated a fact). The clause rules of `memory/facts/general.py` see one clause at a
time, but a change is often said as the kind of thing that changed, then its new value ("switched
banks, I'm with Starling now"), or the old value, then the new one ("no more Tesco deliveries,
it's Ocado now"). The same guards hold: a value is a name, 'now' says it is the new one, the key
is the thing's noun (never the old value), and a sentence about long ago or a plan not made
states nothing. Keys are a contract with stored facts.
"""

from __future__ import annotations

import re

from memory.facts.general import NOT_NOW, ok_thing, thing_of, value_of
from memory.facts.lexicon import cue, word_set
from memory.facts.statements import Capture, cap, not_a_place, slug

__all__ = ["AND_CHANGE", "DROPPED_AND", "NO_SUBJECT", "sentence_change"]


# A change of a kind of thing, then its value in the next clause: 'switched banks, I'm with
# Starling now', 'we changed vets, we go to Hillside Vets now', 'changed course, I'm doing
# Nursing now' ('now' required: it says the value is the new one).
_KIND_CHANGED = cue(
    r"(?:(?:i|we)(?:'ve|\s+have)?\s+)?(?:switched|changed|swapped)\s+(?P<kind>[a-z]+)\s*[,;:—-]+"
    r"\s*(?:(?:and|so)\s+)?(?:(?:i|we)(?:'m|\s+am|'re|\s+are)\s+(?:now\s+)?(?:with|at|doing|using"
    r"|on)|(?:i|we)\s+(?:now\s+)?(?:go\s+to|use|bank\s+with)|it'?s)\s+(?P<v>.+?)\s+now\b\W*"
)
_KINDS = {"jobs": "employer", "job": "employer", "employers": "employer", "companies": "employer"}
_NO_KIND = word_set("roles role sides places seats shifts hands plans tack gear lanes topics")
# 'no more Tesco deliveries, it's Ocado now', 'the old vet is out, Hillside is in'
_NO_MORE = cue(
    r"(?:no\s+more|goodbye|bye\s+bye|so\s+long)\s+(?P<old>[^,;:]+?)\s*[,;:—-]+\s*(?:it'?s|we'?re"
    r"\s+(?:with|on|using)|i'?m\s+(?:with|on|using))\s+(?P<v>.+?)\s+now\b\W*"
    r"|(?P<old2>[^,;:]+?)\s+(?:is|'s|are)\s+out\s*[,;:—-]+\s*(?P<v2>.+?)\s+(?:is|'s|are)\s+in\b\W*"
)
# 'we sold the house in Surrey and bought a cottage in Hay-on-Wye'
_SOLD_BOUGHT = cue(
    r"(?:i|we)(?:'ve|\s+have)?\s+sold\s+(?:the|our|my)\s+(?:[\w-]+\s+)?(?:house|flat|home"
    r"|place|apartment|cottage)\b.*?\s+and\s+(?:(?:i|we)(?:'ve|\s+have)?\s+)?(?:bought|moved\s+into"
    r"|rented)\s+an?\s+(?:[\w-]+\s+){0,2}?(?:house|flat|home|place|apartment|cottage|bungalow"
    r"|farmhouse|terrace)\s+in\s+(?P<v>.+)"
)
# 'we get our veg box from Riverford now'
_GET_FROM = cue(
    r"(?:i|we)\s+(?:now\s+)?(?:get|buy|order)\s+(?:our|my|the)\s+(?P<thing>[a-z][\w-]*(?:\s+"
    r"[a-z][\w-]*)?)\s+from\s+(?P<v>.+?)\s+now\b.*"
)
# 'we ditched BT and went with Zen for broadband': what follows 'and' says the new value.
DROPPED_AND = cue(
    r"(?P<s>i|we)(?:'ve|\s+have)?\s+(?:ditched|dropped|left|cancelled|canceled|binned|dumped"
    r"|quit|stopped\s+using)\s+[^,;]+?\s+and\s+(?P<rest>(?:went|switched|moved|changed|signed"
    r"|gone)\b.+)"
)
# 'I've given them notice and moved both flats to Headrow Homes': something else first, then a
# change of a thing after 'and' (read as 'I moved both flats to …').
AND_CHANGE = cue(
    r"(?P<s>i|we)(?:'ve|\s+have)?\s+(?!(?:moved|switched|swapped|migrated|changed)\b)[^,;]+?\s+"
    r"and\s+(?P<rest>(?:moved|switched|swapped|migrated|changed)\s+(?:both|all|the|my|our)\b.+)"
)
# A clause that opens with a past-tense change verb has dropped its 'I': 'Moved our hosting off
# AWS onto Hetzner', 'Got poached by Atlassian'.
NO_SUBJECT = cue(
    r"(?=(?:moved|switched|swapped|traded|replaced|changed|ditched|got|ended\s+up|pushed"
    r"|postponed|brought|rebooked|rescheduled|started\s+a\s+new)\b)"
)


def sentence_change(body: str) -> list[Capture]:
    """A change said across two clauses of one sentence, which no clause rule sees whole."""
    if NOT_NOW.search(body):
        return []
    text = re.sub(r"[\s.!]+$", "", body)
    if match := _KIND_CHANGED.fullmatch(text):
        kind = match["kind"].lower()
        found = value_of(match["v"], 0)
        if not found or kind in _NO_KIND or not ok_thing([kind]):
            return []
        key = _KINDS.get(kind) or f"current:{re.sub(r'(?<=[^s])s$', '', kind)}"
        return [cap(key, found[0], "profile", "kind_changed")]
    if match := _NO_MORE.fullmatch(text):
        thing = thing_of(match["old"] or match["old2"])
        found = value_of(match["v"] or match["v2"], 0)
        if not thing or not found:
            return []
        return [cap(f"current:{slug(thing, 3)}", found[0], "profile", "no_more")]
    if match := _SOLD_BOUGHT.fullmatch(text):
        found = value_of(match["v"], 0)
        if not found or not_a_place(found[0]):
            return []
        return [cap("home_city", found[0], "profile", "sold_bought")]
    if match := _GET_FROM.fullmatch(text):
        found = value_of(match["v"], 0)
        if not found or not ok_thing(match["thing"].lower().split()):
            return []
        return [cap(f"current:{slug(match['thing'], 3)}_source", found[0], "profile", "get_from")]
    return []
