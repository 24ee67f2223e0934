"""memory/block/shown.py: words the model reads already, in the request or in another line."""

from memory.block.shown import (
    RequestWords,
    said_by_another,
    said_once,
    said_within,
    says_again,
    words_of,
)


def test_words_are_runs_of_word_characters_between_spaces():
    assert words_of("**Gate code:** `GT-5150`\r\n* Bring ID") == " Gate code GT 5150 Bring ID "


def test_a_text_of_fewer_than_four_words_has_none():
    assert words_of("Yes, sure.") is None


def test_markdown_line_ends_and_trimming_do_not_count():
    said = "**Your plan:**\n\n* Gate code: `GT-5150-MD`\n* Bring ID\n\n"
    for again in (said.strip(), said.replace("\n", "\r\n"), "Your plan:\n- Gate code: GT-5150-MD"):
        assert said_within(again, said)


def test_a_word_is_only_found_whole():
    assert not said_within("the code is 515", "so the code is 5150 now")


def test_a_short_text_is_never_said_within_another():
    assert not said_within("Yes.", "Yes, and the code is 7731.")


def test_a_line_is_said_by_another_only_of_the_same_speaker():
    line = "assistant: the charger with tag PK-77, two jumpers"
    whole = "assistant: Your list: passport, the charger with tag PK-77, two jumpers."
    assert said_by_another(line, [(whole, True)])
    assert not said_by_another(line, [("user: " + whole.partition(": ")[2], True)])


def test_a_newer_line_inside_an_older_one_is_said_again_only_as_its_start_or_end():
    older = "user: Don't tell Sam the meeting is on Friday, it's a surprise."
    assert not says_again(older, "user: tell Sam the meeting is on Friday", line_first=False)
    assert says_again(older, "user: tell Sam the meeting is on Friday", line_first=True)
    assert says_again(older, "user: the meeting is on Friday, it's a surprise", line_first=False)


def test_said_once_keeps_the_whole_reply_and_the_first_of_equal_lines():
    lines = [
        "user: Make me a packing list for Norway, please.",
        "assistant: Your list: passport, the blue adapter,",
        "assistant: the charger with tag PK-77, two jumpers.",
        "assistant: Your list: passport, the blue adapter, the charger with tag PK-77, two jumpers",
        "assistant: **Your list:** passport, the blue adapter, the charger with tag PK-77, two "
        "jumpers.",
        "user: Thanks a lot for the list!",
    ]
    assert said_once(lines) == [0, 3, 5]


def test_the_request_shows_a_text_one_of_its_messages_holds():
    words = RequestWords(
        [
            {"role": "system", "content": "You are terse."},
            {
                "role": "user",
                "content": [{"type": "text", "text": "Ferry **PX-3390** at 07:40.\n\nA list?"}],
            },
        ]
    )
    assert words.shows("Ferry PX-3390 at 07:40")
    assert not words.shows("Ferry PX-3391 at 07:40")
    assert not words.shows("at 07:40.")  # too short to say


def test_the_request_shows_nothing_said_across_two_of_its_messages():
    words = RequestWords(
        [{"role": "user", "content": "The ferry leaves"}, {"role": "user", "content": "at 07:40"}]
    )
    assert not words.shows("The ferry leaves at 07:40")
