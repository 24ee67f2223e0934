"""A correction (memory/facts/corrections.py): "Actually it's Salford, not Manchester" writes
Salford on the user's fact that held Manchester, under that fact's key, and the old value is
kept as superseded. Phrasings written for this test, not taken from the suites; near misses
(a contrast that corrects nothing, someone else's place, a question, a hypothetical, a value no
fact holds) write nothing."""

import pytest

from memory.facts.capture import capture_facts
from memory.facts.rules import apply_captures
from memory.store import fact_rows
from memory.store.store import Store

NOW = 1_715_558_400.0

CORRECTIONS = [
    # (what was said first, the correction, the key, the value now)
    ("I live in Manchester.", "Actually it's Salford, not Manchester.", "home_city", "Salford"),
    ("I live in Manchester.", "not Manchester — Salford.", "home_city", "Salford"),
    ("I live in Manchester.", "Sorry, Salford, not Manchester!", "home_city", "Salford"),
    (
        "We moved the wedding to Tuesday the 12th of May.",
        "Sorry, I meant Thursday, not Tuesday.",
        "current:wedding",
        "Thursday the 12th of May",
    ),
    (
        "We moved the wedding to Tuesday the 12th of May.",
        "No wait, it's the 14th.",
        "current:wedding",
        "Tuesday the 14th of May",
    ),
    (
        "We're flying to Lisbon instead.",
        "I said Lisbon earlier but it's Porto.",
        "current:destination",
        "Porto",
    ),
    (
        "We're flying to Lisbon instead.",
        "When I said Lisbon I meant Porto.",
        "current:destination",
        "Porto",
    ),
    (
        "I'm on 10 mg of amlodipine.",
        "Correction: the dose is 20 mg.",
        "medication:amlodipine",
        "amlodipine 20 mg",
    ),
    (
        "I'm on 10 mg of amlodipine.",
        "Oops, make that 5 mg.",
        "medication:amlodipine",
        "amlodipine 5 mg",
    ),
    ("I work at Deloitte.", "My mistake, it's KPMG, not Deloitte.", "employer", "KPMG"),
    (
        "The physio is now on Tuesdays.",
        "Sorry, the physio is on Wednesdays, not Tuesdays.",
        "current:physio",
        "Wednesdays",
    ),
]


@pytest.mark.parametrize(("first", "fix", "key", "value"), CORRECTIONS)
def test_a_correction_supersedes_the_fact_that_held_the_old_value(tmp_path, first, fix, key, value):
    store = Store(tmp_path / "moim.db")
    apply_captures(store, "ann", capture_facts(first), None, NOW)
    apply_captures(store, "ann", capture_facts(fix), None, NOW + 60, (fix, first))
    history = fact_rows.fact_history(store, "ann", key)
    assert [f.status for f in history] == ["superseded", "active"]
    assert history[-1].value == value
    assert [f.key for f in fact_rows.active_facts(store, "ann", NOW + 60)] == [key]


def test_a_correction_in_the_same_message_wins(tmp_path):
    store = Store(tmp_path / "moim.db")
    said = "I live in Manchester. Sorry, I meant Salford, not Manchester."
    apply_captures(store, "ann", capture_facts(said), None, NOW)
    assert fact_rows.get_fact(store, "ann", "home_city").value == "Salford"


def test_a_correction_rewrites_the_fact_said_last_that_holds_the_old_value(tmp_path):
    store = Store(tmp_path / "moim.db")
    apply_captures(store, "ann", capture_facts("I work at Deloitte."), None, NOW)
    apply_captures(store, "ann", capture_facts("I live in Leeds."), None, NOW + 1)
    apply_captures(store, "ann", capture_facts("Actually it's York, not Leeds."), None, NOW + 2)
    active = {f.key: f.value for f in fact_rows.active_facts(store, "ann", NOW + 2)}
    assert active == {"employer": "Deloitte", "home_city": "York"}


def test_a_correction_rewrites_the_fact_whose_whole_value_it_names_first(tmp_path):
    """'not Manchester' is the city said as the whole value, not a later fact that merely
    holds the word ('Manchester Metropolitan University')."""
    store = Store(tmp_path / "moim.db")
    apply_captures(store, "ann", capture_facts("I live in Manchester."), None, NOW)
    said = "I work at Manchester Metropolitan University."
    apply_captures(store, "ann", capture_facts(said), None, NOW + 1)
    apply_captures(
        store, "ann", capture_facts("Actually it's Salford, not Manchester."), None, NOW + 2
    )
    active = {f.key: f.value for f in fact_rows.active_facts(store, "ann", NOW + 2)}
    assert active == {"employer": "Manchester Metropolitan University", "home_city": "Salford"}


NOT_CORRECTIONS = [
    # a contrast that corrects nothing said
    "It's a marathon, not a sprint.",
    "I want tea, not coffee.",
    "Not bad, thanks!",
    "Not yet, maybe next week.",
    "Actually it's 5 pm already.",
    "Sorry, it's the 14th today and I'm still behind.",
    # someone else's place, a question, a hypothetical
    "My brother lives in Salford, not Manchester.",
    "Actually she's in Salford now, not Manchester.",
    "Did I say Salford, not Manchester?",
    "If it's Salford, not Manchester, we'd need a new route.",
]


