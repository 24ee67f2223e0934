"""A when-question and a kept turn giving a date beside its words (memory/recall/dates_given.py):
the abstention gate stays open."""

import pytest

from memory.recall.dates_given import asks_when, gives_the_date
from memory.records import Chunk, Hit

BOYS = (
    "Hi, stay-at-home dad here, twin boys Cian and Oisín, born on 3 February last year so just "
    "turned one. I used to be a quantity surveyor before the twins."
)


def hit(text, cosine=0.25, n=1):
    return Hit(Chunk(n, n, "u", "s", "user", None, text, 0.0), 1.0, cosine, n, None)


def test_which_questions_ask_when():
    assert asks_when("When were my boys born?")
    assert asks_when("What year did I join the hotel?")
    assert asks_when("Since when have I kept bees?")
    assert not asks_when("Where were my boys born?")
    assert not asks_when("What did I do when the van broke down?")


@pytest.mark.parametrize(
    ("question", "said"),
    [
        ("When were my boys born?", BOYS),
        ("What year did I join the hotel?", "I'm on nights now, I started at the hotel in 2022."),
        ("When did we move to the new agency?", "We moved to the new agency last month."),
        ("When did I take up running?", "I took up running about three years ago, after Mum."),
        ("When did I start the business?", "I set the business up on my own in March 2017."),
    ],
)
def test_a_date_beside_the_questions_words_answers_when(question, said):
    assert gives_the_date(question, [hit(said)])


@pytest.mark.parametrize(
    "said",
    [
        "My boys are full of energy, the house is chaos.",  # no date
        "The boys were at nursery on Tuesday, so I got some sleep.",  # a weekday
        "The boys love the park. In 2022 we went to Cork for a wedding, a long drive.",
        "We may take the boys to the coast for a week.",  # 'may' is no month
        "My boys are loud. "
        + "The neighbours complain all the time about everything. " * 3
        + "Anyway in 2019 I changed jobs.",  # another sentence
    ],
)
def test_no_date_beside_the_questions_words_does_not(said):
    assert not gives_the_date("When were my boys born?", [hit(said)])


def test_only_the_three_best_hits_are_read():
    others = [hit("Nothing about that here.", n=n) for n in range(1, 4)]
    assert not gives_the_date("When were my boys born?", [*others, hit(BOYS, n=4)])
    assert gives_the_date("When were my boys born?", [*others[:2], hit(BOYS, n=4)])
