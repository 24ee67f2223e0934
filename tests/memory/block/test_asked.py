"""memory/block/asked.py: the change on the question's subject leads, with or without a change
word (read through `lead_with_the_change`, which the block calls)."""

import subprocess
import sys

import pytest

from memory.block.latest import lead_with_the_change
from memory.records import Excerpt

DAY = 86_400.0


def excerpt(session_id, day, *lines):
    return Excerpt(
        text="\n".join(lines),
        session_id=session_id,
        created_at=day * DAY,
        similarity=0.5,
        this_session=False,
        latest_at=day * DAY + 60,
        rank=0,
        chunk_ids=(day,),
    )


BASS = excerpt("s1", 1, "user: I play a 1978 Fender Precision through an Ampeg amp.")
SOLD = excerpt("s2", 9, "user: I sold the Precision and bought a Music Man StingRay.")


def lead(excerpts, query):
    return lead_with_the_change(excerpts, 600, query)[0].text.split("\n")[0]


def test_a_change_without_a_change_word_leads_when_the_question_asks_its_subject():
    assert lead([SOLD, BASS], "Which bass do I play these days?") == (
        "user: …and bought a Music Man StingRay."
    )
    # No question, or one not about the user's present: only change words lead (none here).
    assert lead_with_the_change([SOLD, BASS], 600) == [SOLD, BASS]
    assert lead_with_the_change([SOLD, BASS], 600, "Which bass did Felix play?") == [SOLD, BASS]


def test_the_old_value_must_be_said_on_the_questions_subject_before():
    other = excerpt("s1", 1, "user: My brother has a 1978 Fender Precision in his loft.")
    assert lead_with_the_change([SOLD, other], 600, "Which bass do I play now?") == [SOLD, other]


def test_the_change_on_the_subject_leads_not_the_lines_first_change():
    older = excerpt(
        "s1",
        1,
        "user: I share a flat in Leith with my friend Kirsty. "
        "I'm doing an evening course in French at the Institut too.",
    )
    newer = excerpt(
        "s2",
        9,
        "user: Kirsty moved in with her boyfriend in July so the flat is mine. "
        "I dropped French and I'm doing Spanish instead, at the college on Tuesdays.",
    )
    led = lead([newer, older], "Which language am I learning in the evenings?")
    assert led == "user: …and I'm doing Spanish instead, at the college on Tuesdays."
    # Without the question, the line's first change leads, as before.
    assert (
        lead([newer, older], "")
        == "user: …moved in with her boyfriend in July so the flat is mine."
    )


def test_of_two_values_said_together_before_the_newer_named_last_leads_with_its_sentence():
    first = excerpt("s1", 1, "user: My biggest client is an agency called LinguaPort.")
    second = excerpt(
        "s2",
        5,
        "user: I told LinguaPort my rate goes up. I've also got a new client, a patent firm "
        "in Düsseldorf.",
    )
    newest = excerpt(
        "s3",
        9,
        "user: Work-wise, LinguaPort got bought by TransGlobal and cut rates. I've basically "
        "stopped working with them, but the patent firm in Düsseldorf has doubled their volume.",
    )
    assert lead([newest, second, first], "Who is my main client these days?") == (
        "user: …I've basically stopped working with them, but the patent firm in Düsseldorf "
        "has doubled their volume."
    )


def test_a_later_value_not_said_beside_the_older_one_is_not_read_as_its_successor():
    first = excerpt("s1", 1, "user: My partner Tomasz thinks our trips are too short.")
    second = excerpt("s2", 5, "user: For my birthday trip we're planning three weeks in Peru.")
    newest = excerpt("s3", 9, "user: Tomasz's mum is visiting. We're still dreaming of Peru.")
    excerpts = [newest, second, first]
    assert lead_with_the_change(excerpts, 600, "Where are we going on my trip?") == excerpts


def test_a_name_that_opens_its_clause_is_who_does_something_not_the_old_value():
    older = excerpt("s1", 1, "user: My Italian teacher is Marco, lessons on Mondays.")
    newer = excerpt("s2", 9, "user: Lovely week, and Marco and I talked about Sicily for ages.")
    excerpts = [newer, older]
    assert lead_with_the_change(excerpts, 600, "Who teaches me Italian now?") == excerpts


def test_a_name_the_question_holds_is_its_subject_not_a_value():
    older = excerpt("s1", 1, "user: I'm sitting MRCP Part 1 in January.")
    newer = excerpt("s2", 9, "user: I deferred MRCP Part 1 to the Autumn sitting.")
    excerpts = [newer, older]
    assert lead_with_the_change(excerpts, 600, "When am I taking MRCP Part 1?") == excerpts


def test_numbers_are_not_read_they_come_in_pieces():
    older = excerpt("s1", 1, "user: Our croissants cost 3.20 each to make.")
    newer = excerpt("s2", 9, "user: So croissants at 3.60 each, nobody has complained yet.")
    excerpts = [newer, older]
    question = "What do we charge for a croissant at the moment?"
    assert lead_with_the_change(excerpts, 600, question) == excerpts


def test_a_change_word_in_the_same_words_says_which_value_is_new():
    older = excerpt("s1", 1, "user: For training this year I'm going to the Manchester conference.")
    newer = excerpt(
        "s2",
        9,
        "user: We're skipping Manchester, it clashed with the CQC visit. Instead I've booked a "
        "course in Glasgow.",
    )
    assert lead([newer, older], "What training event am I going to this year?") == (
        "user: …it clashed with the CQC visit. Instead I've booked a course in Glasgow."
    )


def test_a_new_value_a_newer_conversation_names_again_does_not_lead():
    later = excerpt("s3", 12, "user: The Music Man StingRay went back, the neck was warped.")
    excerpts = [later, SOLD, BASS]
    led = lead_with_the_change(excerpts, 600, "Which bass do I play these days?")
    assert led == excerpts


def test_a_name_one_word_after_the_old_one_is_its_own_phrase_not_a_change():
    older = excerpt("s1", 1, "user: I cut hair in Brighton, a cut and colour is 85 pounds.")
    newer = excerpt("s2", 9, "user: I've set my cut and colour price, travel in Brighton and Hove.")
    excerpts = [newer, older]
    question = "How much do I charge for a cut and colour?"
    assert lead_with_the_change(excerpts, 600, question) == excerpts


def test_a_long_line_of_the_subjects_names_is_read_in_linear_time():
    """A 300 kB user line naming the subject's old values over and over (a tier configured
    that large): each name's clause start was searched again from the line's start, 61 s;
    0.8 s once a line's marks are read once (review29). The deadline only catches a return
    to quadratic time (a process of its own: a regex holds the GIL)."""
    code = (
        "from memory.block.latest import lead_with_the_change\n"
        "from tests.memory.block.test_asked import BASS, excerpt\n"
        "line = 'user: I play the ' + 'Precision and the Ampeg, ' * 12000 + 'Precision.'\n"
        "lead_with_the_change([excerpt('s2', 9, line), BASS], 400_000, 'Which bass now?')\n"
    )
    try:
        subprocess.run([sys.executable, "-c", code], check=True, timeout=15)
    except subprocess.TimeoutExpired:
        pytest.fail("a 300 kB line of the subject's names took more than 15 s: quadratic again")
