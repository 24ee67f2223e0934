"""A question about a fact the block shows, and the turn the fact was taken from.

"Which town do we call home?" gets the fact "home city: Reading" in the block, yet the turn it
came from ("…We live in Reading, so Heathrow is an easy drive…") is a long turn on other
things whose cosine to the question is one of many alike: the abstention gate withheld it.
The fact says the question was discussed; its source turn (`Fact.source_message_id`) is the
evidence, and it leads the excerpts when recall found it. A question asks what a fact holds
when it says what the fact is about: every word of its subject ("current:car" → car,
"person:head_chef" → head chef), or for a key without one ("home_city") a word of the key or
one it is asked by ("live", "town"), not qualifying another word ("the care home fees"); and
none of the value's words (it would ask something else about it), not someone else's ("my
husband's job"), not where the thing asked is ("the registration of the new van", "my salary
at the new job"), a name only
of a person or a pet. Any fact's source turn kept when it was the best candidate opened nine
never-discussed questions for two updates (docs/recall-quality.md, "Eleventh pass"): a
question on the same subject is not one asking what the fact holds.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

from memory.recall.amounts import asks_for_money, says_a_sum
from memory.recall.names import asks_a_name
from memory.recall.retrieval import Retrieval
from memory.records import Fact, Hit
from memory.store.fts import fts_terms, stem

# Facts whose value is a name: the only ones a who- or name-question asks after.
_NAMED = frozenset({"person", "pet"})
# The words a question asks by for a key without a subject, beside the key's own words: those
# of the phrases `memory.facts.capture` reads as the same keys ('where i live', 'my company',
# 'my role'), and a few more of the kind, written reading the tuning splits' misses ('town',
# 'for a living': docs/recall-quality.md, "Twenty-fifth pass"). 'for a living' is the job's.
_ASKED_BY = {
    "home_city": r"live|lives|(?<!for a )living|home|town|city|address",
    "job_title": r"job|role|occupation|profession|career|for a living",
    "employer": r"employer|company|firm|work|works",
}
# The words before a subject that make it where the thing asked is ('the name of', 'at the').
_PLACED = r"(?:of|at|for|in|on|from|with|about)"
_WORD = re.compile(r"[\w'-]+")
_BARE_NUMBER = re.compile(r"[£$€¥]?\s?\d[\d,.]*")
# Someone's ('my husband's', 'Anna-Lee's'): a whole word, not "what's", "who's", "it's" (a
# verb: "What's my job?" asks the user's own), read once from the word's start and without
# backtracking into it (`\b` and `+` cost the square of a 16 kB run of "a-a-a-…").
_OWNER = (
    r"(?<![\w-])(?!(?:my|our|what|who|where|when|why|how|which|that|this|it|there|here|he|she"
    r"|let)\b)[\w-]++['’]s"
)


def asks_about(query: str, fact: Fact) -> bool:
    """Whether `query` asks what `fact` holds (see the module docstring)."""
    prefix, colon, rest = fact.key.partition(":")
    subject = (rest if colon else fact.key).replace("_", " ")
    about = {stem(w) for w in fts_terms(subject)}
    terms = {stem(w) for w in fts_terms(query)}
    if not about or not (about <= terms if colon else _says_the_key(query, fact.key)):
        return False
    if ({stem(w) for w in fts_terms(fact.value)} - about) & terms:
        return False  # it names the value: it asks something else about it
    named = prefix in _NAMED
    if asks_a_name(query) and not named:
        return False
    names = "|".join(re.escape(w) for w in subject.split())
    if re.search(rf"{_OWNER}\s+(?:[\w-]+\s+)?(?:{names})\b", query, re.I):
        return False  # 'my husband's job': someone else's
    # 'the registration of the new van', 'my salary at the new job': the subject is where the
    # thing asked is, not what is asked (a name of a person or a pet is what it holds)
    of = re.search(
        rf"\b{_PLACED}\s+(?:(?:the|my|our|a|an)\s+)?(?:[\w-]+\s+)?(?:{names})\b", query, re.I
    )
    return of is None or (named and asks_a_name(query))


def _says_the_key(query: str, key: str) -> bool:
    """Whether the question says a word of a key without a subject ("home_city": home, city,
    or one it is asked by) other than before another word it qualifies ('the care home fees':
    the fees are asked, not the home city)."""
    words = "|".join([*key.split("_"), *filter(None, [_ASKED_BY.get(key)])])
    for said in re.finditer(rf"\b(?:{words})\b", query, re.IGNORECASE):
        after = (
            _WORD.match(query, said.end() + 1)
            if query[said.end() : said.end() + 1] == " "
            else None
        )
        if after is None or not fts_terms(after.group()):
            return True
    return False


def with_the_fact_asked(found: Retrieval, facts: Sequence[Fact]) -> Retrieval:
    """`found` with the source turns of the facts its question asks about first among its
    hits, when they were candidates the gate or the floors dropped (a turn recall did not
    find is not added: it was not a candidate of this question at all)."""
    sourced = [f for f in facts if f.source_message_id is not None]
    if not sourced or not found.ranked:
        return found
    asked = {f.source_message_id for f in sourced if asks_about(found.query, f)}
    if not asked:
        return found
    kept = {h.chunk.id for h in found.hits}
    added = [h for h in found.ranked if h.chunk.message_id in asked and h.chunk.id not in kept]
    if not added:
        return found
    added = found.texts(added) if found.texts is not None else added
    if asks_for_money(found.query):  # a sum asked (amounts.py): a fact that holds one
        summed = {f.source_message_id for f in sourced if _a_sum(f.value)}
        added = [h for h in added if h.chunk.message_id in summed or says_a_sum(h.chunk.text)]
        if not added:  # ('current:rent' 845, not 'current:car' Fiat 500), or a turn that
            return found  # says one, answers it
    hits: list[Hit] = [*added, *found.hits]
    return dataclasses.replace(found, hits=hits, abstained=False)


def _a_sum(value: str) -> bool:
    """Whether a fact's value is a sum: a bare number ('845', '£1,250') or one said as such."""
    return _BARE_NUMBER.fullmatch(value.strip()) is not None or says_a_sum(value)
