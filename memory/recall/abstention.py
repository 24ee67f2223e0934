"""Step 3c, the abstention gate: recall no excerpt when nothing stands out from the topic.

A question on a familiar topic always finds related turns: on the user's health, some health
turn shares its words and sits in MiniLM's 0.3-0.6 cosine band. What separates "this detail
was said" from "only its topic was" is whether one turn stands out from the rest: a turn that
answers the question scores clearly above the other turns of its topic; for a question about
something never said, the best turn is just one of many alike. The gate reads that from the
cosines recall already has (no extra query):

    standout = best cosine + margin_weight × (best cosine − median of the ten best cosines)

over the hits that pass the similarity floors, and abstains when `standout` is under
`threshold`. Facts are not affected (they are never suppressed); only excerpts are withheld.
With fewer than ten candidates the gate stays open (a new user's few turns are all recalled),
and so it does for a question that names a stored identifier, asks for the present state
("… now?", "… these days?", "Am I still …?", "… this year?") or is dated ("… in July?", "…
last winter?", "… in 2024?"): such a question presumes the thing was said, and its time words,
which the turn that answers it seldom repeats, pull its cosines down. A request for advice or a
suggestion ("Can you suggest …?", "Which … should I …?") asks for no stored detail, so there is
nothing to abstain on; what bears on it (a diet, a fear) seldom stands out of its topic. Nor
does it close on a question about the user's present whose kept turns say it changed, or
whose subject has a history among them (`memory/recall/changed.py`): something that changed
was discussed; nor on one asking for an
identifier a kept turn gives, by its kind or beside the question's words (`identifiers.py`),
or how many of a thing one of the best kept turns counts ("seven colonies": `counts.py`), or
where, when one names a place beside the question's words ("on Argyle Street": `places.py`),
or who, when one gives the user's one by name ("my head of department, Farid": `names.py`),
or when, when one gives a date beside the question's words ("born on 3 February last year":
`dates_given.py`).
Conversely it closes, whatever the rest says, on a question after money none of whose five
best kept turns says a sum ("How much did the electric car cost?": `amounts.py`).
A turn that says nothing ('Noted.') is not read (`memory/recall/retrieval.py`).

Calibrated on the tuning half of bench/memsuite.py (long suite) and LoCoMo conversations 0-4
(docs/recall-quality.md has the trade-off curve): margin weight 3 and threshold 0.5 silence
0.53 of never-discussed questions (held out 0.54) for 0.02 (0.05) of answerable ones, and
drop an evidence turn from 0.4 % of LoCoMo's answerable questions (held out 0.1 %).

The learned gate (`answerable_probability`, `memory.min_answerable`) replaced that rule by
default (`memory.min_standout` 0): a logistic regression over the cosines and what the best
hits hold, fitted on the tuning splits. On the held-out halves it silences 0.61 of never-
discussed questions for 0.08 of answerable ones (the standout rule 0.52 / 0.11), on the blind
splits 0.46 / 0.21 (0.34 / 0.22), LoCoMo unchanged (docs/recall-quality.md, "Sixteenth pass").
Refitted with fresh10 and a question asking for a name (threshold 0.48, "Twentieth pass"):
each tuning suite left out of the fit in turn, 0.53 / 0.14 of never-discussed / answerable
questions silenced on average, against 0.48 / 0.15 for the same refit without the name signal.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from memory.recall.amounts import no_sum_given
from memory.recall.changed import asks_after_a_change, asks_after_a_history
from memory.recall.counts import gives_the_count
from memory.recall.dates_given import gives_the_date
from memory.recall.identifiers import (
    gives_a_code_on_its_words,
    gives_the_kind_asked_for,
    names_a_stored_identifier,
)
from memory.recall.names import asks_a_name, gives_the_name
from memory.recall.places import gives_the_place
from memory.records import Hit
from memory.store.fts import fts_terms, word_set

# Cosines the median is taken over: the best few of the topic the question touches.
TOPIC_SIZE = 10


def _cosines(kept: Sequence[Hit]) -> list[float]:
    """The kept hits' cosines, best first (a hit only the lexical side found has none)."""
    return sorted((h.similarity for h in kept if h.similarity is not None), reverse=True)


def standout(kept: Sequence[Hit], margin_weight: float) -> float:
    """How far the best cosine of `kept` stands above the rest of its topic, in cosine units.

    best + margin_weight × (best − median of the TOPIC_SIZE best); a lone hit has no lead.
    """
    cosines = _cosines(kept)
    if not cosines:
        return 0.0
    best = cosines[0]
    return best + margin_weight * (best - statistics.median(cosines[:TOPIC_SIZE]))


