"""Changes said in passing that capture used to lose (docs/recall-quality.md, "Eleventh pass"):
a change before a report that goes on with what was said ("…, Dr Okafor said halve it"), a
value said before "now" ("the deadline is March 2027 now"), an amount with a thousands comma,
a new dose a prescriber advised, a name in a role it newly holds ("Dev … is our acting
manager"), and a home said as its keys or "a studio on the Barbican". Each was lost on a
memsuite tuning split (the update's current value missing from the block's facts); a report,
a question, a first mention or a stay is still no fact."""

import pytest

from memory.facts.capture import capture_facts
from memory.facts.rules import apply_captures
from memory.store import fact_rows
from memory.store.store import Store

NOW = 1_715_558_400.0


def facts(text: str) -> list[tuple[str, str, str]]:
    return [(c.op, c.key, c.value) for c in capture_facts(text)]


@pytest.mark.parametrize(
    ("text", "key", "value"),
    [
        (
            "Quick update on the dog, Pip's Apoquel went from 16 mg to 8 mg a day, Dr Okafor said"
            " halve it since the itching settled over Christmas.",
            "current:pip_s_apoquel",
            "8 mg a day",
        ),
        ("I moved to Leeds, which my mum said was brave.", "home_city", "Leeds"),
        (
            "My funding extension came through so the submission deadline is March 2027 now.",
            "current:submission_deadline",
            "March 2027",
        ),
        ("Our rent is 1,050 a month now, which hurts.", "current:rent", "1,050 a month"),
        ("Our rent is now 1,050.", "current:rent", "1,050"),
        (
            "The GP suggested I drop the melatonin to 1 mg and take it an hour before I want to"
            " sleep.",
            "medication:melatonin",
            "melatonin 1 mg",
        ),
        (
            "My doctor recommended that I raise my sertraline to 100 mg.",
            "medication:sertraline",
            "sertraline 100 mg",
        ),
        (
            "Bev has gone on a year's secondment, so Dev from the assessment team is our acting"
            " manager.",
            "person:manager",
            "Dev",
        ),
        (
            "So Lina is going to be head chef at Clifton instead, she's thrilled.",
            "person:head_chef",
            "Lina",
        ),
        ("Ana is our new drummer.", "person:drummer", "Ana"),
        (
            "Claire had a little boy last week. Mark, our Year 5 teacher, is acting deputy until"
            " she's back next April.",
            "person:deputy",
            "Mark",
        ),
        (
            "Since we got the keys to the house in Drumcondra the boys have their own room.",
            "home_city",
            "Drumcondra",
        ),
        (
            "I was in the Mutley flat but I've got a studio on the Barbican now.",
            "home_city",
            "the Barbican",
        ),
        ("Tom is now our coach.", "person:coach", "Tom"),
    ],
)
def test_a_change_said_in_passing_captures_the_current_value(text, key, value):
    assert ("set", key, value) in facts(text)


@pytest.mark.parametrize(
    "text",
    [
        "I moved to Paris, she said.",
        "I live in Leeds, she told me.",
        "I live in Leeds, he said so.",
        "My name is Bob, my friend said jokingly.",
        "I moved to Berlin, according to my boss.",
        "my friend said my name is Bob",
        "You told me last time that I live in Leeds, that's wrong.",
        "My son is 5 now.",
        "The kids are at school now.",
        "The plan is to go now.",
        "Should I drop the melatonin to 1 mg?",
        "The GP suggested I drop the dose to 1 mg.",
        "Ana is our drummer.",  # a first mention, no change
        "Sam, my old friend, is our drummer.",
        "Sam is the new guy.",
        "Lisbon is our new home.",
        "Kevin is new here.",
        "Ana is a teacher instead.",
        "If Ana is our new drummer we'd be fine.",
        "Tom is the manager at Tesco, now he's moving.",
        "I've got a room on the top floor.",
        "We got the keys to the cottage in Cornwall for the week.",  # a stay
    ],
)
def test_a_report_a_question_or_a_person_still_captures_nothing(text):
    assert facts(text) == []


def test_an_advised_dose_supersedes_the_one_before(tmp_path):
    store = Store(tmp_path / "moim.db")
    said = [
        "I'm on 3 mg of melatonin, I take it when we land.",
        "The GP suggested I drop the melatonin to 1 mg and take it an hour before I want to sleep.",
    ]
    for n, text in enumerate(said):
        apply_captures(store, "ann", capture_facts(text), None, NOW + n)

    history = fact_rows.fact_history(store, "ann", "medication:melatonin")
    assert [(f.value, f.status) for f in history] == [
        ("melatonin 3 mg", "superseded"),
        ("melatonin 1 mg", "active"),
    ]
