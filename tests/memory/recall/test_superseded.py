"""memory/recall/superseded.py on real SQLite: which stored replies a request replaced."""

import pytest

from memory.ingest.turns import Turn, store_turn
from memory.recall.superseded import replaced_replies
from memory.records import Chunk, Hit
from memory.store.store import Store

SYSTEM = {"role": "system", "content": "You are terse."}


def said(role, text):
    return {"role": role, "content": text}


@pytest.fixture
def store(tmp_path):
    return Store(tmp_path / "moim.db")


def store_history(store, *messages, session="s-1"):
    """Store `messages` in order, as turns sent one after another (replies last)."""
    for message in messages:
        turn = Turn(
            "ana", session, "gpt-4o-mini", (message,), None, 1_700_000_000.0, continues=True
        )
        store_turn(store, turn)
    return {m.content: m for m in store.messages("ana", session)}


def hits(*messages):
    return [
        Hit(
            Chunk(m.id, m.id, m.user_id, m.session_id, m.role, None, m.content, 0.0), 1.0, 1.0, 1, 1
        )
        for m in messages
    ]


def test_replies_to_the_question_asked_again_are_replaced(store):
    stored = store_history(store, said("user", "Dinner?"), said("assistant", "Gusto."))
    stored |= store_history(store, said("assistant", "Sal."))  # regenerated
    request = [SYSTEM, said("user", "Dinner?")]
    found = hits(stored["Gusto."], stored["Sal."])
    assert replaced_replies(store, "ana", "s-1", request, found) == {
        stored["Gusto."].id,
        stored["Sal."].id,
    }


def test_the_reply_a_request_goes_on_from_replaces_the_others(store):
    stored = store_history(
        store, said("user", "Dinner?"), said("assistant", "Gusto."), said("assistant", "Sal.")
    )
    request = [SYSTEM, said("user", "Dinner?"), said("assistant", "Sal."), said("user", "Why?")]
    found = hits(stored["Gusto."])
    assert replaced_replies(store, "ana", "s-1", request, found) == {stored["Gusto."].id}
    assert replaced_replies(store, "ana", "s-2", request, found) == set()  # another session's


def test_a_turn_the_window_dropped_is_not_replaced(store):
    stored = store_history(
        store,
        said("user", "Dinner?"),
        said("assistant", "Gusto."),
        said("user", "Lunch?"),
        said("assistant", "Sal."),
    )
    found = hits(stored["Gusto."])
    sliding = [SYSTEM, said("assistant", "Sal."), said("user", "Thanks")]
    first_and_last = [SYSTEM, said("user", "Dinner?"), said("assistant", "Sal.")]
    assert replaced_replies(store, "ana", "s-1", sliding, found) == set()
    assert replaced_replies(store, "ana", "s-1", first_and_last, found) == set()


def test_a_reply_to_the_same_words_said_before_is_not_replaced(store):
    """A window that dropped an earlier "yes" and its reply, ending in a new "yes"."""
    stored = store_history(
        store,
        said("user", "Descale the kettle?"),
        said("assistant", "With citric acid?"),
        said("user", "yes"),
        said("assistant", "Boil, wait, rinse."),
        said("user", "Water the ferns?"),
        said("assistant", "Now?"),
    )
    request = [
        SYSTEM,
        said("user", "Water the ferns?"),
        said("assistant", "Now?"),
        said("user", "yes"),
    ]
    found = hits(stored["Boil, wait, rinse."])
    assert replaced_replies(store, "ana", "s-1", request, found) == set()
