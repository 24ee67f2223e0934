"""Standing-state and old-value-first update cues (memory/facts/shifts.py, and the change rules
of memory/facts/changes.py read with a third person's possessive or 'both / all'): a hire, a job
taken, the home and the premises now, an appointment ('I'll be …'), and a change whose turn
names the old value first. Phrasings written for this test; near misses that name a role, a
home, an office or an amount without saying the user's standing state changed must capture
nothing."""

import pytest

from memory.facts.capture import capture_facts
from memory.facts.rules import apply_captures
from memory.store import fact_rows
from memory.store.store import Store

NOW = 1_715_558_400.0

CURRENT = [
    # a third person's possessive subject: the old amount first, the new one kept
    (
        "Biscuit's Vetmedin went from 2.5 mg to 5 mg twice a day.",
        "current:biscuit_s_vetmedin",
        "5 mg twice a day",
    ),
    ("Dad's rent went up from 700 to 760 a month.", "current:dad_s_rent", "760 a month"),
    ("Ollie's pocket money has gone up to 8 a week.", "current:ollie_s_pocket_money", "8 a week"),
    # both / all of a thing moved to a new name, also after another clause and 'and'
    ("We moved all our savings to Chip.", "current:savings", "Chip"),
    ("I've switched both cars to Admiral for the insurance.", "current:cars", "Admiral"),
    ("I cancelled the contract and moved both phones to Smarty.", "current:phones", "Smarty"),
    # a hire: the role's holder is new
    (
        "We've finally hired a head chef to replace Marco, Lena Vogt.",
        "person:head_chef",
        "Lena Vogt",
    ),
    ("We brought in Priya Nair as our new designer.", "person:designer", "Priya Nair"),
    ("Then Dr Haldane agreed to take me on as my supervisor.", "person:supervisor", "Dr Haldane"),
    # a job taken, by its title
    ("I've taken a new role as a product manager at Deliveroo.", "job_title", "product manager"),
    ("Started a new job as a pharmacist at the hospital, it's intense.", "job_title", "pharmacist"),
    ("From next month I'll be deputy head of science.", "job_title", "deputy head of science"),
    # the home now, said as where the user is
    ("I'm now renting a room in Gorgie with a friend from uni.", "home_city", "Gorgie"),
    ("We've been in the new bungalow in Morpeth since May.", "home_city", "Morpeth"),
    ("I've found a room in a shared house in Roath for September.", "home_city", "Roath"),
    # the premises now
    (
        "We've rented a small office above the bakery on Jamaica Street.",
        "current:office",
        "Jamaica Street",
    ),
    ("We moved into a bigger workshop in Hockley over the summer.", "current:workshop", "Hockley"),
]


@pytest.mark.parametrize(("text", "key", "value"), CURRENT)
def test_a_standing_update_is_kept_as_the_current_value(text, key, value):
    got = {(c.key, c.value) for c in capture_facts(text) if c.op == "set"}
    assert (key, value) in got


NEAR_MISSES = [
    # no amount, a pronoun owner, a figure of speech
    "Sam's cooking went from bad to worse.",
    "It's gone up from 3 to 4 already.",
    "That's gone down to 2 now.",
    # furniture, boxes, meetings: moved about, never a standing value
    "We moved both beds to the spare room.",
    "I moved all the chairs to the garden.",
    "We moved both calls to Thursday.",
    # hires that name no person, someone else's hire, a thing hired
    "We hired a skip for the clear-out.",
    "We hired an electrician to rewire the kitchen.",
    "My boss hired a new assistant, Jen.",
    "They brought in a consultant, Mark, for the audit.",
    "She took me on as a favour.",
    # jobs that are no job title, others' jobs, wishes
    "I took a job as a favour to my aunt.",
    "My wife has started a new job as a nurse.",
    "I'd take a job as a chef in a heartbeat.",
    "I'll be a teacher one day.",
    "I'll be chef for the night.",
    "If they promote me I'll be head of sales.",
    "I'll be home late.",
    # stays, other people's homes
    "We're renting a villa in Crete for the week.",
    "I'm sharing a room in Prague with Tom on the trip.",
    "My cousin has been in the new flat in Hove since May.",
    "We've found a cottage in Devon for the holiday.",
    # an office visited, not taken
    "I took the printer to the office on Monday.",
    "We rented a van in Leeds.",
    "My sister rented a studio in Paris.",
]


@pytest.mark.parametrize("text", NEAR_MISSES)
def test_a_mention_that_is_no_standing_update_captures_nothing(text):
    assert capture_facts(text) == []


def test_a_later_hire_or_home_supersedes_the_earlier_one(tmp_path):
    store = Store(tmp_path / "moim.db")
    said = [
        "We hired a lead engineer, Tom Price.",
        "We brought in a lead engineer to replace Tom, Ada Okoye.",
        "I'm renting a flat in Leith with my partner.",
        "We've been in the new house in Portobello for a month now.",
    ]
    for n, text in enumerate(said):
        apply_captures(store, "ann", capture_facts(text), None, NOW + n)

    lead = fact_rows.fact_history(store, "ann", "person:lead_engineer")
    home = fact_rows.fact_history(store, "ann", "home_city")
    assert [(f.value, f.status) for f in lead] == [
        ("Tom Price", "superseded"),
        ("Ada Okoye", "active"),
    ]
    assert [(f.value, f.status) for f in home] == [
        ("Leith", "superseded"),
        ("Portobello", "active"),
    ]
