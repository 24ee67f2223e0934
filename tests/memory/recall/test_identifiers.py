"""An identifier in the question: the code a kept turn gives on the question's words, and the
turn under the floor that gives the kind asked for (memory/recall/identifiers.py)."""

import pytest

from memory.recall.abstention import TOPIC_SIZE, nothing_stands_out
from memory.recall.identifiers import gives_a_code_on_its_words, giving_the_kind, is_a_code
from memory.records import Chunk, Hit


def hit(text, cosine=0.3, n=1, role="user"):
    return Hit(Chunk(n, n, "u", "s", role, None, text, 0.0), 1.0, cosine, n, None)


@pytest.mark.parametrize(
    "token",
    [
        "DE89",
        "BA2490",
        "v2.14.3-rc1",
        "SN-4471-XQ9",
        "#A-20931-77",
        "31-07-19",
        "555-0142",
        "10.0.3.7",
        "dana.k+billing@fastmail.com",
        "/etc/nginx/sites-available/shop_v2.conf",
        "https://git.example.org/infra/deploy-tools/-/issues/482?tab=notes",
        "3f2b8c1e-9a4d-4e7b,",
        "(wx7-k3p!q)",
    ],
)
def test_codes_addresses_and_paths_read_as_codes(token):
    assert is_a_code(token)


@pytest.mark.parametrize(
    "token",
    [
        "1,500",
        "1,284,500.75",
        "2.1%",
        "6.9!",
        "25-minute",
        "40-day",
        "10am",
        "22nd",
        "14C",
        "2024",
        "Next.js",
        "and/or",
        "x2",
        "hello",
        "5-10",
        "24/7",
        "50/50",
        "12/05",
    ],
)
def test_amounts_measures_times_years_and_words_do_not(token):
    assert not is_a_code(token)


IBAN = (
    "Work has been hectic, three launches in a row. Oh and before I forget, the landlord's "
    "IBAN for the rent is DE89 3704 0044 0532 0130 00, I keep losing it. Anyway, dinner?"
)


def test_a_code_in_a_sentence_with_a_word_of_the_question_is_given_on_its_words():
    assert gives_a_code_on_its_words("What's the bank account I pay rent to?", [hit(IBAN)])
    # the word in another sentence than the code, or only the kind's word shared: not given
    assert not gives_a_code_on_its_words("What did I say about the launches?", [hit(IBAN)])
    order = hit("my order number for the standing desk is #A-20931-77, still not shipped")
    assert not gives_a_code_on_its_words("What's my passport number?", [order])
    # an amount beside the question's word is not a code ('it cost 1,200' for any cost)
    couch = hit("A grey velvet three-seater, it cost 1,200 and delivery takes six weeks.")
    assert not gives_a_code_on_its_words("How much did the new couch cost?", [couch])


def test_the_gate_stays_open_for_a_lone_weak_turn_that_gives_the_code_asked_about():
    """A code said mid-paragraph is a lone kept hit with a weak cosine: the learned gate alone
    withholds it."""
    asked, kept = "What's the bank account I pay rent to?", [hit(IBAN, 0.37)]
    assert not nothing_stands_out(asked, TOPIC_SIZE, kept, 3.0, 0.0, 0.52)
    other = [hit(IBAN.replace("DE89 3704 0044 0532 0130 00", "with the agency"), 0.37)]
    assert nothing_stands_out(asked, TOPIC_SIZE, other, 3.0, 0.0, 0.52)


def test_the_turn_under_the_floor_that_gives_the_kind_asked_for_is_found():
    chatter = "the kids had swimming on Tuesday and the neighbours are redoing their kitchen. "
    ticket = hit(chatter + "Oh, the support ticket id is 3f2b8c1e-9a4d-4e7b. " + chatter, 0.1, 1)
    desk = hit(chatter + "my order number for the desk is #A-20931-77. " + chatter, 0.1, 2)
    small_talk = hit(chatter * 2, 0.1, 3)
    found = [ticket, desk, small_talk]
    assert giving_the_kind("What was the support ticket id?", found) == [ticket]
    assert giving_the_kind("Which order number was the desk?", found) == [desk]
    # the kind with nothing naming what it is of: an order number is no passport number
    assert giving_the_kind("What's my passport number?", found) == []
    assert giving_the_kind("What did the kids do on Tuesday?", found) == []
    # a question with only the kind's word takes a code next to it ('What's my PIN?')
    pin = hit("PIN 4471, don't tell anyone", 0.1, 4)
    assert giving_the_kind("What's my PIN?", [pin, small_talk]) == [pin]


def test_a_question_naming_its_own_identifier_is_not_answered_by_another_code():
    ticket = [hit("the outage ticket was INC-48213, closed on Friday")]
    assert gives_a_code_on_its_words("Which outage ticket did we close?", ticket)
    assert not gives_a_code_on_its_words("Which ticket was INC-99999 about?", ticket)
    # a hyphenated word is not an identifier: 'e-mail' asks for one
    email = [hit("I set up a billing address dana.k+billing@fastmail.com just for subscriptions")]
    assert gives_a_code_on_its_words("Which e-mail did I make for subscriptions?", email)


def test_a_long_run_of_letters_is_read_once():
    """An address's name is tried only where a run of letters starts: tried from every letter
    of a long run, a 16,000-character question (`QUERY_CHARS`) of one word took 3 s of a
    recall thread, and a kept turn of 100 kB minutes."""
    assert is_a_code("a" * 100_000 + ".com")
    assert not is_a_code("a" * 100_000)
    assert is_a_code("git." + "b" * 100_000 + ".org")
    long = hit("my locker " + "a" * 100_000 + " code is 31-07-19", 0.3)
    assert gives_a_code_on_its_words("Which locker do I have?", [long])