# The learned gate (docs/recall-quality.md, "Sixteenth pass", refitted in the "Twentieth"): a
# logistic regression over signals recall already holds at the gate, fitted by
# bench/gate_fit.py on the tuning questions only (memsuite long, short, fresh, fresh2, fresh4,
# fresh5, fresh7 and fresh10: the 678 answerable and 516 never-discussed questions the rules
# above leave to the gate; LoCoMo conversations 0-4, 621 answerable, weighted 0.3). Log-odds
# that it is answerable = ANSWERABLE_BIAS + the sum of each weight times its signal; the
# weights of the cosines are the fit's over (best, best − second, best − median), collapsed.
ANSWERABLE_BIAS = -1.4415
BEST_COSINE_WEIGHT = 7.8331
SECOND_COSINE_WEIGHT = -3.2267
MEDIAN_COSINE_WEIGHT = -0.9300
# Kept hits, counted up to TOPIC_SIZE: a topic with many turns past the floors was discussed.
KEPT_WEIGHT = 0.1813
# The share of the question's words (fts_terms) the three best kept hits hold.
COVERED_WEIGHT = 0.3739
# The best kept hit is the user's own turn: most often the user asking about the topic (a
# never-discussed detail's question finds the user's earlier question on the same subject).
USER_TURN_WEIGHT = -1.1254
# log(1 + characters) of the best kept hit: a long turn matches many questions a little.
LENGTH_WEIGHT = -0.1093
# The vocabulary expansion gave the question words: a paraphrase of something said.
EXPANDED_WEIGHT = 0.7655
# The question asks who or for a name (`names.asks_a_name`) and reaches the gate, so no kept
# turn gives the user's one by name (`names.gives_the_name` opens those): the name was seldom
# said (tuning splits: 96 such questions never discussed, 51 answerable).
ASKS_NAME_WEIGHT = -0.9010
COVERED_HITS = 3


@dataclass(frozen=True, slots=True)
class GateSignals:
    """What the learned gate reads of a question's kept hits (`gate_signals`)."""

    best: float
    second: float
    median: float
    kept: int
    covered: float
    user_turn: bool
    length: int
    expanded: bool
    asks_name: bool = False


def gate_signals(query: str, kept: Sequence[Hit], expanded: bool) -> GateSignals:
    """The learned gate's signals for `query` from its kept hits, best first (no new query:
    the cosines recall has, and the text of the three best hits)."""
    cosines = _cosines(kept)
    words = set(fts_terms(query))
    said = word_set("\n".join(h.chunk.text for h in kept[:COVERED_HITS]))
    top = kept[0].chunk if kept else None
    return GateSignals(
        best=cosines[0] if cosines else 0.0,
        second=cosines[1] if len(cosines) > 1 else 0.0,
        median=statistics.median(cosines[:TOPIC_SIZE]) if cosines else 0.0,
        kept=len(kept),
        covered=len(words & said) / len(words) if words else 0.0,
        user_turn=top is not None and top.role == "user",
        length=len(top.text) if top else 0,
        expanded=expanded,
        asks_name=asks_a_name(query),
    )


def answerable_probability(signals: GateSignals) -> float:
    """The learned gate's probability that the question was discussed (see the weights)."""
    odds = (
        ANSWERABLE_BIAS
        + BEST_COSINE_WEIGHT * signals.best
        + SECOND_COSINE_WEIGHT * signals.second
        + MEDIAN_COSINE_WEIGHT * signals.median
        + KEPT_WEIGHT * min(signals.kept, TOPIC_SIZE)
        + COVERED_WEIGHT * signals.covered
        + USER_TURN_WEIGHT * signals.user_turn
        + LENGTH_WEIGHT * math.log1p(signals.length)
        + EXPANDED_WEIGHT * signals.expanded
        + ASKS_NAME_WEIGHT * signals.asks_name
    )
    return 1.0 / (1.0 + math.exp(-odds))


def nothing_stands_out(
    query: str,
    measured: int,
    kept: Sequence[Hit],
    margin_weight: float,
    threshold: float,
    min_answerable: float = 0.0,
    expanded: bool = False,
) -> bool:
    """True when excerpts should be withheld: no hit stands out of the question's topic.

    `measured` is how many of the fused hits have a cosine, `kept` the hits that passed the
    similarity floors (`ranking.drop_weak`): the topic is what is left once unrelated turns
    are gone, so a question whose few related turns are all alike gets a small lead. With
    fewer than TOPIC_SIZE measured candidates the store is too small to tell a topic from the
    whole history and the gate stays open. Two rules read it, each off at 0 (or less): the
    standout under `threshold`, and the learned gate's `answerable_probability` under
    `min_answerable` (`expanded`: the vocabulary expansion gave the question words).
    """
    if threshold <= 0 and min_answerable <= 0:
        return False
    if closes(query, measured, kept):
        return True
    if stays_open(query, measured, kept):
        return False
    if threshold > 0 and standout(kept, margin_weight) < threshold:
        return True
    if min_answerable <= 0:
        return False
    return answerable_probability(gate_signals(query, kept, expanded)) < min_answerable


