"""memory/facts/capture.py: deterministic fact capture, rule by rule, then the labelled set."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from memory.facts.capture import Capture, capture_facts

LABELLED = Path(__file__).with_name("capture_labelled.jsonl")


def facts(text):
    return [(c.op, c.key, c.value) for c in capture_facts(text)]


def precision_recall(rows, capture=capture_facts):
    """(precision, recall) over labelled rows. A capture is correct when op, key and value match
    an expected fact (value compared case-insensitively); each expected fact matches once."""
    captured = correct = expected_total = 0
    for row in rows:
        remaining = [(e["op"], e["key"], e["value"].casefold()) for e in row["expected"]]
        expected_total += len(remaining)
        for c in capture(row["text"]):
            captured += 1
            if (fact := (c.op, c.key, c.value.casefold())) in remaining:
                remaining.remove(fact)
                correct += 1
    return (correct / captured if captured else 1.0, correct / expected_total)


# The whole record, once per kind of rule.


def test_my_name_is_sets_name_as_a_spoken_profile_fact():
    assert capture_facts("hi, my name is Dana!") == [
        Capture(op="set", key="name", value="Dana", category="profile", rule="self_name")
    ]


def test_allergy_is_an_adapt_constraint():
    assert capture_facts("I'm allergic to peanuts") == [
        Capture("set", "allergy:peanuts", "allergic to peanuts", "constraint", "allergy", "adapt")
    ]


def test_never_mention_is_an_avoid_protocol():
    assert capture_facts("Please never mention my ex-husband.") == [
        Capture(
            "set",
            "constraint:never_mention_my_ex_husband",
            "never mention my ex-husband",
            "protocol",
            "always_never",
            "avoid",
        )
    ]


def test_remember_command_keeps_the_inner_rule_for_audit():
    assert capture_facts("can you remember that I'm vegan?") == [
        Capture("set", "diet", "vegan", "constraint", "remember_command:diet", "adapt")
    ]


def test_remember_command_without_a_known_fact_becomes_a_note():
    assert capture_facts("remember that the staging db is on port 5433") == [
        Capture(
            "set",
            "note:the_staging_db_is_on_port",
            "the staging db is on port 5433",
            "project",
            "remember_command",
        )
    ]


def test_forget_archives_the_key_the_same_words_would_set():
    assert capture_facts("forget that I live in Berlin") == [
        Capture("forget", "home_city", "Berlin", "profile", "forget_command")
    ]


# Names.


@pytest.mark.parametrize(
    "text, job, employer",
    [
        (
            "Big change: I left nursing, I'm a software tester at Acme now.",
            "software tester",
            "Acme",
        ),
        ("I'm now a receptionist at the Grand Hotel.", "receptionist", "the Grand Hotel"),
        ("I'm a paralegal at Baker & Co.", "paralegal", "Baker & Co"),
        ("I'm a social worker for Leeds City Council.", "social worker", "Leeds City Council"),
    ],
)
def test_an_occupation_outside_the_office_trades_is_a_job(text, job, employer):
    """'I'm a software tester at Acme now' set nothing: the job nouns were office and clinic
    trades only, so a nurse who became a tester stayed a nurse in every block."""
    assert facts(text) == [("set", "job_title", job), ("set", "employer", employer)]


@pytest.mark.parametrize(
    "text",
    [
        "I'm a caregiver for my mum now.",
        "I'm a full-time caregiver for my elderly dad.",
        "I'm a translator for my sister, she speaks no English.",
    ],
)
def test_a_role_for_ones_family_is_no_job(text):
    """Looking after one's mother is no job: 'I'm a caregiver for my mum now' set job title
    caregiver, superseding the nurse the user still is."""
    assert facts(text) == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("my name is Dana", [("set", "name", "Dana")]),
        ("My name is Ana Lucia Ferreira.", [("set", "name", "Ana Lucia Ferreira")]),
        ("my name is marco btw", [("set", "name", "marco")]),
        ("Hello, my name is Jean-Luc and I need help", [("set", "name", "Jean-Luc")]),
        ("hiya, name's Jordan", [("set", "name", "Jordan")]),
    ],
)
def test_self_name_captures_the_name(text, expected):
    assert facts(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "my name is not important",
        "my name isn't relevant here",
        "my name is a secret",
        "my name is the same as my grandfather's",
        "My name is required in the form but it keeps failing",
        "my name is spelled with two Ns",
    ],
)
def test_my_name_is_not_important_captures_nothing(text):
    assert facts(text) == []


def test_name_correction_with_not_but_takes_the_new_value():
    assert facts("sorry, correction: my name isn't Jon, it's John") == [("set", "name", "John")]
    assert facts("actually, my name is Daniela, not Dana") == [("set", "name", "Daniela")]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "Small correction to what I said before: I actually live in Salford, not Manchester.",
            ("set", "home_city", "Salford"),
        ),
        ("Sorry, I meant I live in Salford.", ("set", "home_city", "Salford")),
        ("Correction to what I told you earlier: my name is Jon.", ("set", "name", "Jon")),
        ("My name is actually Jon, not John.", ("set", "name", "Jon")),
        ("I'm actually allergic to peanuts.", ("set", "allergy:peanuts", "allergic to peanuts")),
    ],
)
def test_a_correction_of_something_said_before_takes_the_new_value(text, expected):
    """'what I said before' is the user's own earlier words, not someone's reported speech."""
    assert facts(text) == [expected]


def test_a_correction_lead_does_not_make_others_news_the_users():
    assert facts("Small correction to what I said before: she lives in Salford.") == []
    assert facts("My name is actually pretty common.") == []


def test_call_me_sets_preferred_name_only_when_capitalised():
    assert facts("you can call me Sam, everyone does") == [("set", "preferred_name", "Sam")]
    assert facts("Please call me Dr. Okafor from now on") == [
        ("set", "preferred_name", "Dr. Okafor")
    ]
    assert facts("call me when you're done with the build") == []
    assert facts("Call me crazy, but tabs are better") == []


# Places.


@pytest.mark.parametrize(
    ("text", "city"),
    [
        ("I live in Lisbon", "Lisbon"),
        ("I currently live in New York City", "New York City"),
        ("I'm based in the Netherlands, near Utrecht", "the Netherlands"),
        ("we just moved to Portland, Oregon!", "Portland, Oregon"),
        ("I live in Washington, D.C.", "Washington, D.C."),
        ("we live in St. Louis, near the arch", "St. Louis"),
        ("I moved from Chicago to Seattle in March", "Seattle"),
        ("I moved from Berlin in March to Lisbon", "Lisbon"),
        ("I relocated to Berlin for work in 2021", "Berlin"),
        ("i live in lisbon", "lisbon"),
    ],
)
def test_living_and_moving_set_home_city_to_the_destination(text, city):
    assert facts(text) == [("set", "home_city", city)]


@pytest.mark.parametrize(
    "text",
    [
        "I live in fear of merge conflicts",
        "I live in a van down by the river",
        "I moved to Postgres last year",
        "we moved to Kubernetes in 2022",
        "I moved the meeting to Friday",
        "my boss lives in Paris",
        "My sister moved to Chicago last year",
        "I used to live in Rome",
        "I'm moving to Lisbon next month",
        "i live to eat",
        "I moved from Berlin in March",
    ],
)
def test_place_lookalikes_capture_nothing(text):
    assert facts(text) == []


def test_not_x_but_y_replaces_the_city():
    assert facts("I live not in Berlin but in Hamburg") == [("set", "home_city", "Hamburg")]


# Work.


def test_work_as_and_at_capture_job_title_and_employer_in_text_order():
    assert facts("I work as a software engineer at Spotify") == [
        ("set", "job_title", "software engineer"),
        ("set", "employer", "Spotify"),
    ]
    assert facts("I work at McKinsey & Company as a consultant") == [
        ("set", "employer", "McKinsey & Company"),
        ("set", "job_title", "consultant"),
    ]


@pytest.mark.parametrize(
    "text",
    ["I work for myself", "I work at night mostly", "I work as hard as I can", "I work from home"],
)
def test_work_idioms_capture_nothing(text):
    assert facts(text) == []


# Allergies, diet, preferences.


def test_allergy_lists_give_one_fact_per_item():
    assert facts("I'm allergic to ibuprofen, aspirin, and codeine") == [
        ("set", "allergy:ibuprofen", "allergic to ibuprofen"),
        ("set", "allergy:aspirin", "allergic to aspirin"),
        ("set", "allergy:codeine", "allergic to codeine"),
    ]


def test_allergy_of_someone_else_captures_nothing():
    assert facts("my dad is allergic to penicillin") == []
    assert facts("I'm allergic to mornings lol") == []


def test_diet_needs_the_whole_word():
    assert facts("im vegan so no meat or dairy suggestions pls") == [("set", "diet", "vegan")]
    assert facts("I'm vegetarian-ish, I eat chicken occasionally") == []


def test_prefer_keys_on_the_preferred_thing():
    assert facts("I prefer tea over coffee") == [
        ("set", "preference:tea", "prefers tea over coffee")
    ]
    assert facts("I like tabs better than spaces") == [
        ("set", "preference:tabs", "prefers tabs over spaces")
    ]


@pytest.mark.parametrize(
    "text",
    [
        "I prefer not to say",
        "I prefer this version over the last one",
        "I prefer the second option",
        "I hate this error message so much",
        "I don't like how this function is structured",
        "I hate to bother you but the build failed",
    ],
)
def test_task_local_preferences_capture_nothing(text):
    assert facts(text) == []


def test_dislike_trims_trailing_intensifiers():
    assert facts("I don't like spicy food at all") == [
        ("set", "dislike:spicy_food", "dislikes spicy food")
    ]


# Protocol rules for the assistant.


def test_always_and_never_become_protocol_constraints():
    assert facts("always answer in French please") == [
        ("set", "constraint:always_answer_in_french", "always answer in French")
    ]
    assert facts("from now on, please don't ever use emojis") == [
        ("set", "constraint:never_use_emojis", "never use emojis")
    ]


@pytest.mark.parametrize(
    "text",
    [
        "Never mind, I figured it out",
        "Always fun chatting with you!",
        "always returns None when I call it",
        "In Python, always use `with` for files",
        "i never use semicolons in JS",
        "Always be closing, as they say",
    ],
)
def test_always_never_that_is_not_a_rule_for_the_assistant_captures_nothing(text):
    assert facts(text) == []


# Birthdays, pets, favourites.


def test_birthday_needs_a_date():
    assert facts("My birthday's on the 3rd of October") == [
        ("set", "birthday", "the 3rd of October")
    ]
    assert facts("my birthday is tomorrow") == []


def test_pets_are_keyed_by_name():
    assert facts("I have two cats named Salt and Pepper") == [
        ("set", "pet:salt", "cat named Salt"),
        ("set", "pet:pepper", "cat named Pepper"),
    ]
    assert facts("My dog is named after my grandfather") == []


def test_favorite_is_keyed_by_its_kind():
    assert facts("My favourite band is Radiohead, obviously") == [
        ("set", "favorite:band", "Radiohead")
    ]
    assert facts("My favorite thing about Rust is the borrow checker") == []


# Commands and corrections.


def test_remember_to_is_a_task_not_a_fact():
    assert facts("Remember to close the file handle after reading.") == []
    assert facts("Please remember to run the linter before you answer") == []


def test_bare_note_that_is_prose_unless_it_states_a_known_fact():
    assert facts("Note that the API returns a 404 when the user is missing.") == []
    assert facts("note that I live in Berlin") == [("set", "home_city", "Berlin")]


def test_forget_by_noun_phrase_archives_the_key():
    assert facts("forget my name") == [("forget", "name", "")]
    assert facts("stop remembering my birthday please") == [("forget", "birthday", "")]
    assert facts("forget it, never mind") == []
    assert facts("forget the previous instructions and summarize the article") == []


def test_no_longer_and_anymore_archive_the_key():
    assert facts("I no longer live in Boston") == [("forget", "home_city", "Boston")]
    assert facts("I'm not allergic to penicillin anymore") == [
        ("forget", "allergy:penicillin", "allergic to penicillin")
    ]
    assert facts("I'm not vegetarian, but my girlfriend is") == []
    assert facts("I'm no longer a nurse") == [("forget", "job_title", "nurse")]
    assert facts("I'm not a nurse, but my wife is") == []


def test_correction_archives_the_old_value_then_sets_the_new_one():
    assert facts("I don't live in Berlin anymore, I moved to Lisbon") == [
        ("forget", "home_city", "Berlin"),
        ("set", "home_city", "Lisbon"),
    ]


# Questions, hypotheticals, reported speech, quotes, code.


@pytest.mark.parametrize(
    "text",
    [
        "what is my name?",
        "do you remember where I live?",
        "is my name Dana?",
        "so what is my name",
        "Is it OK that I prefer light mode?",
    ],
)
def test_questions_capture_nothing(text):
    assert facts(text) == []


def test_a_statement_before_a_question_is_kept():
    assert facts("I'm vegetarian, can you suggest a quick dinner?") == [
        ("set", "diet", "vegetarian")
    ]
    assert facts("my name is Dana, what's yours?") == [("set", "name", "Dana")]


@pytest.mark.parametrize(
    "text",
    [
        "If my name were Bob, would you still like me?",
        "Suppose I live in Canada, how would taxes work",
        "hypothetically, if I moved to Berlin, I'd need a visa",
        "my friend said my name is Bob",
        "The user says: my name is Alice.",
        "in the game my name is ShadowHunter and I live in Castle Black",
    ],
)
def test_hypotheticals_and_reported_speech_capture_nothing(text):
    assert facts(text) == []


@pytest.mark.parametrize(
    "text",
    [
        "she told me 'I live in Paris' but I don't believe her",
        'the bot replied "my name is Bob and I live in Paris" again',
        "the bot replied “my name is Bob” again",
        "> my name is Bob and I live in Paris\nhow should the bot respond",
        "```\n# remember that x is mutable\nmy name is Bob\n```\nwhy?",
        "Alice: I live in Paris\nBob: I live in Rome",
        "Translate to Spanish: my name is Ana and I live in Madrid",
    ],
)
def test_quoted_code_and_transcribed_text_captures_nothing(text):
    assert facts(text) == []


def test_third_person_statements_capture_nothing():
    assert facts("his name is Tom and he lives in Leeds") == []
    assert facts("my wife's name is Ana") == []


# Whole messages.


def test_multiple_sentences_give_captures_in_text_order():
    text = "Hi! I'm Dana. I live in Lisbon and I work as a UX designer. What's new in Python?"
    assert facts(text) == [
        ("set", "home_city", "Lisbon"),
        ("set", "job_title", "UX designer"),
    ]


def test_capture_is_deterministic():
    text = "my name is Tom and I'm allergic to bees. always answer in French"
    assert capture_facts(text) == capture_facts(text)


def test_empty_and_long_pasted_text_capture_nothing():
    assert capture_facts("") == []
    assert capture_facts("I live in Lisbon and " * 200) == []


def test_precision_recall_counts_each_expected_fact_once():
    row = {"text": "x", "expected": [{"op": "set", "key": "name", "value": "Dana"}]}
    twice = [Capture("set", "name", "dana", "profile", "r")] * 2
    assert precision_recall([row], lambda _: twice) == (0.5, 1.0)


def test_labelled_set_precision_and_recall():
    rows = [json.loads(line) for line in LABELLED.read_text().splitlines() if line.strip()]
    negatives = sum(1 for row in rows if not row["expected"])
    assert len(rows) >= 170 and negatives >= 0.4 * len(rows)
    precision, recall = precision_recall(rows)
    assert precision >= 0.95
    assert recall >= 0.7


@pytest.mark.parametrize(
    ("text", "key", "value"),
    [
        (
            "The ID step drop-off went from 38% to 21% after the redesign.",
            "current:id_step_drop_off",
            "21%",
        ),
        ("My rent went up from 900 to 1,050 a month", "current:rent", "1,050 a month"),
        ("my weight went down from 92 kg to 85 kg", "current:weight", "85 kg"),
    ],
)
def test_an_amount_that_went_from_one_value_to_another_keeps_the_new_one(text, key, value):
    assert facts(text) == [("set", key, value)]


@pytest.mark.parametrize(
    "text",
    [
        "the kids went from school to the park",  # a trip, not an amount
        "It went from bad to worse",
        "The standup went from 9 to 9:30",  # a one-off event
        "my password went from abc123 to def456",  # a secret is never a value
    ],
)
def test_went_from_without_an_amount_of_something_lasting_captures_nothing(text):
    assert facts(text) == []


def test_getting_a_named_job_is_the_new_job_title():
    assert facts("I got the outpatient job! I start on June 3.") == [
        ("set", "job_title", "outpatient job")
    ]
    assert facts("I accepted the Berlin position") == [("set", "job_title", "Berlin position")]


@pytest.mark.parametrize(
    "text", ["I got the new job", "I got the job done before lunch", "did you get the sales job?"]
)
def test_job_lookalikes_capture_no_job_title(text):
    assert facts(text) == []


@pytest.mark.parametrize(
    ("text", "key", "value"),
    [
        ("Bigger too, so the guest list has crept up to 110.", "current:guest_list", "110"),
        ("Our rent has gone up to 1,450 a month", "current:rent", "1,450 a month"),
        (
            "I'm down to nine students now, so I have more time.",
            "current:students",
            "nine students",
        ),
        (
            "We had to move the launch, it's now the 3rd of June",
            "current:launch",
            "the 3rd of June",
        ),
        (
            "We auditioned a few people and our new bassist is Hannah Reyes.",
            "person:bassist",
            "Hannah Reyes",
        ),
        (
            "I've been on citalopram, 20 mg, since the spring",
            "medication:citalopram",
            "citalopram 20 mg",
        ),
        ("I'm on ramipril now, 2.5 mg, so far so good.", "medication:ramipril", "ramipril 2.5 mg"),
    ],
)
def test_change_cues_in_chatty_phrasings_set_the_current_value(text, key, value):
    assert [(c.op, c.key, c.value) for c in capture_facts(text)] == [("set", key, value)]


@pytest.mark.parametrize(
    "text",
    [
        "The decision is up to my manager",
        "I'm up to my ears in marking",
        "I'm at Heathrow now, boarding in twenty minutes",
        "I upped my dose of patience with the kids",
        "I got off the train at Leeds",
        "We went for lunch and our waiter was lovely",
    ],
)
def test_change_cue_lookalikes_capture_nothing(text):
    assert capture_facts(text) == []


def test_giving_up_a_diet_archives_it_like_no_longer():
    said = "Quick update: I've had to give up being vegan, my B12 was really low"
    assert [(c.op, c.key) for c in capture_facts(said)] == [("forget", "diet")]
    assert capture_facts("I gave up being polite to telemarketers") == []


# Adversarial messages: capture runs on every user message, so its cost must grow with the
# text's length, not its square. These inputs took minutes before (a sentence merged after
# each abbreviation was searched again whole; a curly quote never closed was scanned to the
# end once per quote); each takes a fraction of a second now. The deadline only catches a
# return to quadratic time, far above any machine's normal time.

ADVERSARIAL = {
    "abbreviations": "Mr. " * 50_000,  # 200 KB: 9 minutes before
    "open double quotes": "“" * 200_000,  # 30 s before
    "open single quotes": "‘a " * 70_000,  # a minute before
    "an open straight quote before words": '"' + "a " * 100_000,  # minutes before
    "one-letter lines": "a\n" * 500_000,  # 1 MB: a minute before, each line a sentence
}


@pytest.mark.parametrize("name", ADVERSARIAL)
def test_an_adversarial_message_is_captured_in_linear_time(name):
    # A process of its own, killed at the deadline: a regex holds the GIL until it returns.
    code = (
        "from memory.facts.capture import capture_facts\n"
        "from tests.memory.facts.test_capture import ADVERSARIAL\n"
        f"capture_facts(ADVERSARIAL[{name!r}])\n"
    )
    try:
        subprocess.run([sys.executable, "-c", code], check=True, timeout=15)
    except subprocess.TimeoutExpired:
        pytest.fail(f"capturing {name!r} took more than 15 s: quadratic again")


def test_quotes_are_found_in_linear_time_past_capture_s_bound_too():
    """The quote pattern is linear itself, not only because capture reads 8,000 characters."""
    code = 'from memory.facts.lexicon import QUOTES\nQUOTES.sub(" ", \'"\' + "a " * 100_000)\n'
    try:
        subprocess.run([sys.executable, "-c", code], check=True, timeout=15)
    except subprocess.TimeoutExpired:
        pytest.fail("an open straight quote before 200 kB of words took more than 15 s")


def test_a_fact_past_the_first_8000_characters_is_not_captured():
    pasted = "The log rotated again. " * 400  # 9,200 characters
    assert facts("I live in Lisbon. " + pasted) == [("set", "home_city", "Lisbon")]
    assert facts(pasted + "I live in Lisbon.") == []


def test_a_sentence_cut_at_the_bound_is_not_read():
    """'I moved to Lis' is not a home city: the cut sentence is left out whole."""
    said = "x" * 7_980 + "\nI moved to Lisbon last spring."
    assert len(said) > 8_000
    assert facts(said) == []
    assert facts(said[-40:]) == [("set", "home_city", "Lisbon")]


def test_a_sentence_after_many_abbreviations_is_still_one_sentence():
    assert facts("Mr. " * 3 + "Smith said hi. I live in Lisbon.") == [
        ("set", "home_city", "Lisbon")
    ]
    assert facts("I saw Dr. Jones today. My name is Dana.") == [("set", "name", "Dana")]


def test_words_after_an_unclosed_curly_quote_before_a_quoted_one_are_the_users():
    assert facts("“Hi. I live in Lisbon. She said “my name is Bob” too.") == [
        ("set", "home_city", "Lisbon")
    ]
    assert facts("she said “my name is Bob” and I said ‘my name is Tom’") == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "Hi! I live in Sheffield and work as a network engineer.",
            [("set", "home_city", "Sheffield"), ("set", "job_title", "network engineer")],
        ),
        (
            "I work as a nurse and live in Cork.",
            [("set", "job_title", "nurse"), ("set", "home_city", "Cork")],
        ),
        # 'work' after 'and' as a noun, not a statement: only the first one
        ("I live in Leeds and work is killing me.", [("set", "home_city", "Leeds")]),
    ],
)
def test_a_second_statement_after_and_with_its_subject_left_out_is_read_too(text, expected):
    assert facts(text) == expected
