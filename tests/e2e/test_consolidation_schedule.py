"""The optional consolidation schedule: due users are consolidated and marked, one by one.

A user is due after `consolidation.min_new_turns` new turns. Once the model has answered (its
batch applied or refused) the user is marked and not asked about those turns again; when the
model cannot be reached the user stays unmarked and the next cycle tries again. The running
proxy starts the schedule only with a consolidation model and stops it at shutdown;
`moim consolidate` without `--user` runs one cycle by hand.

The store, the gate and the embedder are real; the upstream is the fake one, its replies to
consolidation's JSON requests scripted in `upstream.json_script` while chats get echoes.
"""

import json
import logging
import socket
import time

import httpx
import pytest
from click.testing import CliRunner

from memory import MemoryLayer, Settings, Turn
from proxy.app import build_app
from proxy.cli import main
from proxy.config import Config, ModelRoute
from proxy.consolidation_schedule import consolidate_due
from tests.conftest import serve_app, wait_ready

MODEL = "gpt-4o-mini"
TICK = 0.001  # minutes between cycles in the running proxy: 60 ms


@pytest.fixture
def layer(tmp_path, embedder):
    """A memory layer on a fresh database; no fact capture, so facts come from the model."""
    settings = Settings(db_path=tmp_path / "moim.db", capture_facts=False)
    return MemoryLayer(settings, embedder_factory=lambda _: embedder)


@pytest.fixture
def config(upstream):
    return Config(upstream_base_url=upstream.url, upstream_api_key="sk-up")


def chat(layer, user_id, *said):
    """Store one exchange (two turns) per text; return the user's newest message id."""
    for index, text in enumerate(said):
        layer.store_only(
            Turn(
                user_id=user_id,
                session_id="s1",
                model=MODEL,
                messages=({"role": "user", "content": text},),
                reply={"role": "assistant", "content": f"noted: {text}"},
                created_at=1_715_558_400.0 + 60 * index,
            )
        )
    return layer.store.messages(user_id)[-1].id


def add(key, value):
    operation = {"op": "add", "key": key, "value": value, "confidence": 0.9, "salience": 0.6}
    return {"content": json.dumps({"operations": [operation]})}


def consolidation_requests(upstream):
    return [r.json for r in upstream.requests if r.json and r.json.get("response_format")]


def facts(layer, user_id):
    return {f.key: (f.value, f.source) for f in layer.list_facts(user_id, "active")}


def wait_for(condition, timeout=20.0):
    """Poll `condition` until it is true; fail at the deadline."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


@pytest.fixture
def closed_port():
    """A loopback port bound but never listening: connecting to it is refused at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


async def cycle(config, layer, min_new_turns=4, turns=40):
    async with httpx.AsyncClient(timeout=30) as client:
        return await consolidate_due(config, layer, client, MODEL, turns, min_new_turns)


# -- one cycle ---------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_due_user_is_consolidated_and_marked_and_a_user_below_the_threshold_is_not(
    config, layer, upstream, caplog
):
    newest = chat(layer, "ann", "I moved to Lisbon.", "I love it here.")  # four turns
    chat(layer, "bob", "My secret hobby is falconry.")  # two turns
    upstream.json_script.append(add("home_city", "Lisbon"))

    with caplog.at_level(logging.INFO, logger="proxy"):
        outcomes = await cycle(config, layer)

    assert [(o.user_id, o.error, o.report.summary()["applied"]) for o in outcomes] == [
        ("ann", None, {"add": 1})
    ]
    assert facts(layer, "ann") == {"home_city": ("Lisbon", "consolidation")}
    assert (layer.consolidated_through("ann"), layer.consolidated_through("bob")) == (newest, 0)
    [asked] = consolidation_requests(upstream)
    assert "I love it here." in asked["messages"][1]["content"]
    assert "falconry" not in asked["messages"][1]["content"]
    assert f"consolidation user_id=ann turns=4 marked_through={newest}" in caplog.messages
    assert await cycle(config, layer) == []  # marked: not due until new turns arrive
    assert len(upstream.requests) == 1


