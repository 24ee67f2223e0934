"""The abstention gate: excerpts are withheld when no hit stands out of the question's topic."""

from memory import Settings
from memory.recall.abstention import (
    TOPIC_SIZE,
    answerable_probability,
    asks_for_the_present,
    gate_signals,
    is_a_request,
    is_dated,
    nothing_stands_out,
    standout,
)
from memory.recall.identifiers import _identifiers, gives_the_kind_asked_for
from memory.records import Chunk, Hit

Q = "What did I say about the trip?"


def measured(candidates):
    return sum(h.similarity is not None for h in candidates)


def hits(*cosines, text="turn", role="user"):
    return [
        Hit(Chunk(i, i, "u", "s", role, None, f"{text} {i}", 0.0), 1.0 - i / 100, cos, i, None)
        for i, cos in enumerate(cosines, start=1)
    ]


DEFAULT = Settings().min_answerable


def learned(query, kept, expanded=False, min_answerable=DEFAULT):
    """The learned gate alone (the standout rule off), on a store of TOPIC_SIZE candidates."""
    return nothing_stands_out(query, TOPIC_SIZE, kept, 3.0, 0.0, min_answerable, expanded)


def test_standout_is_the_best_cosine_plus_its_weighted_lead_over_the_topic_median():
    found = hits(0.6, 0.5, 0.4, 0.4, 0.4, 0.4, 0.4, 0.4, 0.4, 0.4, 0.1)
    assert round(standout(found, 3.0), 6) == round(0.6 + 3 * (0.6 - 0.4), 6)


def test_a_topic_of_alike_turns_is_silenced_and_one_that_stands_out_is_not():
    alike = hits(0.42, *[0.40] * 11)
    answer = hits(0.62, *[0.40] * 11)
    assert nothing_stands_out(Q, measured(alike), alike, 3.0, 0.5)
    assert not nothing_stands_out(Q, measured(answer), answer, 3.0, 0.5)


def test_the_gate_stays_open_for_a_small_store_and_when_turned_off():
    few = hits(*[0.3] * (TOPIC_SIZE - 1))
    many = hits(*[0.3] * TOPIC_SIZE)
    assert not nothing_stands_out(Q, measured(few), few, 3.0, 0.5)
    assert nothing_stands_out(Q, measured(many), many, 3.0, 0.5)
    assert not nothing_stands_out(Q, measured(many), many, 3.0, 0.0)


def test_the_median_is_over_the_hits_kept_after_the_floors():
    candidates = hits(0.45, 0.2, 0.2, 0.2, 0.2, 0.2, 0.2, 0.2, 0.2, 0.2)
    assert not nothing_stands_out(Q, measured(candidates), candidates, 3.0, 0.5)
    assert nothing_stands_out(
        Q, measured(candidates), candidates[:1], 3.0, 0.5
    )  # a lone kept hit: no lead


def test_an_identifier_the_question_names_and_a_kept_hit_holds_keeps_the_gate_open():
    ticket = hits(0.42, *[0.40] * 11, text="the outage ticket was INC-48213, closed")
    flag = hits(0.42, *[0.40] * 11, text="we turned on feature_flag_x")
    assert not nothing_stands_out(
        "Which ticket was INC-48213 about?", measured(ticket), ticket, 3.0, 0.5
    )
    assert not nothing_stands_out("what does feature_flag_x do?", measured(flag), flag, 3.0, 0.5)
    # an identifier that no kept hit holds does not open it
    assert nothing_stands_out(
        "Which ticket was INC-99999 about?", measured(ticket), ticket, 3.0, 0.5
    )


