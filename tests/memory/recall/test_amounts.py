"""A question after money whose best kept turns say no sum (memory/recall/amounts.py): the
abstention gate closes for it, whatever the cosines say; a sum in one of them keeps it open."""

import subprocess
import sys

import pytest

from memory.recall.abstention import TOPIC_SIZE, nothing_stands_out
from memory.recall.amounts import AMOUNT_HITS, asks_for_money, no_sum_given, says_a_sum
from memory.records import Chunk, Hit

CAR = [
    "We picked up the electric car on Saturday, a white Kia Niro, and the kids love it.",
    "Charging at home overnight is so easy, the wallbox went in last week.",
    "The range is about 250 miles in summer, less when it's cold.",
    "My partner drives it to the station most days now.",
    "We sold the old diesel Astra to a neighbour.",
]


def hit(text, cosine=0.6, n=1):
    return Hit(Chunk(n, n, "u", "s", "user", None, text, 0.0), 1.0, cosine, n, None)


def hits(texts, cosine=0.6):
    return [hit(t, cosine, n) for n, t in enumerate(texts, 1)]


@pytest.mark.parametrize(
    "question",
    [
        "How much did the electric car cost?",
        "How much is the monthly mortgage on our house?",
        "What's Ruaridh's salary in the new job?",
        "How much do I charge for a full service?",
        "What do I charge for a jar of honey?",
        "What's my shop's yearly turnover?",
        "How much rent do we pay?",
        "What was the price of the flat?",
    ],
)
def test_a_question_after_money_asks_for_a_sum(question):
    assert asks_for_money(question)


@pytest.mark.parametrize(
    "question",
    [
        "How much honey did I harvest?",  # a quantity, not money
        "How many pups did we count this season?",
        "What do I use to charge the car?",  # charge, but no sum asked
        "How much sleep am I getting?",
        "Where did I buy the car?",
        "What's the bank account I pay rent to?",  # an account, not a sum
        "What did Leo get for his birthday?",
    ],
)
def test_other_questions_do_not(question):
    assert not asks_for_money(question)


@pytest.mark.parametrize(
    "said",
    [
        "it's £329 a month all in",
        "the round closed at 520k in the end",
        "my budget for the year is 40 thousand",
        "my grocery budget is about 70 a week",
        "they put prices up 20 percent",
        "a plumber quoted 3,200 for the boiler",
        "the rate is now 31.40 a UDA",
        "it cost us two grand",
        "Canyon Endurace, for 1,100 euros",
        "I charge $45 per hour",
    ],
)
def test_sums_are_seen(said):
    assert says_a_sum(said)


@pytest.mark.parametrize(
    "said",
    [
        "The range is about 250 miles in summer.",
        "I have three hives and 32 GB of RAM.",
        "We moved in 2019 and the kids were 4 and 7.",
        "The course runs for 6 weeks.",
    ],
)
def test_other_numbers_are_no_sum(said):
    assert not says_a_sum(said)


def test_no_sum_in_the_best_turns_closes_a_money_question():
    question = "How much did the electric car cost?"
    assert no_sum_given(question, hits(CAR))
    assert not no_sum_given("What colour is the electric car?", hits(CAR))  # asks no sum


def test_a_sum_among_the_best_few_keeps_it_open_but_not_past_them():
    question = "How much did the electric car cost?"
    paid = "In the end we paid 31,000 for it after the grant."
    assert not no_sum_given(question, hits([*CAR[: AMOUNT_HITS - 1], paid]))
    assert no_sum_given(question, hits([*CAR, paid]))  # sixth: not read


def test_the_gate_closes_whatever_the_cosines_and_stays_open_on_a_sum():
    """Cosines the learned gate lets through (0.8 the best of ten): the rule closes it."""
    question = "How much did the electric car cost?"
    many = hits(CAR * 2, 0.8)
    assert not nothing_stands_out("What colour is the car?", TOPIC_SIZE, many, 3.0, 0.0, 0.48)
    assert nothing_stands_out(question, TOPIC_SIZE, many, 3.0, 0.0, 0.48)
    priced = hits(["We paid £31,000 for the Kia Niro.", *CAR], 0.8)
    assert not nothing_stands_out(question, TOPIC_SIZE, priced, 3.0, 0.0, 0.48)


def test_a_small_store_a_request_or_the_gate_off_are_left_alone():
    many = hits(CAR * 2, 0.8)
    assert not nothing_stands_out("How much did the car cost?", TOPIC_SIZE - 1, many, 3, 0, 0.48)
    asked = "How much should I spend on a car?"  # a request for advice
    assert not nothing_stands_out(asked, TOPIC_SIZE, many, 3.0, 0.0, 0.48)
    assert not nothing_stands_out("How much did the car cost?", TOPIC_SIZE, many, 3.0, 0.0, 0.0)


@pytest.mark.parametrize(
    "call",
    [
        "asks_for_money('how much 1,' * 12000)",  # 132 kB: 1.4 s at 16 kB before (review29)
        "says_a_sum('1.' * 20000)",  # a run of dotted digits: 8.8 s at 16 kB before
    ],
)
def test_a_long_question_or_turn_is_read_in_linear_time(call):
    """A search from each "how much" to the question's end, and a number read again from
    each of its digits, cost the square of the text. The deadline only catches a return to
    quadratic time (a process of its own: a regex holds the GIL)."""
    code = f"from memory.recall.amounts import asks_for_money, says_a_sum\n{call}\n"
    try:
        subprocess.run([sys.executable, "-c", code], check=True, timeout=15)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{call} took more than 15 s: quadratic again")
