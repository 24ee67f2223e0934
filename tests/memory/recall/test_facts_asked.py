"""A question about a fact the block shows brings the fact's source turn, when recall found it
and the gate or the floors dropped it (memory/recall/facts_asked.py)."""

import subprocess
import sys

import pytest

from memory.recall.facts_asked import asks_about, with_the_fact_asked
from memory.recall.retrieval import Retrieval
from memory.records import Chunk, Fact, Hit

INTRO = "My partner and I moved last year. We live in Reading, so Heathrow is an easy drive."


def fact(key, value, source=7):
    return Fact(1, "u", key, value, "profile", source_message_id=source)


def hit(text, message_id, chunk_id=None):
    chunk = Chunk(chunk_id or message_id, message_id, "u", "s", "user", None, text, 0.0)
    return Hit(chunk, 0.5, 0.12, 3, None)


@pytest.mark.parametrize(
    ("question", "key", "value"),
    [
        ("Which town do we call home?", "home_city", "Reading"),
        ("Where do I live?", "home_city", "Reading"),
        ("What do I do for a living?", "job_title", "dental hygienist"),
        ("Where do I work?", "employer", "Stripe"),
        ("What car do we drive?", "current:car", "Kia Sorento"),
        ("How much is my rent?", "current:rent", "845"),
        ("What's the name of my flatmate?", "person:flatmate", "Sam"),
        # "what's", "who's", "where's": a verb, not someone else's (review29)
        ("What's my job these days?", "job_title", "dental hygienist"),
        ("What’s our rent now?", "current:rent", "845"),
        ("Who's my head chef?", "person:head_chef", "Marco"),
        ("Where's our home town?", "home_city", "Reading"),
    ],
)
def test_a_question_asking_what_the_fact_holds_asks_about_it(question, key, value):
    assert asks_about(question, fact(key, value))


@pytest.mark.parametrize(
    ("question", "key", "value"),
    [
        # someone else's, or an attribute of the subject, or the subject qualifying another word
        ("What's my husband's job?", "job_title", "architect"),
        ("What’s my ex-husband’s job?", "job_title", "architect"),
        ("What's the registration of the new van?", "current:van", "Vauxhall Vivaro-e"),
        ("What's my salary at the new job?", "job_title", "operations manager"),
        ("How much are the care home fees?", "home_city", "Leicester"),
        # a name asked of a fact that holds none; a subject only half said
        ("Who is officiating our wedding?", "current:wedding", "21 September at Prior Park"),
        ("What's the name of our head waiter?", "person:head_chef", "Lina"),
        # the question names the value: it asks something else about it
        ("What's the name of my onboarding buddy at Stripe?", "employer", "Stripe"),
        ("What do I do for a living?", "home_city", "Reading"),
    ],
)
def test_a_question_about_something_else_does_not(question, key, value):
    assert not asks_about(question, fact(key, value))


def test_the_source_of_the_fact_asked_about_leads_a_withheld_recall():
    other = hit("I'm cabin crew, long-haul, mostly on the 777 fleet.", 3)
    source = hit(INTRO, 7)
    found = Retrieval([], True, "Which town do we call home?", ranked=[other, source])
    opened = with_the_fact_asked(
        found, [fact("current:fleet", "A350", 3), fact("home_city", "Reading")]
    )
    assert [h.chunk.id for h in opened.hits] == [7]
    assert not opened.abstained
    assert [lo.hit.chunk.id for lo in opened.left_out if lo.hit] == [3]  # still left out


def test_no_fact_asked_about_or_no_candidate_leaves_the_recall_as_it_was():
    source = hit(INTRO, 7)
    asked = Retrieval([], True, "Which town do we call home?", ranked=[hit("Other.", 3)])
    assert with_the_fact_asked(asked, [fact("home_city", "Reading")]) is asked  # not found
    other = Retrieval([], True, "What breed is my cat?", ranked=[source])
    assert with_the_fact_asked(other, [fact("home_city", "Reading")]) is other
    kept = Retrieval([source], False, "Where do we live?", ranked=[source])
    assert with_the_fact_asked(kept, [fact("home_city", "Reading")]) is kept  # already kept


def test_a_question_after_a_sum_brings_the_source_only_when_it_says_one():
    """'What's Ruaridh's salary in the new council job?' asks what "current:job" holds by its
    words, but its source turn says no salary: the gate closed on it (amounts.py) and it stays
    closed; a source that says the sum comes in."""
    job = fact("current:job", "housing officer")
    asked = "What's Ruaridh's salary in the new council job?"
    told = hit("Ruaridh got the job at the council, he starts in June!", 7)
    found = Retrieval([], True, asked, ranked=[told])
    assert with_the_fact_asked(found, [job]) is found
    paid = hit("Ruaridh got the council job, on 34k a year, he starts in June!", 7)
    found = Retrieval([], True, asked, ranked=[paid])
    assert [h.chunk.id for h in with_the_fact_asked(found, [job]).hits] == [7]


def test_a_fact_that_holds_the_sum_brings_its_source_whatever_the_turn_says():
    rent = fact("current:rent", "845")
    told = hit("Ugh, the landlord put it up again from May, it's 845 now.", 7)
    found = Retrieval([], True, "How much is my rent?", ranked=[told])
    assert [h.chunk.id for h in with_the_fact_asked(found, [rent]).hits] == [7]


def test_a_number_in_a_name_is_no_sum():
    """'current:car' Fiat 500 holds a digit, not a price: its turn does not answer what the
    car cost."""
    car = fact("current:car", "Fiat 500")
    told = hit("The old Corsa died, so we've bought a second-hand Fiat 500.", 7)
    found = Retrieval([], True, "How much did the car cost?", ranked=[told])
    assert with_the_fact_asked(found, [car]) is found


def test_a_long_run_of_hyphenated_words_is_read_in_linear_time():
    """16 kB of "a-a-a-…" (a question's bound, QUERY_CHARS) took 2 s a fact asked about when
    someone else's was read from every word start, backtracking: 20 facts, 40 s. The deadline
    only catches a return to quadratic time (a process of its own: a regex holds the GIL)."""
    code = (
        "from memory.recall.facts_asked import asks_about\n"
        "from memory.records import Fact\n"
        "query = ('What car ' + 'a-' * 8000)[:16000]\n"
        "for n in range(20):\n"
        "    fact = Fact(n, 'u', f'car{n}:car', 'Kia', 'x', source_message_id=n)\n"
        "    assert asks_about(query, fact)\n"
    )
    try:
        subprocess.run([sys.executable, "-c", code], check=True, timeout=15)
    except subprocess.TimeoutExpired:
        pytest.fail("20 facts asked by a 16 kB hyphenated question took more than 15 s")
