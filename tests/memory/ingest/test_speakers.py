"""A speaker label written into a turn's text counts as the turn's name."""

import pytest

from memory.ingest.speakers import split_speaker


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        (None, "Caroline: I went to a support group.", ("Caroline", "I went to a support group.")),
        (None, "Mary Ann: hi there", ("Mary Ann", "hi there")),
        ("Caroline", "Caroline: hi", ("Caroline", "Caroline: hi")),  # a given name wins
        (None, "Update: we moved to Lisbon", (None, "Update: we moved to Lisbon")),
        (None, "Note: the dose is 20 mg", (None, "Note: the dose is 20 mg")),
        (None, "my plan: rest", (None, "my plan: rest")),
        (None, "Caroline:", (None, "Caroline:")),
        (None, "Time 10:30 works", (None, "Time 10:30 works")),
    ],
)
def test_split_speaker(name, text, expected):
    assert split_speaker(name, text) == expected
