"""RecentTurns: which of a user's finished turns a request must wait for before recalling;
Progress: whether the writer would index them in time."""

import gc
import weakref

import pytest

from memory import Turn
from proxy.writer_progress import Progress
from proxy.writer_recent import RecentTurns


def turn(user="ann", session="s1", said="hello", reply="hi there", response_id=None):
    return Turn(
        user_id=user,
        session_id=session,
        model="m",
        messages=({"role": "user", "content": said},),
        reply={"role": "assistant", "content": reply} if reply is not None else None,
        created_at=0.0,
        response_id=response_id,
    )


def test_a_turn_of_another_conversation_is_waited_for():
    recent = RecentTurns()
    recent.add(turn(session="s1"), 5)
    asked = [{"role": "user", "content": "what did I say?"}]
    assert recent.awaited("ann", "s2", None, asked) == [5]


def test_a_turn_of_the_same_conversation_that_the_request_resends_is_not():
    recent = RecentTurns()
    recent.add(turn(session="s1", said="hello", reply="hi there"), 5)
    # the client resends the user's message; the reply it may have reworded
    resent = [
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": "Hi there!"},
        {"role": "user", "content": "and?"},
    ]
    assert recent.awaited("ann", "s1", None, resent) == []


def test_a_turn_of_the_same_conversation_that_the_client_dropped_is_waited_for():
    recent = RecentTurns()
    recent.add(turn(session="s1", said="my locker code is 31-07-19", reply="Noted."), 5)
    # a sliding window: the turn is gone, an alike reply ("Noted.") is still in it
    window = [
        {"role": "system", "content": "Summary: the user talked about the gym."},
        {"role": "assistant", "content": "Noted."},
        {"role": "user", "content": "What was my locker code?"},
    ]
    assert recent.awaited("ann", "s1", None, window) == [5]


def test_a_long_history_sent_at_once_and_then_only_its_end_is_waited_for():
    recent = RecentTurns()
    history = (
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "my locker code is 31-07-19"},
        {"role": "assistant", "content": "Noted."},
        {"role": "user", "content": "and a pasta recipe?"},
    )
    recent.add(Turn("ann", "s1", "m", history, {"role": "assistant", "content": "Sure."}, 0.0), 6)
    summary = {"role": "system", "content": "Summary: locker, pasta."}
    end = [summary, *history[3:], {"role": "assistant", "content": "Sure."}]
    assert recent.awaited("ann", "s1", None, [*end, {"role": "user", "content": "code?"}]) == [6]
    whole = [*history, {"role": "assistant", "content": "Sure!"}]  # a system prompt changed
    whole[0] = summary
    assert recent.awaited("ann", "s1", None, [*whole, {"role": "user", "content": "?"}]) == []


def test_a_turn_whose_message_and_reply_the_request_resends_is_not():
    recent = RecentTurns()
    recent.add(turn(session="s1", reply="It is on Tuesday."), 5)
    messages = [
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": "It is on Tuesday."},
        {"role": "user", "content": "thanks"},
    ]
    assert recent.awaited("ann", "other", None, messages) == []


def test_another_conversations_turn_with_an_alike_reply_is_waited_for():
    recent = RecentTurns()
    recent.add(turn(session="s1", said="my passport is K8812345Z", reply="Noted."), 5)
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "Noted."},
        {"role": "user", "content": "what is my passport number?"},
    ]
    assert recent.awaited("ann", "s2", None, messages) == [5]


def test_a_turn_without_a_reply_is_known_by_its_last_message():
    recent = RecentTurns()
    recent.add(turn(session="s1", said="my code is 4471", reply=None), 3)
    resent = [{"role": "user", "content": "my code is 4471"}]
    assert recent.awaited("ann", "other", None, resent) == []
    assert recent.awaited("ann", "other", None, [{"role": "user", "content": "x"}]) == [3]


