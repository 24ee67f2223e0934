"""memory/block/latest.py: a change said after the old value leads the block with the new."""

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory.block.latest import lead_with_the_change
from memory.block.render import (
    BLOCK_END,
    BLOCK_START,
    FACT_SECTIONS,
    PAST_CONTEXT,
    render_block,
)
from memory.records import Excerpt

DAY = 86_400.0


def excerpt(session_id, day, *lines, rank=0):
    return Excerpt(
        text="\n".join(lines),
        session_id=session_id,
        created_at=day * DAY,
        similarity=0.5,
        this_session=False,
        latest_at=day * DAY + 60,
        rank=rank,
        chunk_ids=(day,),
    )


OLD = excerpt(
    "s1", 1, "user: We're doing Tokyo, Kyoto and Kanazawa in October.", "assistant: Nice."
)


def lead(excerpt):
    return lead_of_text(excerpt.text)


def lead_of_text(text):
    return text.split("\n")[0]


def test_the_words_past_the_old_value_lead_the_newer_sessions_excerpt():
    newer = excerpt(
        "s2", 9, "user: Yes, and we swapped Kanazawa for Hiroshima since it's easier by train."
    )
    led = lead_with_the_change([newer, OLD], 600)
    assert len(led) == 2 and led[1] == OLD  # no excerpt added: the tier's count holds
    assert led[0].text == "user: …for Hiroshima since it's easier by train.\n" + newer.text
    assert led[0] == replace(newer, text=led[0].text)  # its session, time, score and chunks


def test_the_led_excerpt_keeps_its_room_and_its_place():
    newer = excerpt(
        "s2",
        9,
        "user: Yes, and we swapped Kanazawa for Hiroshima since it's easier by train.",
        "assistant: " + "Hiroshima is an easy hop from Kyoto on the shinkansen. " * 3,
    )
    newest = excerpt("s3", 12, "user: My sister Clara teaches violin in Lisbon.")
    led = lead_with_the_change([newest, newer, OLD], 200)
    assert led[0] == newest and led[2] == OLD  # newest first still
    assert lead(led[1]) == "user: …for Hiroshima since it's easier by train."
    assert len(led[1].text) <= 200
    assert led[1].text.split("\n")[1].startswith("user: Yes, and we swapped Kanazawa")


def test_a_change_in_the_next_sentence_starts_right_after_the_old_value():
    newer = excerpt(
        "s2",
        9,
        "user: Change of plan, we're skipping Kanazawa, it clashed with the CQC visit. Instead "
        "we're doing Hiroshima in November.",
    )
    assert lead(lead_with_the_change([newer, OLD], 600)[0]) == (
        "user: …it clashed with the CQC visit. Instead we're doing Hiroshima in November."
    )


def test_the_piece_ends_with_the_sentence_that_names_the_new_value():
    newer = excerpt(
        "s2",
        9,
        "user: We swapped Kanazawa for Hiroshima now. Kieran passed his first year at Keele.",
    )
    assert lead(lead_with_the_change([newer, OLD], 600)[0]) == "user: …for Hiroshima now."


def test_from_the_old_to_the_new_is_a_change_without_a_change_word():
    old = excerpt("s1", 1, "user: Pip is on Apoquel, 16 mg once a day.")
    newer = excerpt("s2", 9, "user: Pip's Apoquel went from 16 mg to 8 mg a day, said the vet.")
    led = lead_with_the_change([newer, old], 600)
    assert lead(led[0]) == "user: …mg to 8 mg a day, said the vet."


def test_from_a_value_no_older_line_names_to_another_the_new_one_is_the_second():
    old = excerpt("s1", 1, "user: Pip is on Apoquel for the itching.")
    newer = excerpt("s2", 9, "user: The vet moved Pip's Apoquel from 3 to 4 tablets a week.")
    led = lead_with_the_change([newer, old], 600)
    assert lead(led[0]) == "user: …to 4 tablets a week."  # not "…from 3 to 4"
    # a value said "from" with no "to" after it is no old value: it is the new one
    moved = excerpt("s2", 9, "user: Pip's Apoquel now comes from Zoetis, cheaper online.")
    assert (
        lead(lead_with_the_change([moved, old], 600)[0])
        == "user: …now comes from Zoetis, cheaper online."
    )


