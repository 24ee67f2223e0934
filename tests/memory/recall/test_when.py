"""memory/recall/when.py: the dates a recall query names, as windows of stored timestamps."""

from datetime import UTC, datetime

import pytest

from memory.recall.when import Window, query_windows


def at(year, month, day):
    return datetime(year, month, day, 12, tzinfo=UTC).timestamp()


def test_a_query_without_a_date_has_no_window():
    assert query_windows("What did Ana cook for the party?") == []


@pytest.mark.parametrize(
    "query",
    [
        "What dish did Nate make on 9 November, 2022?",
        "What dish did Nate make on November 9, 2022?",
        "What dish did Nate make on 9th November 2022?",
    ],
)
def test_a_day_covers_that_day_and_the_days_after_it(query):
    [window] = query_windows(query)
    assert window.month is None
    assert window.contains(at(2022, 11, 9))
    assert window.contains(at(2022, 11, 18))  # told days later ("last week …")
    assert not window.contains(at(2022, 11, 25))
    assert not window.contains(at(2022, 11, 7))


def test_a_month_and_year_cover_that_month_and_a_few_days_after():
    [window] = query_windows("What setback did Melanie face in October 2023?")
    assert window.contains(at(2023, 10, 1))
    assert window.contains(at(2023, 10, 31))
    assert window.contains(at(2023, 11, 5))
    assert not window.contains(at(2023, 11, 20))
    assert not window.contains(at(2022, 10, 15))


def test_a_month_without_a_year_matches_it_in_any_year():
    assert query_windows("When did Melanie go camping in June?") == [Window(month=6)]
    window = Window(month=6)
    assert window.contains(at(2021, 6, 15))
    assert window.contains(at(2023, 7, 3))
    assert not window.contains(at(2023, 7, 20))
    assert not window.contains(at(2023, 5, 20))


def test_a_bare_month_name_needs_a_preposition():
    # "may" is a verb more often than a month; "in May" is a month.
    assert query_windows("May I ask what we said about the kayak?") == []
    assert query_windows("What did we plan in May?") == [Window(month=5)]


def test_a_year_alone_covers_that_year():
    [window] = query_windows("How many times has Melanie gone to the beach in 2023?")
    assert window.contains(at(2023, 1, 1))
    assert window.contains(at(2023, 12, 31))
    assert not window.contains(at(2022, 12, 30))


def test_a_date_is_read_once_at_its_most_specific():
    windows = query_windows("Did we talk on 3 March 2024 or in April 2024?")
    assert len(windows) == 2
    assert windows[0].contains(at(2024, 3, 3)) and not windows[0].contains(at(2024, 3, 20))
    assert windows[1].contains(at(2024, 4, 20))


def test_an_impossible_day_is_ignored():
    assert query_windows("What happened on 31 February 2023?") == []
