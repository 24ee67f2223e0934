"""memory/facts/rules.py: the block's order and token cap, validation and key normalisation, cue
captures (stored as user-stated, never overriding a newer fact, only from newly stored user
messages), and export/import of fact history; on a real SQLite file."""

import pytest

from memory.facts.capture import Capture
from memory.facts.restore import restore_facts
from memory.facts.rules import (
    apply_captures,
    check_category,
    check_policy,
    check_value,
    facts_for_block,
    normalise_key,
    resolve_key,
    retire_facts,
    select_for_block,
    set_fact,
)
from memory.ingest.turns import Turn
from memory.layer import MemoryLayer
from memory.records import Fact
from memory.settings import Settings
from memory.store import fact_rows
from memory.store.store import Store

NOW = 1_715_558_400.0  # 2024-05-13 00:00:00 UTC


@pytest.fixture
def store(tmp_path):
    return Store(tmp_path / "moim.db")


def upsert(store, key, value, user_id="ann", now=NOW, category="profile", **fields):
    return fact_rows.upsert_fact(store, user_id, key, value, category, now=now, **fields)


def rows(store, user_id="ann"):
    """Every stored row as the export shows it (with rule, superseded_by, last_injected_at)."""
    return list(fact_rows.export_facts(store, user_id))


# -- the block ---------------------------------------------------------------------------------


def test_facts_for_block_leaves_expired_out_and_writes_nothing(store):
    upsert(store, "name", "Dana")
    upsert(store, "trip", "Rome", expires_at=NOW + 1)
    before = rows(store)

    chosen = facts_for_block(store, "ann", 400, NOW + 2)

    assert [f.key for f in chosen] == ["name"]
    assert rows(store) == before


def test_retire_facts_makes_due_facts_stale_and_stamps_injected_ones(store):
    name = upsert(store, "name", "Dana")
    upsert(store, "trip", "Rome", expires_at=NOW + 1)

    retire_facts(store, "ann", [name.id], NOW + 2)

    assert [(r["key"], r["status"], r["last_injected_at"]) for r in rows(store)] == [
        ("name", "active", NOW + 2),
        ("trip", "stale", None),
    ]


def fact(fact_id, category, updated_at=NOW, pinned=False, value="v"):
    return Fact(
        fact_id, "ann", f"k{fact_id}", value, category, pinned=pinned, updated_at=updated_at
    )


def test_block_order_is_pinned_then_category_priority_then_most_recent():
    facts = [
        fact(1, "episodic_event"),
        fact(2, "profile", updated_at=NOW),
        fact(3, "hobby"),  # an unknown category comes after the known ones
        fact(4, "profile", updated_at=NOW + 5),
        fact(5, "open_loop", pinned=True),
        fact(6, "constraint"),
        fact(7, "preference"),
        fact(8, "project"),
        fact(9, "protocol"),
        fact(10, "open_loop"),
    ]

    chosen = select_for_block(facts, 10_000, len)

    assert [f.id for f in chosen] == [5, 6, 4, 2, 7, 8, 9, 10, 1, 3]


def test_block_selection_stops_at_the_token_cap():
    facts = [
        fact(1, "profile", NOW + 2, value="x" * 10),
        fact(2, "profile", NOW + 1, value="y" * 50),
        fact(3, "profile", NOW, value="z"),
    ]
    cost = len("- k1: ") + 10  # the counter sees each fact's rendered line
    # z would fit after x, but a lower-ranked short fact never jumps a longer one

    assert select_for_block(facts, cost, len) == facts[:1]
    assert select_for_block(facts, cost - 1, len) == []
    assert select_for_block(facts, 10_000, len) == facts


# -- validation --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ("Home City", "home_city"),
        ("  preferred-name ", "preferred_name"),
        ("allergy:peanuts", "allergy:peanuts"),
        ("Café  Owner!!", "café_owner"),
        ("__x__", "x"),
        ("a" * 120, "a" * 80),
    ],
)
def test_keys_are_normalised_to_lowercase_snake_case_of_at_most_80_characters(raw, key):
    assert normalise_key(raw) == key


