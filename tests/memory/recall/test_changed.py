"""The gate stays open for a question about the user's present whose kept turns say it changed,
or whose subject has a history among them (a newer turn of the user's naming something new)."""

from memory.recall.abstention import TOPIC_SIZE, nothing_stands_out
from memory.recall.changed import asks_after_a_change, asks_after_a_history
from memory.records import Chunk, Hit

OLD = "I work at Kingsmead Academy, it's a big school and my head of department is good."
NEW = "Quick update, I've moved schools! I'm at Priory Park School now, started after half-term."
QUESTION = "Which school do I teach at?"


def hit(number, text, session, at, role="user", cosine=0.2):
    chunk = Chunk(number, number, "u", session, role, None, text, at)
    return Hit(chunk, 1.0 - number / 100, cosine, number, None)


def said(*turns):
    """Kept hits, best first: (text, session, time, role) each, then weak turns of the topic."""
    best = [hit(i, text, session, at, role) for i, (text, session, at, role) in enumerate(turns)]
    rest = [hit(len(turns) + i, f"training run {i}", "t", 0.0) for i in range(TOPIC_SIZE)]
    return best + rest


def test_two_conversations_on_the_questions_words_the_later_saying_it_changed():
    kept = said((NEW, "s2", 2.0, "user"), (OLD, "s1", 1.0, "user"))
    assert asks_after_a_change(QUESTION, kept)
    assert asks_after_a_change("Where am I teaching at the moment, which school?", kept)


def test_no_change_said_one_conversation_or_an_assistant_turn_does_not_open_it():
    unchanged = "I'm at Priory Park School, started after half-term."
    assert not asks_after_a_change(
        QUESTION, said((unchanged, "s2", 2.0, "user"), (OLD, "s1", 1.0, "user"))
    )
    assert not asks_after_a_change(
        QUESTION, said((NEW, "s1", 2.0, "user"), (OLD, "s1", 1.0, "user"))
    )
    assert not asks_after_a_change(
        QUESTION, said((NEW, "s2", 2.0, "assistant"), (OLD, "s1", 1.0, "user"))
    )
    # the change is said before the other turn, not after it
    assert not asks_after_a_change(
        QUESTION, said((NEW, "s2", 1.0, "user"), (OLD, "s1", 2.0, "user"))
    )


def test_a_question_after_a_past_detail_or_someone_elses_does_not_open_it():
    kept = said((NEW, "s2", 2.0, "user"), (OLD, "s1", 1.0, "user"))
    assert not asks_after_a_change("Which school did my sister teach at?", kept)
    assert not asks_after_a_change("What's the name of the school's head?", kept)


def test_the_learned_gate_withholds_the_topic_unless_it_changed():
    changed = said((NEW, "s2", 2.0, "user"), (OLD, "s1", 1.0, "user"))
    unchanged = said((OLD, "s2", 2.0, "user"), (OLD, "s1", 1.0, "user"))
    assert nothing_stands_out(QUESTION, TOPIC_SIZE, unchanged, 3.0, 0.0, 0.52)
    assert not nothing_stands_out(QUESTION, TOPIC_SIZE, changed, 3.0, 0.0, 0.52)


# The newer turn says where the user is without a change word (fresh2's "I've also started a
# new job as a network engineer at the council").
SINCE = "Good week! First days at Priory Park School since half-term, smaller, nicer kids."


def test_a_newer_turn_of_the_users_naming_something_new_on_the_questions_word_opens_it():
    kept = said((SINCE, "s2", 2.0, "user"), (OLD, "s1", 1.0, "user"))
    assert not asks_after_a_change(QUESTION, kept)  # no change word
    assert asks_after_a_history(QUESTION, kept)
    # the older turn may be the assistant's, and either may come first among the hits
    reply = "A big school like Kingsmead Academy can be a good place to start."
    assert asks_after_a_history(
        QUESTION, said((reply, "s1", 1.0, "assistant"), (SINCE, "s2", 2.0, "user"))
    )


def test_an_older_turn_on_other_words_of_the_question_naming_the_old_value_again_opens_it():
    old = "I'm an architect, I work at a small studio called Harbour Lane in Leeds."
    new = "Big news, I've left Harbour Lane and joined a bigger firm, Ashdown Vale."
    question = "Which firm do I work for?"  # "work" in the older turn, "firm" in the newer
    kept = said((new, "s2", 2.0, "user"), (old, "s1", 1.0, "user"))
    assert not asks_after_a_change(question, kept)  # no change word
    assert asks_after_a_history(question, kept)
    # without the old value named again, two words of the question are two subjects
    elsewhere = "Big news, I've joined a bigger firm, Ashdown Vale."
    assert not asks_after_a_history(
        question, said((elsewhere, "s2", 2.0, "user"), (old, "s1", 1.0, "user"))
    )


def test_no_history_on_the_subject_does_not_open_it():
    # one conversation; the newest turn on the subject the assistant's
    assert not asks_after_a_history(
        QUESTION, said((SINCE, "s1", 2.0, "user"), (OLD, "s1", 1.0, "user"))
    )
    assert not asks_after_a_history(
        QUESTION,
        said((SINCE, "s2", 2.0, "assistant"), (OLD, "s1", 1.0, "user")),
    )
    # the older turn is not among the three best kept hits
    run = ("My long run was 24 km along the canal.", "s3", 0.5, "user")
    fourth = said((SINCE, "s2", 2.0, "user"), run, run, (OLD, "s1", 1.0, "user"))
    assert not asks_after_a_history(QUESTION, fourth)
    # the two turns hold different words of the question: two subjects, not one's history
    taught = "I teach maths to year 11 at Kingsmead Academy."
    assert not asks_after_a_history(
        QUESTION, said((SINCE, "s2", 2.0, "user"), (taught, "s1", 1.0, "user"))
    )
    # the newer turn names nothing the older does not (nor "I", at no sentence's start)
    same = "Another long week, I love it at Kingsmead Academy, the school is good to me."
    assert not asks_after_a_history(
        QUESTION, said((same, "s2", 2.0, "user"), (OLD, "s1", 1.0, "user"))
    )


def test_a_question_about_something_of_the_users_asked_with_does_opens_it():
    old = "I'm on the red panda section, shifts start at 7:30 which is fine."
    new = "Big news, I'm on the elephant team, the elephant team starts at 6:45."
    question = "What time does my shift start?"
    kept = said((new, "s2", 2.0, "user"), (old, "s1", 1.0, "user"))
    assert asks_after_a_history(question, kept)
    assert not asks_after_a_history("What time did my shift start in May?", kept)


def test_a_question_after_a_past_detail_or_someone_elses_history_does_not_open_it():
    kept = said((SINCE, "s2", 2.0, "user"), (OLD, "s1", 1.0, "user"))
    assert not asks_after_a_history("Which school did my sister teach at?", kept)
    assert not asks_after_a_history("What's the name of the school's head?", kept)


def test_the_learned_gate_stays_open_for_a_subject_with_a_history():
    history = said((SINCE, "s2", 2.0, "user"), (OLD, "s1", 1.0, "user"))
    unchanged = said((OLD, "s2", 2.0, "user"), (OLD, "s1", 1.0, "user"))
    assert nothing_stands_out(QUESTION, TOPIC_SIZE, unchanged, 3.0, 0.0, 0.52)
    assert not nothing_stands_out(QUESTION, TOPIC_SIZE, history, 3.0, 0.0, 0.52)
