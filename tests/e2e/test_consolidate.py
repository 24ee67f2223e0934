"""Optional LLM consolidation against the fake upstream: the model reads the user's recent turns
and facts and is asked for JSON; valid operations are applied, a bad reply changes nothing and
its reason is logged, duplicates and weak operations are stopped by the write gate while the
rest are applied. The issue's "Semantic memory", part 6; `moim consolidate` on a temp DB.

The upstream is scripted (`upstream.script`); the store, the gate and the embedder are real.
"""

import json
import logging
import time

import httpx
import pytest
from click.testing import CliRunner

from memory import MemoryLayer, Settings, Turn
from proxy.cli import main
from proxy.config import Config
from proxy.consolidate import consolidate_user
from proxy.errors import UpstreamError

MODEL = "gpt-4o-mini"


@pytest.fixture
def layer(tmp_path, embedder):
    """A memory layer on a fresh database; no fact capture, so only the test's facts exist."""
    settings = Settings(db_path=tmp_path / "moim.db", capture_facts=False)
    return MemoryLayer(settings, embedder_factory=lambda _: embedder)


@pytest.fixture
def config(upstream):
    return Config(upstream_base_url=upstream.url, upstream_api_key="sk-up")


def chat(layer, user_id, *exchanges):
    """Store user/assistant exchanges as one turn each, a minute apart."""
    for index, (said, answered) in enumerate(exchanges):
        layer.store_only(
            Turn(
                user_id=user_id,
                session_id="s1",
                model=MODEL,
                messages=({"role": "user", "content": said},),
                reply={"role": "assistant", "content": answered},
                created_at=1_715_558_400.0 + 60 * index,
            )
        )


def operations(*items):
    return {"content": json.dumps({"operations": list(items)})}


def add(key, value, confidence=0.9, salience=0.6, kind="add", **fields):
    return {
        "op": kind,
        "key": key,
        "value": value,
        "confidence": confidence,
        "salience": salience,
        **fields,
    }


def keyed(kind, key):
    return {"op": kind, "key": key, "confidence": 0.9, "salience": 0.6}


def facts(layer, user_id="ann"):
    return {f.key: (f.value, f.source) for f in layer.list_facts(user_id, "active")}


async def consolidate(config, layer, user_id="ann"):
    async with httpx.AsyncClient(timeout=30) as client:
        return await consolidate_user(config, layer, client, user_id, MODEL)


@pytest.fixture
def ann(layer):
    """Ann: a name, a home city, an open loop, a preference, and a conversation about them."""
    layer.set_fact("ann", "name", "Dana")
    layer.set_fact("ann", "home_city", "Berlin")
    layer.set_fact("ann", "interview", "Job interview on Friday", category="open_loop")
    layer.set_fact("ann", "editor", "Neovim", category="preference")
    chat(
        layer,
        "ann",
        ("I finally moved to Lisbon last week!", "Congratulations on the move!"),
        ("The interview went well, I got the job at Acme.", "That's wonderful news."),
        ("Yes, Dana is still my name, ha.", "Noted, Dana."),
    )
    return layer


@pytest.mark.anyio
async def test_valid_operations_are_applied_and_the_model_saw_turns_and_facts(
    config, ann, upstream
):
    upstream.script.append(
        operations(
            add("employer", "Acme", category="project", reason="got the job"),
            add("home_city", "Lisbon", kind="update"),
            keyed("reinforce", "name"),
            keyed("close_open_loop", "interview"),
        )
    )

    report = await consolidate(config, ann)

    assert report.summary() == {
        "user_id": "ann",
        "model": MODEL,
        "turns": 6,
        "facts": 4,
        "proposed": 4,
        "applied": {"add": 1, "update": 1, "reinforce": 1, "close_open_loop": 1},
        "rejected": [],
        "batch_rejected": None,
    }
    assert facts(ann) == {
        "name": ("Dana", "api"),
        "home_city": ("Lisbon", "consolidation"),
        "editor": ("Neovim", "api"),
        "employer": ("Acme", "consolidation"),
    }
    assert [f.key for f in ann.list_facts("ann", "archived")] == ["interview"]
    sent = upstream.last_json
    assert upstream.requests[-1].headers["authorization"] == "Bearer sk-up"
    assert (sent["model"], sent["stream"], sent["response_format"]) == (
        MODEL,
        False,
        {"type": "json_object"},
    )
    system, user = sent["messages"]
    assert system["role"] == "system" and "Reply with JSON only" in system["content"]
    assert '"key": "home_city", "value": "Berlin"' in user["content"]
    assert "[2024-05-13 user] I finally moved to Lisbon last week!" in user["content"]
    assert "[2024-05-13 assistant] Noted, Dana." in user["content"]


