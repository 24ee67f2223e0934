"""A where-question and a kept turn naming a place beside its words (memory/recall/places.py),
a question asking for a name and a kept turn giving the user's one by name
(memory/recall/names.py): the abstention gate stays open for both."""

import pytest

from memory.recall.abstention import TOPIC_SIZE, nothing_stands_out
from memory.recall.names import asks_a_name, gives_the_name
from memory.recall.places import asks_where, gives_the_place
from memory.records import Chunk, Hit

OFFICE = (
    "I'm the IT manager at a homelessness charity in Glasgow, about ninety staff across four "
    "hostels and a head office on Argyle Street, and I'm basically a team of one."
)
DEPARTMENT = (
    "Marking is endless this term, and my head of department, Farid, wants the Year 11 mocks "
    "back by Friday."
)


def hit(text, cosine=0.25, n=1):
    return Hit(Chunk(n, n, "u", "s", "user", None, text, 0.0), 1.0, cosine, n, None)


def test_which_questions_ask_where_and_for_a_name():
    assert asks_where("Where is the main office?")
    assert not asks_where("What is the office like?")
    assert asks_a_name("Who is my head of department?")
    assert asks_a_name("What is my partner's name?")
    assert not asks_a_name("What does my partner do?")


@pytest.mark.parametrize(
    ("question", "said"),
    [
        ("Where is the main office?", OFFICE),
        ("Where is our office?", "So we took a small office above a bike shop on Oldham Street."),
        (
            "Where did my old flatmate go?",
            "My old flatmate moved in with her boyfriend in Nottingham.",
        ),
    ],
)
def test_a_place_beside_the_questions_words_answers_where(question, said):
    assert gives_the_place(question, [hit(said)])


@pytest.mark.parametrize(
    "said",
    [
        "The office is a bit cramped but the coffee is good.",  # no place named
        "We recorded the demo in June, the office was closed.",  # a month, not a place
        "Our office is fine. Anyway, I was in Leeds at the weekend for my cousin's wedding.",
        "The office has a new printer, which took the whole of Monday to set up properly, "
        "and after that I drove out to see my sister in Harrogate.",  # too far from 'office'
    ],
)
def test_no_place_beside_the_questions_words_does_not(said):
    assert not gives_the_place("Where is the main office?", [hit(said)])


def test_only_a_where_question_reads_places():
    assert not gives_the_place("What is the main office like?", [hit(OFFICE)])


@pytest.mark.parametrize(
    ("question", "said"),
    [
        ("Who is my head of department?", DEPARTMENT),
        ("What is my partner's name?", "I'm going with my partner Olu to Lisbon in May."),
        ("What's my accountant called?", "Our accountant, Priya, says the return is fine."),
    ],
)
def test_the_users_one_by_name_gives_the_name(question, said):
    assert gives_the_name(question, [hit(said)])


@pytest.mark.parametrize(
    ("question", "said"),
    [
        ("What's the name of my accountant?", "My accountant says I owe less than I thought."),
        ("What's the name of the school where I teach?", "I teach Newton's laws to Year 9."),
        ("Who is my mortgage lender?", "Ugh, Parkside has been useless about the mortgage."),
        ("What does my partner do?", "I'm going with my partner Olu to Lisbon in May."),
    ],
)
def test_a_turn_that_names_no_one_asked_after_does_not(question, said):
    assert not gives_the_name(question, [hit(said)])


def test_the_gate_stays_open_for_a_place_or_a_name_at_a_weak_cosine():
    """A lone kept hit with a weak cosine: the learned gate alone withholds it."""
    where = "Where is the main office?"
    assert not nothing_stands_out(where, TOPIC_SIZE, [hit(OFFICE)], 3.0, 0.0, 0.52)
    nowhere = hit(OFFICE.replace(" on Argyle Street", ""))
    assert nothing_stands_out(where, TOPIC_SIZE, [nowhere], 3.0, 0.0, 0.52)
    who = "Who is my head of department?"
    assert not nothing_stands_out(who, TOPIC_SIZE, [hit(DEPARTMENT)], 3.0, 0.0, 0.52)
    nameless = hit(DEPARTMENT.replace(", Farid,", ""))
    assert nothing_stands_out(who, TOPIC_SIZE, [nameless], 3.0, 0.0, 0.52)
