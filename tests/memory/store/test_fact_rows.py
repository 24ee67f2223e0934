"""memory/store/fact_rows.py on a real SQLite file: supersession keeps history with a link, forget
archives instead of deleting, expiry and silence turn facts stale (pinned ones exempt), and one
user never reads or changes another's facts."""

import pytest

from memory.facts.rules import MAX_SILENCE
from memory.store import fact_rows
from memory.store.store import Store

NOW = 1_715_558_400.0  # 2024-05-13 00:00:00 UTC
DAY = 86_400.0


@pytest.fixture
def store(tmp_path):
    return Store(tmp_path / "moim.db")


def upsert(store, key, value, user_id="ann", now=NOW, category="profile", **fields):
    return fact_rows.upsert_fact(store, user_id, key, value, category, now=now, **fields)


def rows(store, user_id="ann"):
    """Every stored row as the export shows it (with rule, superseded_by, last_injected_at)."""
    return list(fact_rows.export_facts(store, user_id))


# -- supersession and history ------------------------------------------------------------------


def test_a_new_value_supersedes_the_old_row_which_is_kept_with_a_link(store):
    berlin = upsert(store, "home_city", "Berlin", now=NOW)
    lisbon = upsert(store, "home_city", "Lisbon", now=NOW + 60)

    assert lisbon.status == "active" and lisbon.value == "Lisbon" and lisbon.id != berlin.id
    history = fact_rows.fact_history(store, "ann", "home_city")
    assert [(f.value, f.status) for f in history] == [
        ("Berlin", "superseded"),
        ("Lisbon", "active"),
    ]
    assert [r["superseded_by"] for r in rows(store)] == [lisbon.id, None]
    assert history[0].created_at == NOW and history[0].updated_at == NOW + 60


def test_superseded_values_are_never_returned_as_active(store):
    upsert(store, "home_city", "Berlin")
    upsert(store, "home_city", "Paris", now=NOW + 1)
    upsert(store, "home_city", "Lisbon", now=NOW + 2)

    assert [f.value for f in fact_rows.active_facts(store, "ann", NOW + 3)] == ["Lisbon"]
    assert fact_rows.get_fact(store, "ann", "home_city").value == "Lisbon"
    assert [f.value for f in fact_rows.list_facts(store, "ann", "active")] == ["Lisbon"]
    assert [f.value for f in fact_rows.list_facts(store, "ann", "superseded")] == [
        "Berlin",
        "Paris",
    ]


def test_restating_the_same_value_reinforces_the_row_instead_of_adding_one(store):
    first = upsert(store, "name", "Dana", confidence=0.9, source="user_stated")
    again = upsert(store, "name", "dana", confidence=0.5, now=NOW + 10)  # case differs only

    assert again.id == first.id
    assert (again.value, again.confidence, again.source) == ("dana", 0.9, "user_stated")
    assert (again.created_at, again.updated_at) == (NOW, NOW + 10)
    assert len(fact_rows.fact_history(store, "ann", "name")) == 1


def test_a_new_value_inherits_pin_policy_and_category_unless_given(store):
    upsert(store, "ex", "Sam", category="relationship", policy="avoid", pinned=True)
    inherited = fact_rows.upsert_fact(store, "ann", "ex", "Alex", None, now=NOW + 1)
    changed = upsert(store, "ex", "Kim", now=NOW + 2, policy="speak", pinned=False)

    assert (inherited.category, inherited.policy, inherited.pinned) == (
        "relationship",
        "avoid",
        True,
    )
    assert (changed.category, changed.policy, changed.pinned) == ("profile", "speak", False)


def test_forget_archives_the_fact_and_keeps_the_row(store):
    upsert(store, "employer", "Acme")

    archived = fact_rows.archive_fact(store, "ann", "employer", NOW + 5)

    assert (archived.value, archived.status, archived.updated_at) == ("Acme", "archived", NOW + 5)
    assert fact_rows.active_facts(store, "ann", NOW + 6) == []
    assert [f.status for f in fact_rows.fact_history(store, "ann", "employer")] == ["archived"]
    assert fact_rows.archive_fact(store, "ann", "employer", NOW + 7) is None
    assert fact_rows.archive_fact(store, "ann", "never_set", NOW + 7) is None


