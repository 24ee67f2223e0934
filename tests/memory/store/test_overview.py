"""memory/store/overview.py: users with their counts and last activity, a user's sessions."""

from memory.ingest.turns import Turn, store_turn
from memory.store import fact_rows
from memory.store.overview import SessionSummary, UserSummary, sessions, users
from memory.store.store import Store

NOW = 1_700_000_000.0


def say(store, user_id, session_id, text, at, reply="Noted."):
    message = {"role": "user", "content": text}
    store_turn(
        store,
        Turn(
            user_id,
            session_id,
            "gpt-4o-mini",
            (message,),
            {"role": "assistant", "content": reply},
            at,
        ),
    )


def test_users_counts_messages_sessions_active_facts_and_the_newest_write(tmp_path):
    store = Store(tmp_path / "moim.db")
    say(store, "ann", "s1", "I like tea", NOW)
    say(store, "ann", "s2", "I like coffee", NOW + 10)
    say(store, "bob", "s1", "Hello", NOW + 5)
    fact_rows.upsert_fact(store, "bob", "city", "Oslo", "profile", now=NOW + 20)
    fact_rows.upsert_fact(store, "bob", "city", "Rome", "profile", now=NOW + 30)
    fact_rows.upsert_fact(store, "cy", "name", "Cy", "profile", now=NOW + 1)

    assert users(store) == [
        UserSummary("bob", messages=2, sessions=1, facts=1, last_active=NOW + 30),
        UserSummary("ann", messages=4, sessions=2, facts=0, last_active=NOW + 10),
        UserSummary("cy", messages=0, sessions=0, facts=1, last_active=NOW + 1),
    ]


def test_users_with_only_lists_just_those_and_an_empty_list_none(tmp_path):
    store = Store(tmp_path / "moim.db")
    say(store, "ann", "s1", "I like tea", NOW)
    say(store, "bob", "s1", "Hello", NOW)

    assert [u.user_id for u in users(store, only=["ann", "zed"])] == ["ann"]
    assert users(store, only=[]) == []
    assert [u.user_id for u in users(store, limit=1)] == ["ann"]


def test_sessions_are_the_users_own_newest_first_with_their_opening(tmp_path):
    store = Store(tmp_path / "moim.db")
    say(store, "ann", "old", "First conversation " + "x" * 200, NOW)
    say(store, "ann", "new", "Second conversation", NOW + 100)
    say(store, "bob", "old", "Not Ann's", NOW + 200)

    found = sessions(store, "ann")

    assert [s.session_id for s in found] == ["new", "old"]
    assert found[0] == SessionSummary("new", 2, NOW + 100, NOW + 100, "Second conversation")
    assert found[1].opening == ("First conversation " + "x" * 200)[:120]
    assert sessions(store, "nobody") == []
