"""memory/facts/consolidation.py: the model's reply is parsed strictly (one flaw rejects the whole
batch), the write gate accepts or rejects each operation with a reason (thresholds, unknown
keys, pinned facts, near-duplicates by text and by the real embedder's cosine), and accepted
operations are applied to a real SQLite file in one transaction: all of them or none."""

import json

import pytest

from memory.facts.consolidation import (
    ConsolidationRejected,
    GateResult,
    Operation,
    Rejection,
    apply_operations,
    gate,
    parse_operations,
)
from memory.records import Fact
from memory.store import fact_rows
from memory.store.store import Store

NOW = 1_715_558_400.0  # 2024-05-13 00:00:00 UTC


def op(kind="add", key="home_city", value="Lisbon", **fields):
    item = {"op": kind, "key": key, "confidence": 0.9, "salience": 0.5}
    if value is not None:
        item["value"] = value
    return {**item, **fields}


def reply(*items):
    return json.dumps({"operations": list(items)})


def fact(key, value, category="profile", pinned=False, fact_id=1):
    return Fact(fact_id, "ann", key, value, category, pinned=pinned)


def no_embedding(texts):
    raise AssertionError(f"embedding was not expected: {texts}")


@pytest.fixture
def store(tmp_path):
    return Store(tmp_path / "moim.db")


def active(store, user_id="ann"):
    return {
        f.key: (f.value, f.category, f.confidence, f.source)
        for f in fact_rows.list_facts(store, user_id, "active")
    }


# -- parse -------------------------------------------------------------------------------------


def test_a_valid_reply_parses_into_checked_operations():
    text = reply(
        op("add", " Home City ", "  Lisbon ", category="profile", reason="moved"),
        op("update", "employer", "Acme", confidence=1, salience=0),
        {**op("reinforce", "name", None), "value": None},
        op("contradict", "pet", None),
        op("close_open_loop", "interview_friday", None, category=None, reason=None),
    )

    assert parse_operations(text) == [
        Operation("add", "home_city", "Lisbon", "profile", 0.9, 0.5, "moved"),
        Operation("update", "employer", "Acme", None, 1.0, 0.0),
        Operation("reinforce", "name", None, None, 0.9, 0.5),
        Operation("contradict", "pet", None, None, 0.9, 0.5),
        Operation("close_open_loop", "interview_friday", None, None, 0.9, 0.5),
    ]


def test_an_empty_list_of_operations_is_valid():
    assert parse_operations('  {"operations": []}\n') == []


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("Sure! Here are the operations.", "not JSON: Expecting value: line 1 column 1 (char 0)"),
        ("Here you go: " + reply(op()), "not JSON: Expecting value: line 1 column 1 (char 0)"),
        (reply(op()) + " Hope this helps!", "not JSON: Extra data: line 1 column 108 (char 107)"),
        (
            "```json\n" + reply(op()) + "\n```",
            "not JSON: Expecting value: line 1 column 1 (char 0)",
        ),
        ('{"operations": [{"op": "add", "confidence": NaN}]}', "not JSON: NaN is not JSON"),
        ("[]", 'expected an object with only "operations"'),
        ('{"ops": []}', 'expected an object with only "operations"'),
        ('{"operations": [], "note": "x"}', 'expected an object with only "operations"'),
        ('{"operations": {"op": "add"}}', '"operations" must be a list'),
        ('{"operations": ["add home_city"]}', "operation 1: must be an object"),
        (
            reply(op(), op("merge", "x", "y")),
            "operation 2: 'op' must be one of add, update, reinforce, contradict, close_open_loop",
        ),
        (
            reply({"op": "add", "value": "Lisbon", "confidence": 0.9, "salience": 0.5}),
            "operation 1: 'key' is missing",
        ),
        (reply(op(key="  !! ")), "operation 1: 'key' must contain at least one letter or digit"),
        (reply(op(value=None)), "operation 1: 'value' must be a string"),
        (reply(op(value="")), "operation 1: 'value' must be 1 to 500 characters long"),
        (reply(op(confidence=1.5)), "operation 1: 'confidence' must be from 0 to 1, got 1.5"),
        (reply(op(salience=-0.1)), "operation 1: 'salience' must be from 0 to 1, got -0.1"),
        (reply(op(confidence="high")), "operation 1: 'confidence' must be a number from 0 to 1"),
        (reply(op(confidence=True)), "operation 1: 'confidence' must be a number from 0 to 1"),
        (
            reply({k: v for k, v in op().items() if k != "salience"}),
            "operation 1: 'salience' must be a number from 0 to 1",
        ),
        (
            reply(op(category="Home Stuff")),
            "operation 1: 'category' must be a lowercase word "
            "such as constraint, profile, preference, project, protocol, open_loop, episodic_event",
        ),
        (reply(op(policy="avoid")), "operation 1: unknown field 'policy'"),
        (reply(op(reason=3)), "operation 1: 'reason' must be a string"),
        (
            reply(op(), op("reinforce", "Home City", None)),
            "key named by more than one operation: 'home_city'",
        ),
        (reply(*[op(key=f"k{i}") for i in range(51)]), "51 operations, more than 50"),
    ],
)
def test_any_flaw_rejects_the_whole_reply_with_a_reason(text, reason):
    with pytest.raises(ConsolidationRejected) as raised:
        parse_operations(text)

    assert raised.value.reason == reason