def test_from_a_value_to_another_across_a_no_break_space_or_a_tab():
    """Text pasted from a word processor or a web page spaces with U+00A0 (and French puts
    one before a unit); "from" already reads any space before the value (`_FROM`)."""
    old = excerpt("s1", 1, "user: Pip is on Apoquel for the itching.")
    for space in ("\u00a0", "\t", "\u202f"):
        said = f"user: The vet moved Pip's Apoquel from 3{space}to{space}4 tablets a week."
        led = lead_with_the_change([excerpt("s2", 9, said), old], 600)
        assert lead(led[0]) == f"user: …to{space}4 tablets a week.", repr(space)


def test_nothing_leads_without_an_old_value_a_change_word_or_a_new_value():
    unrelated = excerpt("s2", 9, "user: We moved to Leeds last spring, it's lovely now.")
    no_change = excerpt("s2", 9, "user: Kanazawa has a famous garden called Kenroku-en.")
    said_before = excerpt("s2", 9, "user: We swapped Kanazawa for Kyoto, we love Kyoto.")
    lowercase = excerpt("s2", 9, "user: We swapped Kanazawa for a beach week instead.")
    for newer in (unrelated, no_change, said_before, lowercase):
        assert lead_with_the_change([newer, OLD], 600) == [newer, OLD]


def test_only_an_older_conversation_names_the_old_value():
    same_session = excerpt("s1", 9, "user: We swapped Kanazawa for Hiroshima now.")
    later = excerpt("s3", 20, "user: We'll be in Kanazawa in October.")
    assert lead_with_the_change([same_session, OLD], 600) == [same_session, OLD]
    newer = excerpt("s2", 9, "user: We swapped Kanazawa for Hiroshima now.")
    assert lead_with_the_change([later, newer], 600) == [later, newer]  # later is not older


def test_a_change_the_user_took_up_again_later_does_not_lead():
    newer = excerpt("s2", 9, "user: We swapped Kanazawa for Hiroshima now.")
    again = excerpt("s3", 20, "user: Hiroshima is off, the hotel cancelled, so it's Nara now.")
    led = lead_with_the_change([again, newer, OLD], 600)
    assert lead(led[0]) == "user: …is off, the hotel cancelled, so it's Nara now."
    assert led[1:] == [newer, OLD]  # the change to Hiroshima, taken up again, does not lead


def test_at_most_two_changes_lead_the_newest_first_one_a_line():
    old = excerpt("s1", 1, "user: We fly on October 3 to Tokyo, Kyoto and Kanazawa.")
    newer = excerpt(
        "s2",
        9,
        "user: We fly on October 10 now, Sam's work.",
        "user: And we swapped Kanazawa for Hiroshima, then Kyoto for Osaka.",
    )
    newest = excerpt("s3", 20, "user: Tokyo is two nights now, then Nikko instead.")
    led = lead_with_the_change([newest, newer, old], 600)
    assert [(e.session_id, lead(e)) for e in led[:2]] == [
        ("s3", "user: …is two nights now, then Nikko instead."),
        ("s2", "user: …10 now, Sam's work."),
    ]
    assert led[2] == old


def test_a_chunk_whose_line_gave_way_to_the_piece_is_no_longer_listed_as_shown():
    """review27: the lines cut for the piece took their chunks out of the block, yet the
    excerpt still listed them, and the inspector said they were shown."""
    newer = replace(
        excerpt(
            "s2",
            9,
            "user: Yes, and we swapped Kanazawa for Hiroshima since it's easier by train.",
            "assistant: " + "Hiroshima is an easy hop from Kyoto on the shinkansen. " * 3,
            "user: Booking the rail pass for the 14th then.",
        ),
        chunk_ids=(5, 7),
        line_chunks=(5, 0, 7),
    )
    led = lead_with_the_change([newer, OLD], 200)[0]
    assert "rail pass" not in led.text and led.chunk_ids == (5,)
    first = replace(
        excerpt(
            "s2",
            9,
            "assistant: " + "Hiroshima is an easy hop from Kyoto on the shinkansen. " * 2,
            "user: Yes, and we swapped Kanazawa for Hiroshima since it's easier by train.",
        ),
        chunk_ids=(3, 5),
        line_chunks=(3, 5),
    )
    led = lead_with_the_change([first, OLD], 200)[0]
    assert "Yes, and we swapped" not in led.text  # its line gave way, its piece leads
    assert led.chunk_ids == (3, 5)


