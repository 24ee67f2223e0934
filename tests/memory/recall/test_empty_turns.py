"""memory/recall/empty_turns.py: which turns say nothing (acknowledgements, thanks, emoji)."""

import pytest

from memory.recall.empty_turns import says_nothing


@pytest.mark.parametrize(
    "text",
    [
        "thanks!",
        "ok great",
        "sounds good",
        "haha",
        "👍",
        ";)",
        "No problem!",
        "Thank you so much, really appreciate it!",
        "You're welcome!",
    ],
)
def test_an_acknowledgement_says_nothing(text):
    assert says_nothing(text)


@pytest.mark.parametrize(
    "text",
    [
        "No.",
        "Yes!",  # the answer to the turn before it, which it was found by
        "haha yes",
        "Agreed!",
        "Sure, exactly right.",
        "Bye Joanna!",
        "ok 3pm",
        "yes, vegan",
        "Thanks, I moved to Leeds",
        "thanks " + "so much " * 20 + "for the help with the Porto booking",
    ],
)
def test_a_turn_with_any_content_says_something(text):
    assert not says_nothing(text)


def test_a_long_turn_is_content_whatever_its_words():
    assert not says_nothing("thanks, " * 20)