@pytest.mark.anyio
async def test_a_refused_batch_still_marks_the_user(config, layer, upstream):
    newest = chat(layer, "ann", "I moved to Lisbon.", "I love it here.")
    upstream.json_script.append({"content": "Sure! Here are the operations."})

    [outcome] = await cycle(config, layer)

    assert outcome.report.batch_rejected.startswith("not JSON")
    assert facts(layer, "ann") == {}
    assert layer.consolidated_through("ann") == newest


@pytest.mark.anyio
async def test_an_upstream_error_leaves_the_user_unmarked_and_the_next_user_goes_on(
    config, layer, upstream, caplog
):
    chat(layer, "ann", "I moved to Lisbon.", "I love it here.")
    bob = chat(layer, "bob", "I work at Acme.", "It is a big company.")
    upstream.json_script.extend(
        [
            {"status": 500, "body": {"error": {"message": "down, sk-secret"}}},
            add("employer", "Acme"),
        ]
    )

    with caplog.at_level(logging.INFO, logger="proxy"):
        outcomes = await cycle(config, layer)

    assert [o.summary().get("error") for o in outcomes] == ["upstream returned 500", None]
    assert (layer.consolidated_through("ann"), layer.consolidated_through("bob")) == (0, bob)
    assert facts(layer, "bob") == {"employer": ("Acme", "consolidation")}
    assert (
        "consolidation user_id=ann model=gpt-4o-mini not marked, due again next time: "
        "upstream returned 500"
    ) in caplog.messages
    assert "sk-secret" not in caplog.text
    assert [d.user_id for d in layer.users_due_for_consolidation(4)] == ["ann"]


@pytest.mark.anyio
async def test_progress_hears_each_due_user_done(config, layer, upstream):
    chat(layer, "ann", "I moved to Lisbon.", "I love it here.")
    chat(layer, "bob", "I work at Acme.", "It is a big company.")
    upstream.json_script.extend([add("home_city", "Lisbon"), add("employer", "Acme")])
    heard = []

    async with httpx.AsyncClient(timeout=30) as client:
        await consolidate_due(
            config, layer, client, MODEL, 40, 4, lambda done, due: heard.append((done, due))
        )

    assert heard == [(0, 2), (1, 2), (2, 2)]


@pytest.mark.anyio
async def test_more_unread_turns_than_one_batch_are_all_read_oldest_first(config, layer, upstream):
    said = [f"Note number {n} about my garden." for n in range(5)]  # ten turns
    newest = chat(layer, "ann", *said)
    upstream.json_script.extend([add("hobby", "gardening"), add("plot", "north"), add("x", "y")])

    outcomes = await cycle(config, layer, turns=4)

    assert [o.report.turns for o in outcomes] == [4, 4, 2]
    prompts = [r["messages"][1]["content"] for r in consolidation_requests(upstream)]
    turns = [
        f"{role}] {text}"
        for n in range(5)
        for role, text in (("user", said[n]), ("assistant", f"noted: {said[n]}"))
    ]
    # every turn in exactly one prompt, the batches in the order things were said
    assert [[t for t in turns if t in prompt] for prompt in prompts] == [
        turns[0:4],
        turns[4:8],
        turns[8:10],
    ]
    assert layer.consolidated_through("ann") == newest
    assert await cycle(config, layer, turns=4) == []


@pytest.mark.anyio
async def test_a_long_history_is_read_over_several_cycles(config, layer, upstream, monkeypatch):
    monkeypatch.setattr("proxy.consolidation_schedule.MAX_BATCHES", 2)
    newest = chat(layer, "ann", *[f"Fact {n} about me." for n in range(5)])  # ten turns
    upstream.json_script.extend([add(f"k{n}", f"v{n}") for n in range(3)])

    first = await cycle(config, layer, turns=3)
    fourth = layer.store.messages("ann")[5].id
    assert ([o.report.turns for o in first], layer.consolidated_through("ann")) == ([3, 3], fourth)
    second = await cycle(config, layer, turns=3)
    assert ([o.report.turns for o in second], layer.consolidated_through("ann")) == ([3, 1], newest)


