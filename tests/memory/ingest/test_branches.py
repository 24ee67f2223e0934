"""memory/ingest/branches.py on real SQLite: which stored messages a conversation left behind."""

import itertools

import pytest

from memory.ingest.branches import edited_away, reads_as_an_edit
from memory.ingest.turns import Turn, store_turn
from memory.store.left_messages import LEFT
from memory.store.store import Store

SYSTEM = {"role": "system", "content": "You are terse."}
HI = {"role": "user", "content": "Hi, I need help planning a dinner party."}
HELLO = {"role": "assistant", "content": "Happy to help. How many guests?"}
EIGHT = {"role": "user", "content": "Eight guests on Saturday, one of them is vegan."}


def said(role, text):
    return {"role": role, "content": text}


@pytest.fixture
def store(tmp_path):
    return Store(tmp_path / "moim.db")


CLOCK = itertools.count()


def send(store, messages, reply, at=None, arrived=None, named=False):
    """One request and its reply, stored as the writer stores a turn (by default a second
    after the one before, as a chat's turns are)."""
    at = 1_700_000_000.0 + next(CLOCK) if at is None else at
    turn = Turn("ana", "s-1", "gpt-4o-mini", tuple(messages), said("assistant", reply), at)
    turn = Turn(**{**_fields(turn), "arrived_at": arrived, "named_session": named})
    store_turn(store, turn)


def _fields(turn):
    return {name: getattr(turn, name) for name in turn.__dataclass_fields__}


def left(store):
    rows = store.read("SELECT content FROM messages WHERE indexed = ? ORDER BY id", (LEFT,))
    return [row[0] for row in rows]


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("My flight is on Tuesday the 14th.", "My flight is on Wednesday the 15th."),
        ("Whats teh capital of france", "What's the capital of France?"),
        ("yes", "yes please"),
        ("Plan a trip to Rome for 3 days", "Plan a trip to Rome for 5 days with the kids"),
    ],
)
def test_an_edit_reads_as_one(old, new):
    assert reads_as_an_edit(old, new)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("yes", "no"),
        ("What's a good museum in Copenhagen?", "Can you fix this Python traceback for me?"),
        ("Thanks!", "Now summarise the meeting notes I pasted earlier."),
    ],
)
def test_another_message_does_not(old, new):
    assert not reads_as_an_edit(old, new)


def test_a_regenerated_reply_is_left(store):
    send(store, [SYSTEM, HI], "Sure. How many guests?")
    send(store, [SYSTEM, HI], "Happy to help. How many guests?")
    assert left(store) == ["Sure. How many guests?"]


VEGAN = {"role": "assistant", "content": "Then plan a vegan main."}


def chatted(store):
    """A chat's first two turns: HELLO is the reply to HI, EIGHT is said a turn later."""
    send(store, [SYSTEM, HI], HELLO["content"], at=1_699_999_000.0)
    send(store, [SYSTEM, HI, HELLO, EIGHT], "Then plan a vegan main.")


def test_an_edited_message_and_its_reply_are_left(store):
    chatted(store)
    send(store, [SYSTEM, HI, HELLO, said("user", "Six guests on Saturday, one is vegan.")], "OK.")
    assert left(store) == [EIGHT["content"], "Then plan a vegan main."]


def test_an_edit_after_a_reply_the_client_rewrote_is_left(store):
    """A client that drops a think block from the reply it resends: the rewritten reply is
    stored with the next message, in one turn; an edit of that message is still an edit."""
    send(store, [SYSTEM, HI], "<think>guests?</think>" + HELLO["content"])
    send(store, [SYSTEM, HI, HELLO, EIGHT], "Then plan a vegan main.")
    send(store, [SYSTEM, HI, HELLO, said("user", "Six guests on Saturday, one is vegan.")], "OK.")
    assert left(store)[-2:] == [EIGHT["content"], "Then plan a vegan main."]


def test_an_input_sent_with_the_reply_it_follows_edits_nothing(store):
    """A few-shot prompt: the worked example (HI, HELLO) is sent with each input of a
    pipeline, in one derived session; two inputs of one template are two requests."""
    send(store, [SYSTEM, HI, HELLO, EIGHT], "Then plan a vegan main.")
    send(store, [SYSTEM, HI, HELLO, said("user", "Six guests on Saturday, one is vegan.")], "OK.")
    assert left(store) == []


SIX = said("user", "Six guests on Saturday, one is vegan.")
OK = said("assistant", "OK.")
THANKS = said("user", "Thanks, and a dessert?")