# -- the write gate ----------------------------------------------------------------------------


def test_operations_under_the_thresholds_are_rejected_each_with_its_reason():
    operations = [
        Operation("add", "a", "long enough", None, 0.39, 0.9),
        Operation("add", "b", "long enough", None, 0.9, 0.19),
        Operation("add", "c", "x", None, 0.9, 0.9),
        Operation("reinforce", "d", None, None, 0.4, 0.2),
    ]

    result = gate(operations, [fact("d", "kept")], no_embedding)

    assert result == GateResult(
        accepted=(operations[3],),
        rejected=(
            Rejection(operations[0], "confidence 0.39 is below 0.4"),
            Rejection(operations[1], "salience 0.19 is below 0.2"),
            Rejection(operations[2], "value is shorter than 2 characters"),
        ),
    )


def test_keyed_operations_must_name_an_active_fact_and_pinned_facts_stay_the_users():
    existing = [
        fact("name", "Dana", pinned=True, fact_id=1),
        fact("home_city", "Berlin", fact_id=2),
        fact("trip", "Rome in June", "open_loop", fact_id=3),
    ]
    operations = [
        Operation("reinforce", "pet", None, None, 0.9, 0.9),
        Operation("contradict", "name", None, None, 0.9, 0.9),
        Operation("close_open_loop", "home_city", None, None, 0.9, 0.9),
        Operation("close_open_loop", "trip", None, None, 0.9, 0.9),
        Operation("reinforce", "name", None, None, 0.9, 0.9),
    ]

    result = gate(operations, existing, no_embedding)

    assert result.accepted == (operations[3], operations[4])
    assert [r.reason for r in result.rejected] == [
        "no active fact 'pet'",
        "'name' is pinned: only the user changes it",
        "'home_city' is a profile fact, not an open loop",
    ]


def test_the_same_value_again_under_its_own_key_is_not_an_add(embedder):
    operations = [Operation("add", "home_city", "berlin ", None, 0.9, 0.9)]

    result = gate(operations, [fact("home_city", "Berlin")], embedder.embed_documents)

    assert result.rejected == (Rejection(operations[0], "'home_city' already has this value"),)


def test_a_new_value_for_the_same_key_is_an_update_not_a_duplicate(embedder):
    operations = [Operation("update", "home_city", "Lisbon", None, 0.9, 0.9)]

    result = gate(operations, [fact("home_city", "Berlin")], embedder.embed_documents)

    assert result == GateResult(accepted=tuple(operations), rejected=())


def test_the_same_text_under_another_key_is_a_duplicate(embedder):
    operations = [Operation("add", "favourite_editor", "Neovim, always.", None, 0.9, 0.9)]

    result = gate(operations, [fact("editor", "neovim always")], embedder.embed_documents)

    assert result.rejected == (Rejection(operations[0], "duplicate of 'editor' (same text)"),)


def test_a_restatement_in_other_words_is_a_duplicate_by_cosine(embedder):
    existing = [fact("residence", "lives in Lisbon")]
    operations = [
        Operation("add", "residence_city", "Lives in Lisbon, Portugal", None, 0.9, 0.9),
        Operation("add", "dog_name", "Max", None, 0.9, 0.9),
    ]

    result = gate(operations, existing, embedder.embed_documents)

    assert result.accepted == (operations[1],)
    [rejection] = result.rejected
    assert rejection.operation == operations[0]
    assert rejection.reason.startswith("duplicate of 'residence' (cosine 0.9")


def test_similar_but_distinct_facts_pass_the_gate(embedder):
    existing = [fact("dog_name", "Max"), fact("home_city", "Berlin")]
    operations = [
        Operation("add", "brother_name", "Leo", None, 0.9, 0.9),
        Operation("add", "work_city", "Lisbon", None, 0.9, 0.9),
    ]

    result = gate(operations, existing, embedder.embed_documents)

    assert result == GateResult(accepted=tuple(operations), rejected=())


def test_two_adds_of_one_fact_in_a_batch_keep_only_the_first(embedder):
    operations = [
        Operation("add", "employer", "Acme Corp", None, 0.9, 0.9),
        Operation("add", "workplace", "acme corp.", None, 0.9, 0.9),
    ]

    result = gate(operations, [], embedder.embed_documents)

    assert result.accepted == (operations[0],)
    assert result.rejected == (Rejection(operations[1], "duplicate of 'employer' (same text)"),)