def test_a_responses_request_continuing_the_reply_does_not_wait_for_it():
    recent = RecentTurns()
    recent.add(turn(session="s1", response_id="resp_1"), 4)
    asked = [{"role": "user", "content": "go on"}]
    assert recent.awaited("ann", "s9", "resp_1", asked) == []
    assert recent.awaited("ann", "s9", "resp_2", asked) == [4]


def test_another_users_turns_are_never_waited_for():
    recent = RecentTurns()
    recent.add(turn(user="bob"), 7)
    assert recent.awaited("ann", "s2", None, []) == []


def test_every_turn_not_carried_is_awaited_in_order():
    recent = RecentTurns()
    recent.add(turn(session="s1", reply="one"), 2)
    recent.add(turn(session="s2", reply="two"), 3)
    recent.add(turn(session="s3", said="and then", reply="three"), 4)
    # s3 is the request's own conversation, its turn resent: s1's and s2's, in order
    assert recent.awaited("ann", "s3", None, [{"role": "user", "content": "and then"}]) == [2, 3]


def test_indexed_turns_are_forgotten_in_order():
    recent = RecentTurns()
    recent.add(turn(user="ann", session="s1"), 2)
    recent.add(turn(user="bob", session="s1"), 3)
    recent.add(turn(user="ann", session="s2"), 4)
    recent.indexed(3)
    assert len(recent) == 1
    assert recent.awaited("bob", "x", None, []) == []
    assert recent.awaited("ann", "x", None, []) == [4]
    recent.indexed(4)
    assert len(recent) == 0
    assert recent.awaited("ann", "x", None, []) == []


def test_a_forgotten_users_turns_are_not_waited_for():
    recent = RecentTurns()
    recent.add(turn(user="ann"), 2)
    recent.add(turn(user="bob"), 3)
    recent.forget("ann")
    assert recent.awaited("ann", "x", None, []) == []
    assert len(recent) == 1
    recent.indexed(3)
    assert len(recent) == 0


def test_a_turn_whose_text_is_not_valid_unicode_is_noted_all_the_same():
    recent = RecentTurns()
    recent.add(turn(reply="broken \ud83d"), 2)
    assert recent.awaited("ann", "other", None, [{"role": "user", "content": "?"}]) == [2]


class _Said(dict):
    """A message a weak reference can follow (a plain dict cannot)."""


def test_no_text_of_a_noted_turn_is_held():
    """Under a writer backlog every submitted turn waits here until indexed, past the queue
    that lets its turns go once stored (or spilled to the journal): a few hashes each, not
    its history (an agent's: hundreds of kB, its JSON text beside it)."""
    recent = RecentTurns()
    said = _Said(role="user", content="my locker code is 31-07-19")
    reply = _Said(role="assistant", content="Noted.")
    held = weakref.ref(said), weakref.ref(reply)
    recent.add(Turn("ann", "s1", "m", (said,), reply, 0.0, messages_json="[...]"), 2)
    del said, reply
    gc.collect()
    assert [ref() for ref in held] == [None, None]
    asked = [{"role": "user", "content": "my locker code is 31-07-19"}]
    assert recent.awaited("ann", "s1", None, asked) == []
    assert recent.awaited("ann", "s2", None, asked) == [2]  # another's: its reply too


def test_the_writers_pace_is_what_its_recent_cycles_took_a_turn():
    progress = Progress()
    assert progress.seconds_until(progress.indexed + 10) == pytest.approx(0.5)  # 50 ms a turn
    for _ in range(30):  # cycles of 0.2 s that index two turns each: 0.1 s a turn
        before = progress.indexed
        progress._indexed += 2
        progress.worked(0.2, before)
    assert progress.seconds_until(progress.indexed + 10) == pytest.approx(1.0, rel=0.01)
    before = progress.indexed
    progress.worked(0.3, before)  # a cycle that finished no turn (a large one, sliced) ...
    progress._indexed += 1
    progress.worked(0.0, before)  # ... is paid for by the turn that ends it
    assert progress.seconds_per_turn > 0.1
    assert progress.seconds_until(progress.indexed - 5) == 0
