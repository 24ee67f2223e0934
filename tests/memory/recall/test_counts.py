"""A question that asks how many of a thing, and the kept turn that says the count
(memory/recall/counts.py): the abstention gate stays open for it."""

import pytest

from memory.recall.abstention import TOPIC_SIZE, nothing_stands_out
from memory.recall.counts import counted_thing, gives_the_count
from memory.records import Chunk, Hit

BEES = (
    "Busy summer! After the split and the swarm I caught from the neighbour's chimney I'm at "
    "seven colonies, which is more than I meant to have."
)


def hit(text, cosine=0.38, n=1):
    return Hit(Chunk(n, n, "u", "s", "user", None, text, 0.0), 1.0, cosine, n, None)


@pytest.mark.parametrize(
    ("question", "things"),
    [
        ("How many colonies do I have?", {"coloni"}),
        ("How many bumblebee species did we record?", {"bumblebe", "speci"}),
        ("how many guests are coming?", {"guest"}),
        ("How many do I have left?", set()),
        ("What colonies do I have?", set()),
    ],
)
def test_the_thing_a_question_counts(question, things):
    assert counted_thing(question) == things


@pytest.mark.parametrize(
    "said",
    [BEES, "We ended up with 12 of the sites in the survey.", "Eight guests on Saturday."],
)
def test_a_number_before_the_thing_counted_gives_the_count(said):
    asked = {BEES: "How many colonies do I have?"}.get(said)
    asked = asked or ("How many sites?" if "sites" in said else "How many guests are coming?")
    assert gives_the_count(asked, [hit(said)])


@pytest.mark.parametrize(
    "said",
    [
        "The colonies came through the winter well.",  # no number
        "I inspected two hives and the colonies looked strong.",  # a number of something else
        "Seven of us went to the bee club meeting about colonies in general.",
    ],
)
def test_a_turn_that_does_not_count_the_thing_does_not(said):
    assert not gives_the_count("How many colonies do I have?", [hit(said)])


@pytest.mark.parametrize(
    ("question", "said"),
    [
        ("How many books in total did I read this year?", "I spent 3 hours in the garden."),
        ("How many kids my sister has?", "I met two of my old friends for lunch."),
        ("How many countries I visited?", "I slept 8 hours, I think."),
        ("How many cats the neighbours have?", "We walked two miles along the river."),
    ],
)
def test_a_word_after_the_thing_that_names_nothing_counts_nothing(question, said):
    """The word after the thing may be no thing at all ("in", "my", "I", "the"): a number
    before it in a kept turn says no count of what the question asks."""
    assert not gives_the_count(question, [hit(said)])


def test_the_gate_stays_open_for_a_count_said_at_a_weak_cosine():
    """A lone kept hit with a weak cosine: the learned gate alone withholds it."""
    asked = "How many colonies do I have?"
    assert not nothing_stands_out(asked, TOPIC_SIZE, [hit(BEES, 0.3)], 3.0, 0.0, 0.52)
    other = hit(BEES.replace("seven colonies", "a busy apiary"), 0.3)
    assert nothing_stands_out(asked, TOPIC_SIZE, [other], 3.0, 0.0, 0.52)