@pytest.mark.anyio
async def test_a_failing_batch_keeps_the_batches_before_it_and_leaves_the_rest_unread(
    config, layer, upstream
):
    chat(layer, "ann", "I moved to Lisbon.", "I love it here.", "I work at Acme.")  # six turns
    upstream.json_script.extend(
        [
            add("home_city", "Lisbon"),
            {"status": 500, "body": {"error": {"message": "down"}}},
        ]
    )

    outcomes = await cycle(config, layer, turns=4)

    assert [o.summary().get("error") for o in outcomes] == [None, "upstream returned 500"]
    fourth = layer.store.messages("ann")[3].id
    assert layer.consolidated_through("ann") == fourth
    assert [t.content for t in layer.unread_turns("ann", 10)] == [
        "I work at Acme.",
        "noted: I work at Acme.",
    ]


# -- the running proxy -------------------------------------------------------------------------


def test_the_schedule_consolidates_a_user_once_enough_turns_arrived(make_proxy, upstream):
    proxy = make_proxy(
        consolidation_model=MODEL,
        consolidation_every_minutes=TICK,
        consolidation_min_new_turns=4,
        settings={"capture_facts": False},
    )
    upstream.json_script.append(add("home_city", "Lisbon"))
    client = proxy.client()

    for said in ("I moved to Lisbon last week.", "The weather is lovely."):
        client.chat.completions.create(
            model=MODEL, user="ann", messages=[{"role": "user", "content": said}]
        )
    wait_for(lambda: proxy.layer.consolidated_through("ann") > 0)

    newest = proxy.layer.store.messages("ann")[-1].id
    assert proxy.layer.consolidated_through("ann") == newest
    assert facts(proxy.layer, "ann") == {"home_city": ("Lisbon", "consolidation")}
    [asked] = consolidation_requests(upstream)
    assert asked["model"] == MODEL
    prompt = asked["messages"][1]["content"]
    assert "I moved to Lisbon last week." in prompt and "The weather is lovely." in prompt


def test_an_unreachable_model_leaves_the_user_unmarked_and_is_tried_again(
    tmp_path, upstream, embedder, closed_port, caplog
):
    route = ModelRoute(MODEL, f"http://127.0.0.1:{closed_port}/v1", openai_compatible=True)
    settings = Settings(db_path=tmp_path / "moim.db", capture_facts=False)
    config = Config(
        memory=settings,
        upstream_base_url=upstream.url,
        routes={"consolidator": route},
        consolidation_model="consolidator",
        consolidation_every_minutes=TICK,
        consolidation_min_new_turns=2,
    )
    layer = MemoryLayer(settings, embedder_factory=lambda _: embedder)
    unmarked = (
        "consolidation user_id=ann model=consolidator not marked, due again next time: "
        "upstream unreachable: ConnectError"  # was "upstream returned 502": moim's own 502
    )

    with caplog.at_level(logging.INFO, logger="proxy"):
        with serve_app(build_app(config, layer)) as root:
            wait_ready(root)
            reply = httpx.post(
                root + "/v1/chat/completions",
                timeout=30,
                json={
                    "model": MODEL,
                    "user": "ann",
                    "messages": [{"role": "user", "content": "I moved to Lisbon."}],
                },
            )
            assert reply.status_code == 200
            wait_for(lambda: caplog.messages.count(unmarked) >= 2)
            stopping = time.monotonic()
        stopped = time.monotonic() - stopping

    assert layer.consolidated_through("ann") == 0
    assert facts(layer, "ann") == {}
    assert stopped < 5  # the schedule is cancelled with the app, not waited out
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


# -- moim consolidate, every due user ----------------------------------------------------------


def run_cli(tmp_path, upstream, yaml_text, *args):
    (tmp_path / "moim.yaml").write_text(yaml_text)
    env = {
        "MOIM_DB": str(tmp_path / "cli.db"),
        "MOIM_UPSTREAM_BASE_URL": upstream.url,
        "MOIM_CONFIG": str(tmp_path / "moim.yaml"),
    }
    return CliRunner().invoke(main, ["consolidate", *args], env=env)


@pytest.fixture
def cli_layer(tmp_path, embedder):
    settings = Settings(db_path=tmp_path / "cli.db", capture_facts=False)
    return MemoryLayer(settings, embedder_factory=lambda _: embedder)