@pytest.mark.parametrize(
    ("check", "value", "message"),
    [
        (normalise_key, "!!!", "'key' must contain at least one letter or digit"),
        (check_value, "", "'value' must be 1 to 500 characters long"),
        (check_value, "x" * 501, "'value' must be 1 to 500 characters long"),
        (check_value, 5, "'value' must be a string"),
        (check_category, "Not A Word", "'category' must be a lowercase word"),
        (check_policy, "shout", "'policy' must be one of speak, adapt, avoid"),
    ],
)
def test_invalid_fields_raise_value_error_naming_the_field(check, value, message):
    with pytest.raises(ValueError, match=f"^{message}"):
        check(value)


def test_set_fact_normalises_and_applies_ttl(store):
    stored = set_fact(
        store, "ann", "Home City", " Lisbon ", category="profile", ttl_seconds=60, now=NOW
    )

    assert (stored.key, stored.value, stored.expires_at, stored.source) == (
        "home_city",
        "Lisbon",
        NOW + 60,
        "api",
    )
    with pytest.raises(ValueError, match="'ttl_seconds' must be a positive number"):
        set_fact(store, "ann", "x", "y", ttl_seconds=0, now=NOW)


def test_resolve_key_accepts_an_id_of_any_row_of_the_users_fact(store):
    old = upsert(store, "home_city", "Berlin")
    upsert(store, "home_city", "Lisbon", now=NOW + 1)
    other = upsert(store, "pet", "Rex", user_id="bob")

    assert resolve_key(store, "ann", str(old.id)) == "home_city"
    assert resolve_key(store, "ann", "Home City") == "home_city"
    assert resolve_key(store, "ann", str(other.id)) == str(other.id)  # bob's id is no id of ann's


# -- captures ----------------------------------------------------------------------------------


def capture(key, value="", op="set", category="profile", policy="speak", rule="test_rule"):
    return Capture(op=op, key=key, value=value, category=category, rule=rule, policy=policy)


def test_captures_are_stored_as_user_stated_with_their_rule_and_message(store):
    written = apply_captures(store, "ann", [capture("name", "Dana", rule="self_name")], 42, NOW)

    assert [(f.key, f.value, f.source, f.confidence, f.source_message_id) for f in written] == [
        ("name", "Dana", "user_stated", 0.9, 42)
    ]
    assert rows(store)[0]["rule"] == "self_name"


def test_a_forget_capture_archives_the_key(store):
    apply_captures(store, "ann", [capture("name", "Dana")], 1, NOW)
    apply_captures(store, "ann", [capture("name", op="forget", rule="forget_command")], 2, NOW + 1)

    assert [f.status for f in fact_rows.fact_history(store, "ann", "name")] == ["archived"]


def test_a_restated_fact_keeps_the_policy_and_pin_the_user_gave_it(store):
    upsert(store, "name", "Dana", policy="avoid", pinned=True)

    apply_captures(store, "ann", [capture("name", "Dana")], 1, NOW + 1)

    current = fact_rows.get_fact(store, "ann", "name")
    assert (current.policy, current.pinned, current.updated_at) == ("avoid", True, NOW + 1)


def test_an_older_statement_never_overrides_a_newer_fact(store):
    upsert(store, "home_city", "Lisbon", now=NOW + 100)

    assert apply_captures(store, "ann", [capture("home_city", "Berlin")], 1, NOW) == []
    assert fact_rows.get_fact(store, "ann", "home_city").value == "Lisbon"


def test_an_invalid_capture_is_skipped_and_the_rest_applied(store):
    written = apply_captures(
        store, "ann", [capture("name", "x" * 600), capture("pet", "Rex")], 1, NOW
    )

    assert [f.key for f in written] == ["pet"]


