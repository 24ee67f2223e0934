"""memory/store/response_links.py through `MemoryLayer`, on a real SQLite file: which session a
Responses API reply belongs to, and turns that continue one (`Turn.continues`).
"""

from dataclasses import replace

import pytest

from memory import MemoryLayer, ResponseLink, Settings, Turn
from memory.store.journal import Journal


@pytest.fixture
def layer(tmp_path, embedder):
    settings = Settings(db_path=tmp_path / "moim.db", capture_facts=False)
    layer = MemoryLayer(settings, embedder_factory=lambda _: embedder)
    _ = layer.embedder
    return layer


def turn(user_id, said, response_id, continues=False, session_id="s1", tokens=40, system="Hi."):
    return Turn(
        user_id=user_id,
        session_id=session_id,
        model="gpt-4o-mini",
        messages=({"role": "system", "content": system}, {"role": "user", "content": said}),
        reply={"role": "assistant", "content": f"echo: {said}"},
        created_at=1_715_558_400.0,
        response_id=response_id,
        context_tokens=tokens,
        continues=continues,
    )


def said(layer, user_id):
    return [(m.session_id, m.role, m.content) for m in layer.store.messages(user_id)]


def test_a_stored_reply_links_its_id_to_the_session_and_context(layer):
    layer.store_only(turn("ann", "one", "resp_1", tokens=57))
    assert layer.response_link("ann", "resp_1") == ResponseLink("s1", 57)
    assert layer.response_link("ann", "resp_2") is None


def test_links_are_per_user_and_go_with_the_user(layer):
    layer.store_only(turn("ann", "one", "resp_1"))
    layer.store_only(turn("bob", "one", "resp_1", session_id="s9"))
    assert layer.response_link("bob", "resp_1") == ResponseLink("s9", 40)
    layer.forget("ann")
    assert layer.response_link("ann", "resp_1") is None
    assert layer.response_link("bob", "resp_1") == ResponseLink("s9", 40)


def test_a_continuing_turn_stores_each_message_anew_but_the_system_prompt_once(layer):
    layer.store_only(turn("ann", "yes", "resp_1"))
    layer.store_only(turn("ann", "yes", "resp_2", continues=True))
    assert said(layer, "ann") == [
        ("s1", "system", "Hi."),
        ("s1", "user", "yes"),
        ("s1", "assistant", "echo: yes"),
        ("s1", "user", "yes"),
        ("s1", "assistant", "echo: yes"),
    ]


def test_a_turn_resending_history_still_stores_it_once(layer):
    layer.store_only(turn("ann", "yes", "resp_1"))
    layer.store_only(turn("ann", "yes", "resp_2"))
    assert len(said(layer, "ann")) == 3


def test_a_replayed_turn_with_a_linked_reply_is_not_stored_twice(layer, tmp_path):
    # A crash after storing, before the journal was cleared: the writer replays it.
    journal = Journal(tmp_path / "moim.db.journal")
    journal.append(turn("ann", "yes", "resp_2", continues=True))
    [replayed] = journal.replay()
    assert (replayed.response_id, replayed.context_tokens, replayed.continues) == (
        "resp_2",
        40,
        True,
    )
    assert layer.store_only(replayed) == 3
    assert layer.store_only(replayed) == 0
    assert len(said(layer, "ann")) == 3


def test_another_turn_with_a_linked_reply_id_is_stored_and_the_id_names_it(layer):
    # A provider that gives `resp_1` out again: the later turn is no replay.
    layer.store_only(turn("ann", "one", "resp_1", tokens=57))
    later = replace(turn("ann", "two", "resp_1", session_id="s2"), created_at=1_715_558_500.0)
    assert layer.store_only(later) == 3
    assert layer.store_only(later) == 0  # that turn replayed
    assert layer.response_link("ann", "resp_1") == ResponseLink("s2", 40)


def test_a_turn_of_the_same_session_and_time_with_the_id_again_is_stored(layer):
    # A backfill dates a session's turns alike; the provider gives `resp_1` out again. The
    # turn says something new, so it is no replay; the turn itself replayed adds nothing.
    assert layer.store_only(turn("ann", "one", "resp_1")) == 3
    assert layer.store_only(turn("ann", "two", "resp_1")) == 2
    assert layer.store_only(turn("ann", "two", "resp_1")) == 0
    assert [c for _, role, c in said(layer, "ann") if role == "user"] == ["one", "two"]