def test_a_question_asking_for_an_identifier_by_its_kind_opens_the_gate_on_one_given():
    """A code said inside a long message is a lone kept hit with no lead ('a lone kept hit: no
    lead' above); asked for by its kind, the kind's word with a token holding a digit after it
    is the answer."""
    vault = hits(0.46, text="the build log, then the vault code is QX-7741-ZZ, keep it safe")
    asked = "What is the vault code?"
    assert gives_the_kind_asked_for(asked, vault)
    assert not nothing_stands_out(asked, TOPIC_SIZE, vault, 3.0, 0.5)
    assert gives_the_kind_asked_for("my PIN?", hits(0.4, text="PIN 4471, don't tell"))
    # the kind without a code after it, another kind, or no kind asked: the gate decides
    chat = hits(0.46, text="I keep forgetting the vault code, it is long and has 11 characters")
    assert not gives_the_kind_asked_for(asked, chat)
    assert not gives_the_kind_asked_for("What is my passport number?", vault)
    assert not gives_the_kind_asked_for("Where is the vault?", vault)
    assert nothing_stands_out("What did I plant in the garden?", TOPIC_SIZE, vault, 3.0, 0.5)


def test_a_code_further_on_in_the_kinds_clause_is_given_but_not_a_count_or_another_clause():
    serial = hits(0.47, text="the serial on the back of the dishwasher is SN-4471-XQ9, thanks")
    assert gives_the_kind_asked_for("What was the dishwasher's serial again?", serial)
    order = hits(0.34, text="my order number for the standing desk is #A-20931-77 and it")
    assert gives_the_kind_asked_for("Which order number was the desk?", order)
    # further on, the hit must say what the code is of: an order number is no passport number
    assert not gives_the_kind_asked_for("What's my passport number?", order)
    # a count is not a code, and a code past a comma or a full stop is another clause's
    count = hits(0.46, text="I keep forgetting the vault code and it has 11 characters")
    assert not gives_the_kind_asked_for("What is the vault code?", count)
    past = hits(0.46, text="the vault code is on a card somewhere. The gate is QX-7741-ZZ")
    assert not gives_the_kind_asked_for("What is the vault code?", past)


def test_identifiers_are_whole_runs_however_long_the_question():
    asked = "Was it INC-48213, v2.4.1 or 10.0.3.7 on .api.internal/ with feature_flag_x? ok"
    assert _identifiers(asked) == {
        "inc-48213",
        "v2.4.1",
        "10.0.3.7",
        "api.internal",
        "feature_flag_x",
    }
    assert _identifiers("a" * 100_000 + " and x_" + "b" * 100_000) == {"x_" + "b" * 100_000}
    assert _identifiers("-a" * 50_000) == {("a-" * 50_000)[:-1]}
    assert _identifiers("a" * 100_000 + "7") == {"a" * 100_000 + "7"}


def test_a_question_asking_for_the_present_keeps_the_gate_open():
    alike = hits(0.42, *[0.40] * 11)
    for asked in (
        "Which gym do I go to now?",
        "What is my commute these days?",  # (a rent asked of turns with no sum closes: amounts.py)
        "Who coaches the team currently?",
        "What car do we have at the moment?",
        "Am I still on the night rota?",
        "What's my current dose?",
        "Which course am I taking this year?",
        "Who is my latest client?",
    ):
        assert not nothing_stands_out(asked, measured(alike), alike, 3.0, 0.5), asked
    # 'now' inside a word, or a question about the past, asks for nothing present
    for asked in (
        "Do you know which gym I go to?",
        "What did I pack for the snowboard trip?",
        "Which campsite are we booking for next summer?",
    ):
        assert nothing_stands_out(asked, measured(alike), alike, 3.0, 0.5), asked


def test_a_dated_question_keeps_the_gate_open():
    alike = hits(0.42, *[0.40] * 11)
    for asked in (
        "Which gym did I go to in 2019?",
        "What injury did I come back with in July?",
        "How many hives did I have as of October?",  # (a rent asked: amounts.py)
        "What did I plant last spring?",
        "Where did we stay since early March?",
    ):
        assert is_dated(asked), asked
        assert not nothing_stands_out(asked, measured(alike), alike, 3.0, 0.5), asked


def test_words_that_only_look_like_a_date_or_the_present_do_not_open_the_gate():
    for asked in (
        "May I ask which gym I go to?",  # the modal, not the month
        "Which campsite are we booking for next summer?",  # a plan, not a date
        "What did I say in the marching band?",
        "How many days are in 12 weeks?",
        "Which thisyear folder holds the photos?",
    ):
        assert not is_dated(asked), asked
        assert not asks_for_the_present(asked), asked


