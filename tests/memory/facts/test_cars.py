"""A car the user has now, said by its make (memory/facts/cars.py): a newer turn that names the
old car first ("the old Astra died, so we've bought a Skoda Fabia") still captures the new one
as `current:car`. Phrasings written for this test, not taken from the suites."""

import pytest

from memory.facts.capture import capture_facts
from memory.facts.rules import apply_captures
from memory.store import fact_rows
from memory.store.store import Store

NOW = 1_715_558_400.0

CARS = [
    ("The old Astra finally died, so we've bought a second-hand Skoda Fabia.", "Skoda Fabia"),
    ("I'm in a leased Hyundai Kona now, which is lovely.", "Hyundai Kona"),
    ("We traded it in and now we've got a Toyota Corolla, five doors.", "Toyota Corolla"),
    ("My Clio was written off in March, I've just bought a used Mazda 2.", "Mazda 2"),
]


@pytest.mark.parametrize(("text", "car"), CARS)
def test_a_car_said_by_its_make_is_the_current_car(text, car):
    assert [(c.key, c.value) for c in capture_facts(text)] == [("current:car", car)]


NOT_CARS = [
    "I got a Ford Fiesta for my daughter now she's passed her test.",  # someone else's
    "We might get a Tesla Model 3 now that the prices dropped.",  # a plan
    "We're thinking about a Kia now the Astra is on its last legs.",  # a wish
    "We got a Honda lawnmower now, the old one died.",  # a make, not a car
    "We hired a Fiat 500 in Sicily, the old one at home died.",  # hired
    "We've bought a Toyota Yaris.",  # nothing says it replaced one or is the car now
    "Have you got a Volvo now?",  # a question
]


@pytest.mark.parametrize("text", NOT_CARS)
def test_a_make_that_is_no_car_of_the_users_now_captures_nothing(text):
    assert [c for c in capture_facts(text) if c.key == "current:car"] == []


def test_the_new_car_supersedes_the_one_said_before(tmp_path):
    store = Store(tmp_path / "moim.db")
    apply_captures(store, "ann", capture_facts("My new car is a Vauxhall Astra."), None, NOW)
    said = "The old Astra finally died, so we've bought a Skoda Fabia."
    apply_captures(store, "ann", capture_facts(said), None, NOW + 60)
    history = fact_rows.fact_history(store, "ann", "current:car")
    assert [(f.value, f.status) for f in history] == [
        ("Vauxhall Astra", "superseded"),
        ("Skoda Fabia", "active"),
    ]