def test_an_edit_of_the_first_requests_input_is_left_once_the_chat_goes_on(store):
    """moim added mid-chat (or a client that opens with a history): the first request holds
    HI, HELLO and EIGHT; EIGHT edited reads as a pipeline's next input until the chat goes
    on from the edit, which no pipeline does."""
    send(store, [SYSTEM, HI, HELLO, EIGHT], "Then plan a vegan main.")
    send(store, [SYSTEM, HI, HELLO, SIX], OK["content"])
    assert left(store) == []
    send(store, [SYSTEM, HI, HELLO, SIX, OK, THANKS], "Sorbet.")
    assert left(store) == [EIGHT["content"], "Then plan a vegan main."]


def test_a_few_shot_pipelines_inputs_and_a_retry_edit_nothing(store):
    send(store, [SYSTEM, HI, HELLO, EIGHT], "Then plan a vegan main.")
    send(store, [SYSTEM, HI, HELLO, SIX], OK["content"])
    send(store, [SYSTEM, HI, HELLO, SIX], OK["content"])  # the same input again
    send(store, [SYSTEM, HI, HELLO, said("user", "Five guests on Saturday, one is vegan.")], "A")
    assert left(store) == []


def test_a_window_that_cuts_an_exchange_of_a_chat_leaves_nothing(store):
    """A chat moim saw from its start whose client drops its second exchange from the
    window: the next question reads like the dropped one, but it was said a turn later."""
    send(store, [SYSTEM, HI], HELLO["content"], at=1_699_999_000.0)
    send(store, [SYSTEM, HI, HELLO, EIGHT], "Then plan a vegan main.")
    send(store, [SYSTEM, HI, HELLO, EIGHT, VEGAN, SIX], OK["content"])
    send(store, [SYSTEM, HI, HELLO, SIX, OK, THANKS], "Sorbet.")
    assert left(store) == []


def test_more_than_one_exchange_skipped_after_the_first_request_leaves_nothing(store):
    first = [SYSTEM, HI, HELLO, EIGHT, VEGAN, said("user", "And drinks?")]
    send(store, first, "Sparkling water.")
    send(store, [SYSTEM, HI, HELLO, SIX], OK["content"])
    send(store, [SYSTEM, HI, HELLO, SIX, OK, THANKS], "Sorbet.")
    assert left(store) == []


def test_a_window_that_cuts_an_exchange_of_the_first_request_leaves_nothing(store):
    """moim added mid-chat: the first request holds the user's count said twice (EIGHT, then
    SIX after a reply); a window that drops the first of them later cuts an exchange of the
    first request, not one edited: SIX was said in that request too, not after it."""
    send(store, [SYSTEM, HI, HELLO, EIGHT, VEGAN, SIX, OK, THANKS], "Sorbet.")
    send(store, [SYSTEM, HI, HELLO, SIX, OK, THANKS, said("assistant", "Sorbet."), NEXT], "Y")
    assert left(store) == []


NEXT = said("user", "And what wine?")


def test_a_new_question_after_the_same_opening_leaves_nothing(store):
    send(store, [SYSTEM, HI, HELLO, EIGHT], "Then plan a vegan main.")
    send(store, [SYSTEM, HI, HELLO, said("user", "Which wine goes with mushroom risotto?")], "A")
    assert left(store) == []


def test_more_than_one_exchange_after_the_point_is_not_left(store):
    """Two conversations that open alike share a derived session: a longer record after the
    point where a request leaves it is more likely the other conversation's."""
    send(store, [SYSTEM, HI, HELLO, EIGHT], "Then plan a vegan main.")
    later = [SYSTEM, HI, HELLO, EIGHT, said("assistant", "Then plan a vegan main.")]
    send(store, [*later, said("user", "And a dessert?")], "Sorbet.")
    send(store, [SYSTEM, HI, HELLO, said("user", "Six guests on Saturday, one is vegan.")], "OK.")
    assert left(store) == []


def test_a_request_sent_before_the_record_was_made_leaves_nothing(store):
    """An agent that sends one history out to several requests at once: the first one's turn
    is stored after the second one arrived, and is no branch the second one left."""
    send(store, [SYSTEM, HI, HELLO, EIGHT], "Plan A.", at=1_700_000_100.0)
    sibling = said("user", "Eight guests on Sunday, one of them is vegan.")
    send(
        store, [SYSTEM, HI, HELLO, sibling], "Plan B.", at=1_700_000_200.0, arrived=1_700_000_050.0
    )
    assert left(store) == []


def test_requests_sent_together_with_a_replayed_time_leave_nothing(store):
    """The same fan-out replayed with X-Memory-Timestamp: its turns are stored at the time
    the client gives (the past), which says nothing of when they arrived; a record stored at
    the time of the request itself, or later, is a sibling's."""
    said_at, now = 1_600_000_000.0, 1_700_000_000.0
    send(store, [SYSTEM, HI], "Plan A.", at=said_at, arrived=now)
    send(store, [SYSTEM, HI], "Plan B.", at=said_at, arrived=now + 0.01)
    assert left(store) == []