def test_a_request_for_advice_or_a_suggestion_keeps_the_gate_open():
    """A request asks for no stored detail: what bears on it ('I don't drink', said months
    before 'Can you plan a night out for my birthday?') stands out of nothing."""
    alike = hits(0.42, *[0.40] * 11)
    for asked in (
        "Can you plan a night out for my birthday with the lads from work?",
        "Any ideas for snacks to take on a long field day?",
        "Suggest a quick lunch I can eat one-handed.",
        "Could you recommend a tool to speed up grading essays?",
        "When should I block time to work on the discussion section?",
        "Which frames should we order for the new colonies?",
        "please draft an agenda for the meeting",
    ):
        assert is_a_request(asked), asked
        assert not nothing_stands_out(asked, measured(alike), alike, 3.0, 0.5), asked
    # a question for a detail, even one naming a suggestion, is gated as before
    for asked in (
        "Which restaurant did Sam suggest?",
        "What did the plumber recommend?",
        "Who planned the trip?",
        "Can you remind me which gym I joined?",
    ):
        assert not is_a_request(asked), asked
        assert nothing_stands_out(asked, measured(alike), alike, 3.0, 0.5), asked


TRIP = "Which campsite did we book for the trip?"


def test_the_learned_gate_reads_the_cosines_and_the_question_words_the_best_hits_hold():
    found = hits(0.42, 0.30, 0.28, text="the campsite to book for the trip")
    read = gate_signals(TRIP, found, expanded=False)
    assert (read.best, read.second, read.median) == (0.42, 0.30, 0.30)
    assert (read.kept, read.user_turn, read.length) == (3, True, len(found[0].chunk.text))
    assert read.covered == 1.0  # campsite, book, trip: each in the three best hits
    # the same cosines: a turn holding the question's words is let through, another is not
    assert not learned(TRIP, found)
    assert learned(TRIP, hits(0.42, 0.30, 0.28))
    assert answerable_probability(read) > answerable_probability(
        gate_signals(TRIP, hits(0.42, 0.30, 0.28), expanded=False)
    )


def test_the_learned_gate_weighs_what_the_standout_rule_could_not():
    """A lone user turn leading weak ones stands out (0.4 + 3 × 0.1 = 0.7) yet most often is
    the user asking about the topic; the vocabulary expansion firing (the question is the
    user's own words for something said) lets it through."""
    lead = hits(0.40, 0.30, 0.28)
    assert not nothing_stands_out(TRIP, TOPIC_SIZE, lead, 3.0, 0.5)  # the standout rule
    assert learned(TRIP, lead)
    assert not learned(TRIP, lead, expanded=True)
    # an assistant's reply as the best hit is less often a topic's passing mention
    assert not learned(TRIP, hits(0.40, 0.30, 0.28, role="assistant"))


def test_a_name_asked_for_and_given_by_no_kept_turn_lowers_the_odds():
    """A who- or name-question reaches the learned gate only when no kept turn gives the
    user's one by name (names.py opens those): the name was seldom said."""
    found = hits(
        0.38, 0.30, 0.28, text="the name of the campsite to book for the trip", role="assistant"
    )
    named = "What's the name of the campsite we booked for the trip?"
    plain = "What's the campsite we booked for the trip?"
    assert gate_signals(named, found, expanded=False).asks_name
    assert not gate_signals(plain, found, expanded=False).asks_name
    assert learned(named, found)
    assert not learned(plain, found)


def test_the_learned_gate_is_off_at_zero_and_keeps_the_rules_that_open_the_gate():
    lead = hits(0.40, 0.30, 0.28)
    assert not learned(TRIP, lead, min_answerable=0.0)
    assert not nothing_stands_out(TRIP, TOPIC_SIZE - 1, lead, 3.0, 0.0, 0.52)  # a small store
    assert not learned("Which campsite should we book for the trip?", lead)  # a request
    assert not learned("Which campsite did we book in July?", lead)  # dated