def test_a_key_can_be_set_again_after_it_was_forgotten(store):
    upsert(store, "employer", "Acme")
    fact_rows.archive_fact(store, "ann", "employer", NOW + 1)
    upsert(store, "employer", "Globex", now=NOW + 2)

    history = fact_rows.fact_history(store, "ann", "employer")
    assert [(f.value, f.status) for f in history] == [("Acme", "archived"), ("Globex", "active")]


# -- lifecycle ---------------------------------------------------------------------------------


def test_a_fact_past_its_expiry_turns_stale_and_leaves_the_block(store):
    upsert(store, "trip", "in Rome this week", expires_at=NOW + DAY)
    upsert(store, "name", "Dana")

    assert fact_rows.active_facts(store, "ann", NOW + DAY + 1) == [
        fact_rows.get_fact(store, "ann", "name")
    ]  # filtered even before the sweep
    assert fact_rows.expire_facts(store, NOW + DAY - 1) == 0
    assert fact_rows.expire_facts(store, NOW + DAY + 1) == 1
    assert [(f.key, f.status) for f in fact_rows.list_facts(store, "ann")] == [
        ("trip", "stale"),
        ("name", "active"),
    ]


def test_pinned_facts_are_exempt_from_expiry_and_silence(store):
    upsert(store, "trip", "Rome", expires_at=NOW + 1, pinned=True)
    upsert(store, "call_mom", "call mom on Sunday", category="open_loop", pinned=True)

    later = NOW + 400 * DAY
    assert fact_rows.expire_facts(store, later, max_silence=MAX_SILENCE) == 0
    assert [f.key for f in fact_rows.active_facts(store, "ann", later)] == ["trip", "call_mom"]


def test_open_loops_and_episodic_events_go_stale_after_long_silence(store):
    upsert(store, "dentist", "dentist appointment", category="open_loop")
    upsert(store, "trip", "went to Rome", category="episodic_event")
    upsert(store, "name", "Dana")

    assert fact_rows.expire_facts(store, NOW + 29 * DAY, max_silence=MAX_SILENCE) == 0
    assert fact_rows.expire_facts(store, NOW + 31 * DAY, max_silence=MAX_SILENCE) == 1
    assert fact_rows.expire_facts(store, NOW + 61 * DAY, max_silence=MAX_SILENCE) == 1
    assert [f.key for f in fact_rows.active_facts(store, "ann", NOW + 61 * DAY)] == ["name"]


def test_reinforcing_an_open_loop_restarts_its_silence(store):
    upsert(store, "dentist", "dentist appointment", category="open_loop")
    upsert(store, "dentist", "dentist appointment", category="open_loop", now=NOW + 50 * DAY)

    assert fact_rows.expire_facts(store, NOW + 61 * DAY, max_silence=MAX_SILENCE) == 0


# -- isolation ---------------------------------------------------------------------------------


def test_one_user_never_reads_or_changes_another_users_facts(store):
    ann = upsert(store, "name", "Dana", user_id="ann")
    upsert(store, "name", "Bo", user_id="bob")
    upsert(store, "trip", "Rome", user_id="bob", expires_at=NOW + 1)

    assert [f.value for f in fact_rows.active_facts(store, "ann", NOW)] == ["Dana"]
    assert fact_rows.fact_by_id(store, "bob", ann.id) is None
    assert fact_rows.set_pinned(store, "bob", "pet", True, NOW) is None
    assert fact_rows.archive_fact(store, "ann", "trip", NOW) is None
    fact_rows.mark_injected(store, "bob", [ann.id], NOW)
    assert fact_rows.expire_facts(store, NOW + 2, user_id="ann") == 0
    fact_rows.archive_fact(store, "bob", "name", NOW)

    assert rows(store, "ann")[0]["last_injected_at"] is None
    assert [(f.value, f.status) for f in fact_rows.list_facts(store, "ann")] == [("Dana", "active")]
    assert fact_rows.get_fact(store, "bob", "name") is None
    assert fact_rows.fact_history(store, "ann", "trip") == []