def turn(*texts, reply="ok", user_id="ann", created_at=NOW, session_id="s1"):
    messages = tuple({"role": "user", "content": t} for t in texts)
    return Turn(
        user_id,
        session_id,
        "gpt-4o-mini",
        messages,
        {"role": "assistant", "content": reply},
        created_at,
    )


def test_store_only_captures_facts_from_new_user_messages_only(tmp_path):
    layer = MemoryLayer(Settings(db_path=tmp_path / "moim.db"))

    assert layer.store_only(turn("I live in Berlin", reply="Your name is Bob")) == 2
    layer.store_only(turn("I live in Berlin", "I moved from Berlin to Lisbon", created_at=NOW + 1))
    # the client resends the history: the Berlin message is not read again
    layer.store_only(
        turn("I live in Berlin", "I moved from Berlin to Lisbon", "thanks", created_at=NOW + 2)
    )

    history = layer.fact_history("ann", "home_city")
    assert [(f.value, f.status, f.source) for f in history] == [
        ("Berlin", "superseded", "user_stated"),
        ("Lisbon", "active", "user_stated"),
    ]
    assert layer.list_facts("ann", "active") == [history[1]]  # nothing from the assistant


def test_store_only_captures_nothing_when_capture_is_off(tmp_path):
    layer = MemoryLayer(Settings(db_path=tmp_path / "moim.db", capture_facts=False))

    layer.store_only(turn("My name is Dana"))

    assert layer.list_facts("ann") == []


# -- export and import -------------------------------------------------------------------------


def test_export_then_import_restores_history_with_links_and_twice_adds_nothing(store, tmp_path):
    upsert(store, "home_city", "Berlin")
    upsert(store, "home_city", "Lisbon", now=NOW + 1, pinned=True)
    upsert(store, "ex", "Sam", policy="avoid", now=NOW + 2)
    fact_rows.archive_fact(store, "ann", "ex", NOW + 3)
    exported = rows(store)
    other = Store(tmp_path / "other.db")
    upsert(other, "filler", "shifts the ids", user_id="zed")

    assert restore_facts(other, "bob", exported) == 3
    assert restore_facts(other, "bob", exported) == 0

    restored = rows(other, "bob")
    strip = ("id", "superseded_by", "source_message_id")
    assert [{k: v for k, v in r.items() if k not in strip} for r in restored] == [
        {k: v for k, v in r.items() if k not in strip} for r in exported
    ]
    assert restored[0]["superseded_by"] == restored[1]["id"]


def test_an_imported_active_fact_never_displaces_the_live_one(store):
    upsert(store, "name", "Dana")
    exported = rows(store)
    upsert(store, "name", "Dee", now=NOW + 1)

    restore_facts(store, "ann", [{**exported[0], "created_at": NOW - 5}])

    assert fact_rows.get_fact(store, "ann", "name").value == "Dee"


def test_invalid_imported_rows_are_skipped_and_stray_fields_ignored(store):
    good = {
        "key": "pet",
        "value": "Rex",
        "created_at": NOW,
        "id": [],
        "rule": {"x": 1},
        "superseded_by": "7",
        "pinned": "yes",
        "source": 5,
        "extra": object(),
    }
    bad = [
        {"key": "x", "value": "", "created_at": NOW},
        {"key": "y", "value": "z"},
        {"key": "y", "value": "z", "created_at": 10**400},
        {"key": "y", "value": "z", "created_at": NOW, "confidence": float("nan")},
        {"key": ["y"], "value": "z", "created_at": NOW},
        {"key": "y", "value": "z", "created_at": NOW, "policy": ["speak"]},
    ]

    assert restore_facts(store, "ann", [good, *bad]) == 1

    (row,) = rows(store)
    assert (row["key"], row["pinned"], row["source"], row["rule"], row["superseded_by"]) == (
        "pet",
        False,
        "import",
        None,
        None,
    )
