"""A question about something that changed, past the gate.

The change is said in passing, in a turn about other things, so among a dozen turns on the
user's work and training nothing stands out and the learned gate withheld every excerpt
(docs/recall-quality.md, "Seventeenth pass"). Through the real proxy, the official SDK and the
real embedder. The change may be said with no change word at all: the newer turn names the
new school on the subject of the older one ("Twenty-first pass").
"""

import pytest

from tests.e2e.test_recall import block_in, remember_apart, say, sent_messages

pytestmark = pytest.mark.both_backends

BEFORE = (
    "I work at Kingsmead Academy, it's a big school, and my head of department is good about "
    "not giving me early cover.",
    "I'm training for the Chester marathon in October, my first one.",
    "My long run on Sunday was 24 km along the canal, the Achilles felt fine.",
    "My year 11 maths group is lovely but chatty.",
    "I'm trying to get to bed by ten on weeknights so the early runs are doable.",
    "Marking takes most of my Thursday evenings, so Thursday is my rest day.",
    "I've been doing strides after my easy runs, six by twenty seconds.",
    "The staff room coffee is terrible so I bring a flask from home.",
    "Parents' evening ran until eight, I was exhausted on the run the next morning.",
    "I bought new trainers, the same model as before but half a size up.",
)
CHANGE = (
    "Quick update, I've moved schools! I'm at Priory Park School now, smaller, nicer kids, "
    "started after half-term. Training's going well, I'm up to 55 km a week."
)


def test_the_later_turn_that_says_it_changed_is_recalled(proxy, upstream):
    remember_apart(proxy, "mira", *BEFORE, CHANGE)
    asked = "Which school do I teach at?"
    say(proxy, [{"role": "user", "content": asked}], "mira", X_Memory_Mode="read")
    assert "Priory Park School now" in (block_in(sent_messages(upstream)) or "")


# No change word: the newer conversation's turn of the user's names a school the older did not.
SINCE = (
    "Good news, my first weeks at Priory Park School went well, smaller school, nicer kids. "
    "Training's going well, I'm up to 55 km a week."
)


def test_a_later_turn_naming_a_new_school_without_a_change_word_is_recalled(proxy, upstream):
    remember_apart(proxy, "noor", *BEFORE, SINCE)
    asked = "Which school do I teach at?"
    say(proxy, [{"role": "user", "content": asked}], "noor", X_Memory_Mode="read")
    assert "Priory Park School" in (block_in(sent_messages(upstream)) or "")