@pytest.mark.parametrize("text", NOT_CORRECTIONS)
def test_a_sentence_that_corrects_nothing_leaves_the_facts(tmp_path, text):
    store = Store(tmp_path / "moim.db")
    apply_captures(store, "ann", capture_facts("I live in Manchester."), None, NOW)
    apply_captures(store, "ann", capture_facts("We moved the wedding to the 12th."), None, NOW)
    before = {f.key: f.value for f in fact_rows.active_facts(store, "ann", NOW)}
    apply_captures(store, "ann", capture_facts(text), None, NOW + 60)
    assert {f.key: f.value for f in fact_rows.active_facts(store, "ann", NOW + 60)} == before


def test_a_correction_of_a_value_no_fact_holds_writes_nothing(tmp_path):
    store = Store(tmp_path / "moim.db")
    apply_captures(store, "ann", capture_facts("I live in Manchester."), None, NOW)
    apply_captures(store, "ann", capture_facts("Actually it's Porto, not Lisbon."), None, NOW + 1)
    active = fact_rows.active_facts(store, "ann", NOW + 1)
    assert [(f.key, f.value) for f in active] == [("home_city", "Manchester")]


def _doses(tmp_path, *said: str) -> Store:
    """A store where ann said each of `said`, in order (each with the one before it)."""
    store = Store(tmp_path / "moim.db")
    for at, (before, text) in enumerate(zip(("", *said), said, strict=False)):
        apply_captures(store, "ann", capture_facts(text), None, NOW + at, (text, before))
    return store


def _active(store: Store) -> dict[str, str]:
    return {f.key: f.value for f in fact_rows.active_facts(store, "ann", NOW + 60)}


def test_a_correction_by_kind_rewrites_the_fact_the_message_before_names(tmp_path):
    """Not the fact said last: the one the turn it follows is about."""
    store = _doses(
        tmp_path,
        "I'm on 50 mg of sertraline.",
        "I'm on 10 mg of amlodipine.",
        "The sertraline makes me sleepy, I take 50 mg in the morning.",
        "Correction: the dose is 100 mg.",
    )
    assert _active(store) == {
        "medication:sertraline": "sertraline 100 mg",
        "medication:amlodipine": "amlodipine 10 mg",
    }


def test_a_correction_by_kind_rewrites_the_fact_whose_old_value_its_message_names(tmp_path):
    store = _doses(
        tmp_path,
        "We moved the wedding to Tuesday the 12th of May.",
        "No wait, it's the 14th, the 12th is my cousin's christening.",
    )
    assert _active(store) == {"current:wedding": "Tuesday the 14th of May"}


def test_a_correction_by_kind_rewrites_the_fact_its_own_message_names(tmp_path):
    store = _doses(
        tmp_path,
        "I'm on 50 mg of sertraline.",
        "I'm on 10 mg of amlodipine.",
        "Oops, make that 100 mg of sertraline, I always forget they put it up.",
    )
    assert _active(store)["medication:sertraline"] == "sertraline 100 mg"
    assert _active(store)["medication:amlodipine"] == "amlodipine 10 mg"


HELD = {"medication:sertraline": "sertraline 50 mg"}


@pytest.mark.parametrize(
    "said",
    [
        # another thing's amount in the same message: that is what 'make that' corrects
        ("Rex is on carprofen now, 75 mg twice a day. Oops, make that 60 mg.",),
        # the message before names another thing only
        ("My dog Rex is on carprofen, 75 mg twice a day.", "Correction: the dose is 60 mg."),
        # it names the fact's subject and another amount: which one was corrected?
        ("My sertraline is 50 mg and Rex gets 75 mg of carprofen.", "Oops, make that 60 mg."),
        # it names nothing: a correction of the assistant's words, or of something not captured
        ("How much is too much?", "Correction: the dose is 60 mg."),
        # an amount in another unit
        ("I run 40 km a week on sertraline.", "Correction: it's 60 km."),
    ],
)
def test_a_correction_by_kind_leaves_a_fact_it_does_not_name(tmp_path, said):
    store = _doses(tmp_path, "I'm on 50 mg of sertraline.", *said)
    assert _active(store) == HELD


NAMED_THINGS = [
    # (what was said first and captured nothing, the correction, the key, the value now)
    (
        "The pottery classes run on Wednesday evenings at the studio.",
        "Oh, one correction, I said Wednesday earlier but it's Thursday evenings for the classes.",
        "current:classes",
        "Thursday evenings",
    ),
    (
        "I'll see the physio every week.",
        "Sorry, the physio is on Fridays, not Mondays.",
        "current:physio",
        "Fridays",
    ),
    ("We're off in June!", "Sorry, the trip is in May, not June.", "current:trip", "May"),
]


@pytest.mark.parametrize(("first", "fix", "key", "value"), NAMED_THINGS)
def test_a_correction_naming_its_thing_holds_the_new_value_when_no_fact_held_the_old(
    tmp_path, first, fix, key, value
):
    """The old value is in an earlier turn no rule captured: the thing the correction names
    holds the new value, so the block can lead with it."""
    store = _doses(tmp_path, first, fix)
    assert _active(store) == {key: value}


@pytest.mark.parametrize(
    "fix",
    [
        "I said yes earlier but it's too late for the tickets.",  # not a name, a date, an amount
        "Sorry, the thing is on Friday, not Monday.",  # no thing a user keeps the state of
        "My sister asked, I said Monday but it's Tuesday for the party.",  # someone else's
        "Actually it's Friday, not Monday.",  # no thing named, no fact held Monday
        "Correction: the party is on the 14th.",  # no old value: which of its dates?
    ],
)
def test_a_correction_that_names_no_kept_thing_writes_nothing_when_no_fact_held_the_old(
    tmp_path, fix
):
    store = _doses(tmp_path, "We'll talk about it on Monday.", fix)
    assert _active(store) == {}