def test_a_continued_reply_leaves_its_parts(store):
    """The UI's "continue": the reply is continued, then sent back joined as one message."""
    send(store, [SYSTEM, HI], "Happy to help.")
    send(store, [SYSTEM, HI, said("assistant", "Happy to help.")], " How many guests?")
    joined = said("assistant", "Happy to help. How many guests?")
    send(store, [SYSTEM, HI, joined, EIGHT], "Noted.")
    assert left(store) == ["Happy to help.", " How many guests?"]


def test_a_message_carried_again_is_indexed_again(store):
    send(store, [SYSTEM, HI, HELLO, EIGHT], "Then plan a vegan main.")
    send(store, [SYSTEM, HI, HELLO, said("user", "Six guests on Saturday, one is vegan.")], "OK.")
    back = [SYSTEM, HI, HELLO, EIGHT, said("assistant", "Then plan a vegan main.")]
    send(store, [*back, said("user", "And a dessert?")], "Sorbet.")
    assert left(store) == []


def test_a_journal_replayed_after_a_crash_keeps_the_edit(store):
    """A crash before the journal was emptied: its turns are stored again, the one before
    the edit too (it carries the message edited away, as the user sent it then); nothing is
    new in either, and the edit holds."""
    chatted(store)
    edited = [SYSTEM, HI, HELLO, said("user", "Six guests on Saturday, one is vegan.")]
    send(store, edited, "OK.")
    replayed = [
        Turn("ana", "s-1", "gpt-4o-mini", (SYSTEM, HI, HELLO, EIGHT), VEGAN, 1_700_000_000.5),
        Turn("ana", "s-1", "gpt-4o-mini", tuple(edited), said("assistant", "OK."), 1_700_000_001.0),
    ]
    for turn in replayed:
        store_turn(store, turn)
    assert left(store) == [EIGHT["content"], "Then plan a vegan main."]


def test_recall_hides_the_exchange_a_request_edits_before_its_turn_is_stored(store):
    chatted(store)
    edit = [SYSTEM, HI, HELLO, said("user", "Six guests on Saturday, one is vegan.")]
    unrelated = [SYSTEM, HI, HELLO, said("user", "Which wine goes with risotto?")]
    stored = {m.content: m.id for m in store.messages("ana")}

    assert edited_away(store, "ana", "s-1", edit) == [
        stored[EIGHT["content"]],
        stored["Then plan a vegan main."],
    ]
    assert edited_away(store, "ana", "s-1", unrelated) == []
    assert edited_away(store, "ana", "s-1", [SYSTEM, HI, HELLO, EIGHT]) == []  # sent again


def test_recall_hides_no_input_of_a_few_shot_prompt(store):
    send(store, [SYSTEM, HI, HELLO, EIGHT], "Then plan a vegan main.")
    other_input = [SYSTEM, HI, HELLO, said("user", "Six guests on Saturday, one is vegan.")]
    assert edited_away(store, "ana", "s-1", other_input) == []


@pytest.mark.parametrize(
    ("named", "expected"),
    [
        (False, []),  # derived: more than one exchange may be another conversation's
        (True, [EIGHT["content"], "Then plan a vegan main.", "And a dessert?", "Sorbet."]),
    ],
)
def test_in_a_named_session_an_older_message_edited_leaves_all_that_followed(
    store, named, expected
):
    history = [SYSTEM, HI, HELLO, EIGHT, said("assistant", "Then plan a vegan main.")]
    chatted(store)
    send(store, [*history, said("user", "And a dessert?")], "Sorbet.")
    edited = [SYSTEM, HI, HELLO, said("user", "Six guests on Saturday, one is vegan.")]
    send(store, edited, "OK.", named=named)
    assert left(store) == expected


def test_a_named_session_reused_by_a_conversation_that_opens_alike_keeps_the_first(store):
    """A client that sends one session id for several conversations (an agent's, a user's
    id as the session): a new one that opens alike goes another way right after the opening,
    and is no regeneration of everything the session said after it."""
    passport = said("user", "My passport number is X1234567 and it expires in May.")
    send(store, [SYSTEM, HI], HELLO["content"], named=True)
    send(store, [SYSTEM, HI, HELLO, passport], "Noted.", named=True)
    send(store, [SYSTEM, HI], "Sure, what are we planning?", named=True)
    assert left(store) == []


def test_going_back_to_an_earlier_answer_leaves_the_later_ones(store):
    """The UI's "< 2/3 >": three answers regenerated, the user goes on from the second."""
    for answer in ("Kestrel Inn.", "Merlin Lodge.", "Osprey House."):
        send(store, [SYSTEM, HI], answer)
    kept = said("assistant", "Merlin Lodge.")
    send(store, [SYSTEM, HI, kept, said("user", "Book it for Friday.")], "Done.")
    assert left(store) == ["Kestrel Inn.", "Osprey House."]