@pytest.mark.anyio
async def test_a_reply_that_is_not_json_changes_nothing_and_logs_why(config, ann, upstream, caplog):
    before = list(ann.export("ann"))
    upstream.script.append({"content": 'Sure! {"operations": []}'})

    with caplog.at_level(logging.INFO, logger="proxy.consolidate"):
        report = await consolidate(config, ann)

    assert report.batch_rejected == "not JSON: Expecting value: line 1 column 1 (char 0)"
    assert (report.proposed, report.applied, report.rejected) == (0, {}, ())
    assert list(ann.export("ann")) == before
    [record] = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert record.getMessage() == (
        "consolidation user_id=ann model=gpt-4o-mini rejected, nothing applied: "
        "not JSON: Expecting value: line 1 column 1 (char 0)"
    )


@pytest.mark.anyio
async def test_no_fact_value_or_turn_reaches_the_logs_at_any_level(config, ann, upstream, caplog):
    upstream.script.append(operations(add("employer", "Acme Quantum Widgets", category="project")))

    with caplog.at_level(logging.DEBUG):
        report = await consolidate(config, ann)

    assert report.applied == {"add": 1}
    logged = "\n".join(r.getMessage() for r in caplog.records)
    for said in ("Acme Quantum Widgets", "Berlin", "Neovim", "moved to Lisbon"):
        assert said not in logged


@pytest.mark.anyio
async def test_one_bad_operation_rejects_the_batch_never_half_of_it(config, ann, upstream):
    before = list(ann.export("ann"))
    upstream.script.append(
        operations(
            add("employer", "Acme"),
            add("home_city", "Lisbon", confidence=1.3, kind="update"),
        )
    )

    report = await consolidate(config, ann)

    assert report.batch_rejected == "operation 2: 'confidence' must be from 0 to 1, got 1.3"
    assert list(ann.export("ann")) == before


@pytest.mark.anyio
async def test_duplicates_and_weak_operations_are_gated_and_the_rest_applied(
    config, ann, upstream, caplog
):
    upstream.script.append(
        operations(
            add("favourite_editor", "neovim", category="preference"),  # same text as `editor`
            add("city", "Berlin"),  # same text as `home_city`
            add("first_name", "Dana", kind="update"),  # same text as `name`
            add("mood", "tired today", confidence=0.9, salience=0.1),  # transient: low salience
            add("employer", "Acme", category="project"),
            add("work_city", "Lisbon", category="project"),
            keyed("reinforce", "pet"),  # no such fact
        )
    )

    with caplog.at_level(logging.INFO, logger="proxy.consolidate"):
        report = await consolidate(config, ann)

    summary = report.summary()
    assert (summary["proposed"], summary["applied"], summary["batch_rejected"]) == (
        7,
        {"add": 2},
        None,
    )
    assert summary["rejected"] == [
        {"op": "add", "key": "favourite_editor", "reason": "duplicate of 'editor' (same text)"},
        {"op": "add", "key": "city", "reason": "duplicate of 'home_city' (same text)"},
        {"op": "update", "key": "first_name", "reason": "duplicate of 'name' (same text)"},
        {"op": "add", "key": "mood", "reason": "salience 0.1 is below 0.2"},
        {"op": "reinforce", "key": "pet", "reason": "no active fact 'pet'"},
    ]
    assert facts(ann) == {
        "name": ("Dana", "api"),
        "home_city": ("Berlin", "api"),
        "editor": ("Neovim", "api"),
        "interview": ("Job interview on Friday", "api"),
        "employer": ("Acme", "consolidation"),
        "work_city": ("Lisbon", "consolidation"),
    }
    logged = [r.getMessage() for r in caplog.records if "rejected:" in r.getMessage()]
    assert logged[0] == (
        "consolidation user_id=ann op=add key=favourite_editor rejected: "
        "duplicate of 'editor' (same text)"
    )
    assert len(logged) == 5


@pytest.mark.anyio
async def test_a_user_without_turns_costs_no_model_call(config, layer, upstream):
    layer.set_fact("ann", "name", "Dana")

    report = await consolidate(config, layer)

    assert (report.turns, report.facts, report.proposed) == (0, 1, 0)
    assert upstream.requests == []