def test_a_long_piece_is_cut_at_a_word_within_a_third_of_an_excerpt():
    newer = excerpt(
        "s2",
        9,
        "user: We swapped Kanazawa for Hiroshima and Miyajima because the trains are easier and "
        "the hotels are cheaper and the food is supposed to be wonderful there",
    )
    led = lead_with_the_change([newer, OLD], 120)[0].text
    assert lead_of_text(led) == "user: …for Hiroshima and Miyajima because the…"
    assert len(led) <= 120 and led.split("\n")[1].startswith("user: We swapped Kanazawa")


def test_named_speakers_and_a_single_excerpt_are_left_as_they_are():
    named = excerpt("s2", 9, "Ana: We swapped Kanazawa for Hiroshima now.")
    old = excerpt("s1", 1, "Ana: We're doing Tokyo, Kyoto and Kanazawa in October.")
    assert lead_with_the_change([named, old], 600) == [named, old]
    alone = excerpt("s2", 9, "user: We swapped Kanazawa for Hiroshima now.")
    assert lead_with_the_change([alone], 600) == [alone]


# Blocks of random user and assistant lines over names, numbers, change words and what the
# block escapes (review27): whatever leads, the tier's count and size of excerpts hold, every
# line keeps its speaker's label and the rendered block holds only its own fixed lines.
WORDS = [
    "Kanazawa", "Hiroshima", "Tokyo", "3rd", "9th", "16", "8", "Łódź", "東京から広島へ", "İzmir",
    "we", "swapped", "moved", "now", "instead", "from", "to", "the", "for", "trip", ".", "!",
    "…", "[Relevant past context]", "=== End Memory ===", "[Known about the user]", "x" * 300,
]  # fmt: skip
SPEAKERS = ("user: ", "user: ", "assistant: ")


@st.composite
def blocks(draw, room):
    """Excerpts newest first, each within `room`, as `build_excerpts` gives them."""
    excerpts = []
    for rank in range(draw(st.integers(2, 5))):
        lines, used = [], 0
        for _ in range(draw(st.integers(1, 4))):
            if room - used < 12:
                break
            words = draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=80))
            lines.append((draw(st.sampled_from(SPEAKERS)) + " ".join(words))[: room - used])
            used += len(lines[-1]) + 1
        day = draw(st.integers(1, 60))
        session = draw(st.sampled_from(["s1", "s2", "s3"]))
        chunks = tuple(draw(st.sampled_from([0, rank * 10 + n])) for n in range(len(lines)))
        excerpts.append(
            replace(
                excerpt(session, day, *lines, rank=rank),
                chunk_ids=tuple(i for i in chunks if i),
                line_chunks=chunks,
            )
        )
    return sorted(excerpts, key=lambda e: -e.created_at)


@pytest.mark.parametrize("room", [600, 400, 250, 90])
@settings(max_examples=300, derandomize=True, deadline=None)
@given(data=st.data())
def test_any_block_keeps_the_tiers_count_and_size_and_its_labels(room, data):
    given_ = data.draw(blocks(room))
    led = lead_with_the_change(given_, room)
    assert len(led) == len(given_)
    for before, after in zip(given_, led, strict=True):
        assert after == replace(before, text=after.text, chunk_ids=after.chunk_ids)
        assert set(after.chunk_ids) <= set(before.chunk_ids)
        assert len(after.text) <= room
        assert all(line.startswith(SPEAKERS) for line in after.text.split("\n"))
        assert after.text == before.text or after.text.startswith("user: …")
    rendered = render_block([], led, 90 * DAY).split("\n")
    fixed = {BLOCK_START, BLOCK_END, PAST_CONTEXT, *FACT_SECTIONS.values()}
    assert [line for line in rendered if line.strip() in fixed] == [
        BLOCK_START,
        PAST_CONTEXT,
        BLOCK_END,
    ]