def closes(query: str, measured: int, kept: Sequence[Hit]) -> bool:
    """Whether a rule closes the gate whatever the cosines or the open-rules say: the question
    asks what something cost or earned and none of the best kept turns says a sum
    (`amounts.py`). Not on a small store (as `stays_open`) nor on a request for advice."""
    return measured >= TOPIC_SIZE and not is_a_request(query) and no_sum_given(query, kept)


def stays_open(query: str, measured: int, kept: Sequence[Hit]) -> bool:
    """Whether a rule keeps the gate open whatever the cosines say: a small store, or a
    question that presumes the thing was said or whose answer a kept turn visibly gives (the
    learned gate is fitted on the questions none of these opens: `bench/gate_fit.py`)."""
    if measured < TOPIC_SIZE:
        return True
    if names_a_stored_identifier(query, kept) or asks_for_the_present(query) or is_dated(query):
        return True
    if is_a_request(query):
        return True
    if gives_the_kind_asked_for(query, kept) or asks_after_a_change(query, kept):
        return True
    if asks_after_a_history(query, kept):
        return True
    if gives_a_code_on_its_words(query, kept) or gives_the_count(query, kept):
        return True
    if gives_the_place(query, kept) or gives_the_name(query, kept):
        return True
    return gives_the_date(query, kept)


# A question asking for the present state ('Where do I work these days?', 'Who is my physio
# now?', 'Which course am I doing this year?') presumes the thing was said and has changed: no
# never-discussed question of the tuning splits (long, short, fresh, fresh2, fresh4) asks that way.
_PERIOD = r"(?:year|month|week|weekend|term|season|spring|summer|autumn|fall|winter)"
_PRESENT = re.compile(
    r"\b(?:now|these\s+days|nowadays|currently|current|at\s+the\s+moment|at\s+present"
    rf"|right\s+now|still|latest|most\s+recent|today|any\s?more|this\s+{_PERIOD})\b",
    re.IGNORECASE,
)

# A question dated to a month, a past period or a year ('What injury did I come back with in
# July?', 'How old was Alfie in summer 2024?'): of the tuning splits' dated questions the gate
# withheld, every one was answerable and answered once let through (docs/recall-quality.md,
# "Sixth pass"). 'next summer' is not a date here: plans never discussed are asked that way.
_MONTH = (
    r"(?:january|february|march|april|may|june|july|august|september|october|november"
    r"|december)"
)
_DATED = re.compile(
    rf"\b(?:in|since|by|during|of|as\s+of|until|from)\s+(?:early\s+|late\s+|mid-?)?{_MONTH}\b"
    rf"|\blast\s+{_PERIOD}\b|\b(?:19|20)\d\d\b",
    re.IGNORECASE,
)


def asks_for_the_present(query: str) -> bool:
    """Whether the question asks what is so now (the gate stays open for it)."""
    return _PRESENT.search(query) is not None


def is_dated(query: str) -> bool:
    """Whether the question is dated to a month, a past period or a year (the gate stays open
    for it)."""
    return _DATED.search(query) is not None


# A request for advice or a suggestion ('Can you suggest a dinner for Friday?', 'Any ideas for
# snacks?', 'Which frames should I order?'): it asks for no stored detail, so there is nothing
# to abstain on, and what bears on it (a diet, a fear, a dislike said long ago) shares few
# words or little meaning with it, so nothing stands out. No never-discussed question of the
# tuning splits is worded as one (docs/recall-quality.md, "Twelfth pass").
_REQUEST = re.compile(
    r"\b(?:should|shall)\s+(?:i|we)\b"
    r"|\b(?:can|could|would)\s+you\s+(?:please\s+)?(?:suggest|recommend|plan|give\s+me|draft"
    r"|help\s+me|pick|think\s+of|come\s+up\s+with)\b"
    r"|^\s*(?:please\s+)?(?:suggest|recommend|plan|pick|help\s+me|give\s+me|draft)\b"
    r"|\bany\s+(?:ideas|tips|advice|suggestions|recommendations)\b",
    re.IGNORECASE | re.MULTILINE,
)


def is_a_request(query: str) -> bool:
    """Whether the message asks for advice or a suggestion rather than a stored detail (the
    gate stays open for it)."""
    return _REQUEST.search(query) is not None
