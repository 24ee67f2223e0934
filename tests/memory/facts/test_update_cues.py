"""Knowledge-update cues (memory/facts/updates.py and the change rules): the five kinds of
update issue 16 names (moved, new job, new dose, new date, new plan), in phrasings written for
this test, each keyed so that the next change supersedes it; and near misses that only mention
a place, a job, a dose or a date and must capture nothing."""

import pytest

from memory.facts.capture import capture_facts
from memory.facts.rules import apply_captures
from memory.store import fact_rows
from memory.store.store import Store

NOW = 1_715_558_400.0

CURRENT = [
    # moved / lives in: the destination, also when the sentence names the old place first
    ("We finally moved from Leeds to York last month.", "home_city", "York"),
    ("We've moved out of Clapham, we're in Brixton now.", "home_city", "Brixton"),
    ("Update on the house hunt: we're now in Frome, the move went fine.", "home_city", "Frome"),
    ("The new flat is in Hackney, right by the canal.", "home_city", "Hackney"),
    ("Left the old place on Mill Road, our new house is in Didsbury.", "home_city", "Didsbury"),
    ("I've moved into a tiny flat in Leith with two friends.", "home_city", "Leith"),
    ("We've settled in Galway now and the kids love it.", "home_city", "Galway"),
    # works at / new job
    ("I'm no longer at Deloitte, I'm at KPMG now.", "employer", "KPMG"),
    ("I've switched jobs, I'm now at Shopify on the payments team.", "employer", "Shopify"),
    ("I left Google in March and now I work at Anthropic.", "employer", "Anthropic"),
    ("My new employer is Siemens, they make trains.", "employer", "Siemens"),
    (
        "I'm stepping down as head of year, it was too much.",
        "role:head_of_year",
        "stepping down as head of year",
    ),
    (
        "I resigned as treasurer of the club last week.",
        "role:treasurer_of_the_club",
        "resigned as treasurer of the club",
    ),
    ("Home is now Bristol, and the commute is brutal.", "home_city", "Bristol"),
    ("We're renting in Kentish Town now while we look.", "home_city", "Kentish Town"),
    ("I've taken a job at Ocado, starting in June.", "employer", "Ocado"),
    # dose
    (
        "My metformin went up to 1000 mg after the last blood test.",
        "medication:metformin",
        "metformin 1000 mg",
    ),
    (
        "The GP increased my levothyroxine to 100 mcg.",
        "medication:levothyroxine",
        "levothyroxine 100 mcg",
    ),
    # rescheduled date
    ("The wedding is now on the 3rd of October.", "current:wedding", "the 3rd of October"),
    ("The wedding's been moved to October 3rd.", "current:wedding", "October 3rd"),
    ("Our launch date is now 4 March, marketing wasn't ready.", "current:launch_date", "4 March"),
    ("The conference has been rescheduled for 12 May.", "current:conference", "12 May"),
    ("The party's now on Saturday the 9th.", "current:party", "Saturday the 9th"),
    ("The wedding has moved to 5 July, the venue flooded.", "current:wedding", "5 July"),
    ("We've rebooked the holiday for August.", "current:holiday", "August"),
    ("New date for the launch: 3 May.", "current:launch", "3 May"),
    ("The wedding is now in late May.", "current:wedding", "late May"),
    (
        "We went with Skyline for the kitchen, the other quote was silly.",
        "current:kitchen",
        "Skyline",
    ),
    # new plan: where a thing is now, who provides it, where the trip goes, the plan itself
    ("Change of plan, we're going to Lisbon instead of Porto.", "current:destination", "Lisbon"),
    ("The plan is now to rent in Bath for a year.", "current:plan", "to rent in Bath for a year"),
    ("Our new plan is to sell the van in spring.", "current:plan", "to sell the van in spring"),
    ("Our office is now in Leeds, the lease in Bradford ran out.", "current:office_place", "Leeds"),
    ("We switched to Octopus for our electricity.", "current:electricity", "Octopus"),
    (
        "We stopped using Riverford, all our veg comes from Abel & Cole now.",
        "current:veg_source",
        "Abel & Cole",
    ),
]


@pytest.mark.parametrize(("text", "key", "value"), CURRENT)
def test_an_update_captures_the_current_value(text, key, value):
    assert ("set", key, value) in [(c.op, c.key, c.value) for c in capture_facts(text)]


def test_an_unnamed_dose_change_is_captured_for_the_one_medication():
    for text in (
        "They upped my dose to 75 mg.",
        "The GP put my dose up to 75 mg.",
        "The consultant has upped the dose to 75 mg.",
        "My dose went up to 75 mg last week.",
    ):
        assert [(c.key, c.value) for c in capture_facts(text)] == [("medication:unnamed", "75 mg")]


NEAR_MISSES = [
    # places and trips
    "I'm in Leeds now, just got off the train.",
    "My friend moved from Paris to Berlin.",
    "My sister moved to Leeds.",
    "We tried a new place for dinner, I'm in Soho now.",
    "My sister has moved to 5 July.",
    "The new flat is lovely.",
    "The new place is in a terrible state.",
    "We're now in a good place.",
    "I'm no longer at home, I'm at the airport now.",
    "The train is now at Platform 4.",
    # jobs of others, past jobs, idioms
    "My brother works at KPMG now.",
    "I used to work at Deloitte.",
    "I'm now at a loss.",
    "I stepped down from the ladder.",
    "I quit as a matter of principle.",
    "I've taken a job at the weekend market.",
    "We went with the flow for the whole trip.",
    "We're going to the pub instead.",
    "The plan is to meet at six.",
    "The new plan is to do it tomorrow.",
    # one-off events, states that are not a value, secrets
    "The meeting is now on Friday.",
    "The kitchen is now spotless.",
    "My password is now hunter22.",
    "My sister's wedding is now on the 3rd of May.",
    "We moved the kids to a new school.",
    "We've moved my mum to a care home.",
    # descriptions, not changes
    "My coffee comes from Kenya.",
    "I switched to decaf for my health.",
]


@pytest.mark.parametrize("text", NEAR_MISSES)
def test_a_mention_that_is_no_update_captures_nothing(text):
    assert capture_facts(text) == []


def test_a_later_update_supersedes_the_earlier_value(tmp_path):
    store = Store(tmp_path / "moim.db")
    said = [
        "The new flat is in Hackney.",
        "We've moved out of Hackney, we're in Walthamstow now.",
        "The wedding is now on the 3rd of October.",
        "The wedding's been moved to the 9th of November.",
    ]
    for n, text in enumerate(said):
        apply_captures(store, "ann", capture_facts(text), None, NOW + n)

    home = fact_rows.fact_history(store, "ann", "home_city")
    wedding = fact_rows.fact_history(store, "ann", "current:wedding")
    assert [(f.value, f.status) for f in home] == [
        ("Hackney", "superseded"),
        ("Walthamstow", "active"),
    ]
    assert [(f.value, f.status) for f in wedding] == [
        ("the 3rd of October", "superseded"),
        ("the 9th of November", "active"),
    ]