def test_a_new_key_past_the_fact_limit_is_rejected_alone_and_the_rest_applies(
    embedder, monkeypatch
):
    monkeypatch.setattr("memory.facts.consolidation.MAX_CURRENT_FACTS", 3)
    existing = [fact("dog_name", "Max", fact_id=1), fact("home_city", "Berlin", fact_id=2)]
    operations = [
        Operation("update", "home_city", "Lisbon", None, 0.9, 0.9),
        Operation("add", "employer", "Acme Corp", None, 0.9, 0.9),
        Operation("add", "sister_name", "Ines", None, 0.9, 0.9),
    ]

    result = gate(operations, existing, embedder.embed_documents)

    assert result.accepted == tuple(operations[:2])
    assert result.rejected == (
        Rejection(operations[2], "the user holds 3 current facts, the most"),
    )


# -- apply -------------------------------------------------------------------------------------


def test_each_operation_is_applied_to_the_store(store):
    fact_rows.upsert_fact(store, "ann", "home_city", "Berlin", "profile", now=NOW)
    fact_rows.upsert_fact(
        store, "ann", "name", "Dana", "profile", confidence=0.7, expires_at=NOW + 999, now=NOW
    )
    fact_rows.upsert_fact(store, "ann", "pet", "a cat", "profile", now=NOW)
    fact_rows.upsert_fact(store, "ann", "interview", "Friday", "open_loop", now=NOW)
    accepted = [
        Operation("add", "employer", "Acme", "project", 0.8, 0.5),
        Operation("update", "home_city", "Lisbon", None, 0.6, 0.5),
        Operation("reinforce", "name", None, None, 0.9, 0.5),
        Operation("contradict", "pet", None, None, 0.9, 0.5),
        Operation("close_open_loop", "interview", None, None, 0.9, 0.5),
    ]

    written = apply_operations(store, "ann", accepted, NOW + 60)

    assert [(f.key, f.status) for f in written] == [
        ("employer", "active"),
        ("home_city", "active"),
        ("name", "active"),
        ("pet", "archived"),
        ("interview", "archived"),
    ]
    assert active(store) == {
        "employer": ("Acme", "project", 0.8, "consolidation"),
        "home_city": ("Lisbon", "profile", 0.6, "consolidation"),
        "name": ("Dana", "profile", pytest.approx(0.8), "api"),
    }
    name = fact_rows.get_fact(store, "ann", "name")
    assert name.expires_at == NOW + 999 and name.updated_at == NOW + 60
    history = fact_rows.fact_history(store, "ann", "home_city")
    assert [(f.value, f.status) for f in history] == [
        ("Berlin", "superseded"),
        ("Lisbon", "active"),
    ]
    exported = {
        r["key"]: r["rule"] for r in fact_rows.export_facts(store, "ann") if r["status"] == "active"
    }
    assert exported["employer"] == "consolidation:add"


def test_reinforce_never_raises_confidence_above_one(store):
    fact_rows.upsert_fact(store, "ann", "name", "Dana", "profile", confidence=0.95, now=NOW)

    apply_operations(store, "ann", [Operation("reinforce", "name", None, None, 1, 1)], NOW + 1)

    assert fact_rows.get_fact(store, "ann", "name").confidence == 1.0


def test_a_failing_step_rolls_back_every_step_before_it(store):
    fact_rows.upsert_fact(store, "ann", "home_city", "Berlin", "profile", now=NOW)
    before = list(fact_rows.export_facts(store, "ann"))
    accepted = [
        Operation("add", "employer", "Acme", None, 0.9, 0.9),
        Operation("update", "home_city", "Lisbon", None, 0.9, 0.9),
        Operation("contradict", "home_city_gone", None, None, 0.9, 0.9),  # no such fact
    ]

    with pytest.raises(ConsolidationRejected, match="contradict: no active fact 'home_city_gone'"):
        apply_operations(store, "ann", accepted, NOW + 60)

    assert list(fact_rows.export_facts(store, "ann")) == before
    # the store is usable afterwards: the transaction was rolled back, not left open
    apply_operations(store, "ann", accepted[:1], NOW + 61)
    assert set(active(store)) == {"home_city", "employer"}


def test_apply_touches_only_the_named_user(store):
    fact_rows.upsert_fact(store, "bob", "home_city", "Berlin", "profile", now=NOW)

    with pytest.raises(ConsolidationRejected):
        apply_operations(
            store, "ann", [Operation("contradict", "home_city", None, None, 1, 1)], NOW + 1
        )

    assert active(store, "bob") == {"home_city": ("Berlin", "profile", 1.0, "api")}