def test_cli_without_user_consolidates_every_due_user_with_the_configured_model(
    tmp_path, upstream, cli_layer
):
    ann = chat(cli_layer, "ann", "I moved to Lisbon.", "I love it here.")
    chat(cli_layer, "bob", "Hello there.")
    upstream.json_script.append(add("home_city", "Lisbon"))

    result = run_cli(tmp_path, upstream, f"consolidation: {{model: {MODEL}, min_new_turns: 4}}")

    assert result.exit_code == 0, result.output
    assert [json.loads(line)["user_id"] for line in result.stdout.splitlines()] == ["ann"]
    assert json.loads(result.stdout)["applied"] == {"add": 1}
    assert consolidation_requests(upstream)[0]["model"] == MODEL
    assert (cli_layer.consolidated_through("ann"), cli_layer.consolidated_through("bob")) == (
        ann,
        0,
    )


def test_cli_prints_users_not_consolidated_and_exits_non_zero(tmp_path, upstream, cli_layer):
    chat(cli_layer, "ann", "I moved to Lisbon.")
    upstream.json_script.append({"status": 500, "body": {"error": {"message": "down"}}})

    result = run_cli(tmp_path, upstream, "consolidation: {min_new_turns: 2}", "--model", MODEL)

    assert result.exit_code == 1
    assert result.stdout == '{"user_id": "ann", "error": "upstream returned 500"}\n'
    assert result.stderr.splitlines()[1:] == ["Error: 1 of 1 due users not consolidated"]
    assert cli_layer.consolidated_through("ann") == 0


@pytest.mark.parametrize(
    ("scripted", "said"),
    [
        ({"broken_after": 0}, "Error: upstream closed the connection\n"),
        (
            {"status": 502, "body": {"error": {"message": "bad gateway"}}},
            'Error: upstream returned 502: {"error":{"message":"bad gateway"}}\n',
        ),
    ],
)
def test_cli_with_user_says_what_failed_moims_502_or_the_providers(
    tmp_path, upstream, cli_layer, scripted, said
):
    """moim's own 502 (the provider broke off, or was unreachable) was "upstream returned
    502", as if the provider had answered it."""
    chat(cli_layer, "ann", "I moved to Lisbon.")
    upstream.json_script.append(scripted)

    result = run_cli(tmp_path, upstream, "", "--user", "ann", "--model", MODEL)

    assert result.exit_code == 1
    assert result.stderr.splitlines(keepends=True)[1:] == [said]
    assert cli_layer.consolidated_through("ann") == 0


def test_cli_says_litellm_failed_when_no_provider_status_came_back(tmp_path, upstream, cli_layer):
    """litellm's APIConnectionError with no network error under it (here litellm could not
    read the provider's 200 `{}` as an Anthropic message) was "upstream returned 502", as if
    the provider had answered 502."""
    chat(cli_layer, "ann", "I moved to Lisbon.")
    upstream.script.append({"status": 200, "body": {}})
    root = upstream.url.removesuffix("/v1")
    route = f"{{model: anthropic/claude-sonnet-4-5, api_base: '{root}', api_key: sk-up}}"

    result = run_cli(
        tmp_path, upstream, f"models: {{claude: {route}}}\n", "--user", "ann", "--model", "claude"
    )

    assert result.exit_code == 1
    assert result.stderr.splitlines()[1:] == [
        "Error: litellm could not complete the call (KeyError)"
    ]
    assert cli_layer.consolidated_through("ann") == 0


def test_cli_with_user_marks_that_user(tmp_path, upstream, cli_layer):
    ann = chat(cli_layer, "ann", "I moved to Lisbon.")
    upstream.json_script.append(add("home_city", "Lisbon"))

    result = run_cli(tmp_path, upstream, "", "--user", "ann", "--model", MODEL)

    assert result.exit_code == 0, result.output
    assert cli_layer.consolidated_through("ann") == ann


def test_cli_with_nobody_due_says_so(tmp_path, upstream, cli_layer):
    chat(cli_layer, "ann", "Hello there.")

    result = run_cli(tmp_path, upstream, "", "--model", MODEL)  # default: 10 new turns

    assert result.exit_code == 0
    assert result.stdout == ""
    assert result.stderr == (
        f"moim: using {tmp_path.resolve() / 'cli.db'}\nno user has 10 new turns to consolidate\n"
    )
    assert upstream.requests == []


def test_cli_without_any_model_is_a_usage_error(tmp_path, upstream):
    result = run_cli(tmp_path, upstream, "")

    assert result.exit_code == 2
    assert "no model: pass --model or set consolidation.model" in result.output