@pytest.mark.anyio
async def test_an_upstream_error_is_raised_and_nothing_is_applied(config, ann, upstream):
    before = list(ann.export("ann"))
    upstream.script.append({"status": 500, "body": {"error": {"message": "down"}}})

    with pytest.raises(UpstreamError) as raised:
        await consolidate(config, ann)

    assert raised.value.status == 500
    assert list(ann.export("ann")) == before


@pytest.mark.anyio
async def test_only_the_named_users_turns_and_facts_are_read(config, ann, upstream):
    ann.set_fact("bob", "home_city", "Oslo")
    chat(ann, "bob", ("My secret hobby is falconry.", "Interesting!"))
    upstream.script.append(operations())

    report = await consolidate(config, ann, user_id="bob")

    assert (report.turns, report.facts) == (2, 1)
    prompt = upstream.last_json["messages"][1]["content"]
    assert "falconry" in prompt and "Oslo" in prompt
    assert "Lisbon" not in prompt and "Berlin" not in prompt


def test_cli_consolidates_once_and_prints_a_json_summary(tmp_path, upstream, embedder):
    db = tmp_path / "cli.db"
    seeded = MemoryLayer(
        Settings(db_path=db, capture_facts=False), embedder_factory=lambda _: embedder
    )
    seeded.set_fact("ann", "home_city", "Berlin")
    chat(seeded, "ann", ("I moved to Lisbon.", "Nice!"))
    upstream.script.append(operations(add("home_city", "Lisbon", kind="update")))
    (tmp_path / "none.yaml").write_text("")
    env = {
        "MOIM_DB": str(db),
        "MOIM_UPSTREAM_BASE_URL": upstream.url,
        "MOIM_CONFIG": str(tmp_path / "none.yaml"),
    }

    started = time.monotonic()
    result = CliRunner().invoke(
        main, ["consolidate", "--user", "ann", "--model", MODEL, "--turns", "1"], env=env
    )

    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {
        "user_id": "ann",
        "model": MODEL,
        "turns": 1,
        "facts": 1,
        "proposed": 1,
        "applied": {"update": 1},
        "rejected": [],
        "batch_rejected": None,
    }
    assert facts(seeded) == {"home_city": ("Lisbon", "consolidation")}
    assert "[2024-05-13 assistant] Nice!" in upstream.last_json["messages"][1]["content"]
    assert "I moved to Lisbon." not in upstream.last_json["messages"][1]["content"]
    assert time.monotonic() - started < 30


def test_cli_reports_an_upstream_error_and_exits_non_zero(tmp_path, upstream, embedder):
    db = tmp_path / "cli.db"
    chat(
        MemoryLayer(Settings(db_path=db), embedder_factory=lambda _: embedder),
        "ann",
        ("Hello", "Hi"),
    )
    upstream.script.append({"status": 401, "body": {"error": {"message": "bad key"}}})
    (tmp_path / "none.yaml").write_text("")
    env = {
        "MOIM_DB": str(db),
        "MOIM_UPSTREAM_BASE_URL": upstream.url,
        "MOIM_CONFIG": str(tmp_path / "none.yaml"),
    }

    result = CliRunner().invoke(main, ["consolidate", "--user", "ann", "--model", MODEL], env=env)

    assert result.exit_code == 1
    assert 'Error: upstream returned 401: {"error":{"message":"bad key"}}' in result.output


def test_the_consolidate_command_has_help_text():
    result = CliRunner().invoke(main, ["consolidate", "--help"])

    assert result.exit_code == 0
    assert "Ask MODEL for fact operations" in result.output
    assert "--model" in result.output and "--turns" in result.output


@pytest.mark.anyio
async def test_an_answer_past_max_body_bytes_is_not_read_and_changes_nothing(ann, upstream):
    # A provider gone wrong (an endless answer) was read whole into RAM, then applied.
    config = Config(upstream_base_url=upstream.url, upstream_api_key="sk-up", max_body_bytes=4096)
    reply = operations(add("home_city", "Lisbon", kind="update", reason="moved " * 2000))
    upstream.script.append(reply)

    report = await consolidate(config, ann)

    assert "max_body_bytes" in (report.batch_rejected or "")
    assert facts(ann)["home_city"] == ("Berlin", "api")
