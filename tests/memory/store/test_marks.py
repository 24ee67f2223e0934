"""memory/store/marks.py on a real SQLite file and a real PostgreSQL: who is due for
consolidation.

A user is due once `min_new_turns` user or assistant messages arrived above their mark; the
mark is per user, never moves back, and goes with the user when the user is deleted. On
PostgreSQL no mark could be written (`message_id` was ambiguous in the upsert), so the
consolidation schedule asked the model about a user's same first turns every cycle.
"""

import pytest

from memory import DueUser, MemoryLayer, Settings, Turn


@pytest.fixture(params=["sqlite", "postgres"])
def layer(request, tmp_path, embedder):
    if request.param == "postgres":
        settings = Settings(db_url=request.getfixturevalue("pg_database")(), capture_facts=False)
    else:
        settings = Settings(db_path=tmp_path / "moim.db", capture_facts=False)
    layer = MemoryLayer(settings, embedder_factory=lambda _: embedder)
    _ = layer.embedder  # creates the vector table, as a running proxy has
    return layer


def chat(layer, user_id, *said, system=None):
    """One turn per text (each new to the session): said, then answered; return the newest id."""
    for index, text in enumerate(said):
        prompt = ({"role": "system", "content": system},) if system else ()
        layer.store_only(
            Turn(
                user_id=user_id,
                session_id="s1",
                model="gpt-4o-mini",
                messages=(*prompt, {"role": "user", "content": text}),
                reply={"role": "assistant", "content": f"noted: {text}"},
                created_at=1_715_558_400.0 + 60 * index,
            )
        )
    return layer.store.messages(user_id)[-1].id


def test_a_user_below_the_threshold_is_not_due_and_at_it_is(layer):
    newest = chat(layer, "ann", "one", "two")  # four turns: two said, two answered

    assert layer.users_due_for_consolidation(5) == []
    assert layer.users_due_for_consolidation(4) == [DueUser("ann", 4, newest)]


def test_only_user_and_assistant_messages_with_text_count(layer):
    chat(layer, "ann", "one", system="You are terse.")
    newest = chat(layer, "ann", "   \n")  # whitespace only: the model would read nothing

    assert [m.role for m in layer.store.messages("ann")] == [
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
    ]
    assert layer.users_due_for_consolidation(1) == [DueUser("ann", 3, newest)]


def test_after_the_mark_a_user_is_due_again_only_after_enough_new_turns(layer):
    marked = chat(layer, "ann", "one", "two")
    assert layer.mark_consolidated("ann", marked) is True
    assert layer.consolidated_through("ann") == marked
    assert layer.users_due_for_consolidation(1) == []

    chat(layer, "ann", "three")
    assert layer.users_due_for_consolidation(4) == []

    newest = chat(layer, "ann", "four")
    assert layer.users_due_for_consolidation(4) == [DueUser("ann", 4, newest)]


def test_marks_and_counts_are_per_user(layer):
    ann = chat(layer, "ann", "one", "two")
    bob = chat(layer, "bob", "one", "two")
    layer.mark_consolidated("ann", ann)

    assert layer.users_due_for_consolidation(4) == [DueUser("bob", 4, bob)]
    assert layer.users_due_for_consolidation(1, user_id="ann") == []
    assert layer.users_due_for_consolidation(1, user_id="bob") == [DueUser("bob", 4, bob)]
    assert (layer.consolidated_through("ann"), layer.consolidated_through("bob")) == (ann, 0)


def test_a_mark_needs_a_message_of_that_user(layer):
    ann = chat(layer, "ann", "one")

    assert layer.mark_consolidated("bob", ann) is False  # ann's message, not bob's
    assert layer.mark_consolidated("ann", ann + 100) is False  # no such message
    assert (layer.consolidated_through("ann"), layer.consolidated_through("bob")) == (0, 0)


def test_the_mark_never_moves_back(layer):
    older = chat(layer, "ann", "one")
    newer = chat(layer, "ann", "two")
    layer.mark_consolidated("ann", newer)

    layer.mark_consolidated("ann", older)  # a slower run over older turns finishing last

    assert layer.consolidated_through("ann") == newer


def test_deleting_a_user_removes_their_mark_and_no_other(layer):
    layer.mark_consolidated("ann", chat(layer, "ann", "one", "two"))
    bob = chat(layer, "bob", "one")
    layer.mark_consolidated("bob", bob)

    layer.forget("ann")

    assert layer.consolidated_through("ann") == 0
    assert layer.consolidated_through("bob") == bob
    newest = chat(layer, "ann", "back again")
    assert layer.users_due_for_consolidation(2) == [DueUser("ann", 2, newest)]


def test_the_user_waiting_longest_comes_first(layer):
    chat(layer, "bob", "one")
    chat(layer, "ann", "one")
    chat(layer, "bob", "two")

    assert [d.user_id for d in layer.users_due_for_consolidation(2)] == ["bob", "ann"]


def test_a_threshold_below_one_is_refused(layer):
    with pytest.raises(ValueError, match="min_new_turns must be at least 1, got 0"):
        layer.users_due_for_consolidation(0)
