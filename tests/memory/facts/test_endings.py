"""Facts that end (memory/facts/endings.py): "I quit my job at St Mary's", "my cat died", "we
sold the car" archive the fact they end, and nothing else does: someone else's ending, a wish,
a hypothetical or a habit quit forgets nothing. Phrasings written for this test."""

import pytest

from memory.facts.capture import capture_facts
from memory.facts.rules import apply_captures
from memory.store import fact_rows
from memory.store.store import Store

NOW = 1_715_558_400.0


def _active(store: Store, user: str) -> dict[str, str]:
    return {f.key: f.value for f in fact_rows.active_facts(store, user, NOW + 600)}


def _say(store: Store, user: str, *texts: str) -> None:
    for n, text in enumerate(texts):
        apply_captures(store, user, capture_facts(text), None, NOW + 60 * n)


ENDS_THE_JOB = [
    "I quit my job at St Mary's.",
    "I left nursing last year.",
    "I've retired!",
    "I was made redundant in March.",
    "I got laid off last week.",
    "I just lost my job.",
]


@pytest.mark.parametrize("text", ENDS_THE_JOB)
def test_a_job_that_ended_is_no_longer_on_file(tmp_path, text):
    store = Store(tmp_path / "moim.db")
    _say(store, "ann", "I work as a nurse at St Mary's.", text)
    active = _active(store, "ann")
    assert "job_title" not in active
    assert "employer" not in active or text == "I left nursing last year."


KEEPS_THE_JOB = [
    "My sister quit her job.",
    "I almost quit my job today.",
    "I want to quit my job.",
    "If I quit my job I'd travel.",
    "I quit sugar in January.",
    "I quit smoking last year.",
    "I left teaching years ago.",  # another field than the one on file
    "I left Guy's in 2019.",  # another employer than the one on file
    "My brother was made redundant.",
    "Should I quit my job?",
]


@pytest.mark.parametrize("text", KEEPS_THE_JOB)
def test_no_ending_of_the_users_job_keeps_it(tmp_path, text):
    store = Store(tmp_path / "moim.db")
    _say(store, "ann", "I work as a nurse at St Mary's.", text)
    assert _active(store, "ann") == {"job_title": "nurse", "employer": "St Mary's"}


def test_the_ended_job_stays_in_history_archived(tmp_path):
    store = Store(tmp_path / "moim.db")
    _say(store, "ann", "I work as a nurse at St Mary's.", "I quit my job at St Mary's.")
    history = fact_rows.fact_history(store, "ann", "employer")
    assert [(f.value, f.status) for f in history] == [("St Mary's", "archived")]


@pytest.mark.parametrize(
    "text", ["My cat died last week.", "We had to put Rufus down.", "Our cat Rufus passed away."]
)
def test_a_pet_that_died_is_no_longer_on_file(tmp_path, text):
    store = Store(tmp_path / "moim.db")
    _say(store, "ann", "I have a cat called Rufus.", "I have a dog called Pip.", text)
    assert _active(store, "ann") == {"pet:pip": "dog named Pip"}


def test_a_pet_said_by_its_kind_alone_is_forgotten_only_when_it_is_the_one_of_that_kind(
    tmp_path,
):
    store = Store(tmp_path / "moim.db")
    _say(store, "ann", "I have two cats named Salt and Pepper.", "My cat died.")
    assert set(_active(store, "ann")) == {"pet:salt", "pet:pepper"}  # which one?


@pytest.mark.parametrize(
    "text", ["My neighbour's cat died.", "He died in 1990.", "I put the baby down for a nap."]
)
def test_no_death_of_the_users_pet_keeps_it(tmp_path, text):
    store = Store(tmp_path / "moim.db")
    _say(store, "ann", "I have a cat called Rufus.", text)
    assert _active(store, "ann") == {"pet:rufus": "cat named Rufus"}


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("We sold the car.", False),
        ("My car was written off last month.", False),
        ("I'm thinking of selling the car.", True),
        ("My dad sold his car.", True),
    ],
)
def test_a_car_sold_is_no_longer_on_file(tmp_path, text, kept):
    store = Store(tmp_path / "moim.db")
    _say(store, "ann", "My car is a Fiat 500 now.", text)
    assert ("current:car" in _active(store, "ann")) is kept


@pytest.mark.parametrize(
    "text",
    [
        "I'm a terrible cook.",
        "I'm a beta tester for their app.",
        "I'm a keen gardener.",
        "I'm an amateur photographer.",
        "I'm a decent swimmer.",
    ],
)
def test_a_judgement_before_the_noun_is_no_job_title(text):
    assert [c for c in capture_facts(text) if c.key == "job_title"] == []


def test_a_job_title_is_still_a_job_title():
    assert [(c.key, c.value) for c in capture_facts("I'm a staff nurse at Guy's.")][0] == (
        "job_title",
        "staff nurse",
    )
