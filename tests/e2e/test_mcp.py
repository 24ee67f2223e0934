"""MCP (proxy/mcp_server.py): the memory tools over stdio (`moim mcp`) and streamable HTTP
(`/mcp` on the real proxy), driven by the official `mcp` SDK's own client."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import anyio
import httpx
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from memory import MemoryLayer, Settings, Turn
from proxy.config import ProxyKey
from proxy.tools import SCHEMAS

REPO = Path(__file__).resolve().parents[2]
TOOLS = {"search_memory", "remember_fact", "recall_facts", "forget_fact"}
KAYAK = "I keep my red kayak at the marina in Porto, berth number 14"


def result(called):
    """A tool result's JSON, and whether the server marked it an error."""
    assert [c.type for c in called.content] == ["text"]
    return json.loads(called.content[0].text), bool(called.is_error)


def remember_kayak(layer, user):
    said = {"role": "user", "content": KAYAK}
    layer.remember(Turn(user, "s1", "gpt-4o-mini", (said,), None, time.time() - 60))


# -- stdio: moim mcp ---------------------------------------------------------------------------


def stdio_server(db, *args):
    env = {**os.environ, "MOIM_DB": str(db), "PYTHONPATH": str(REPO)}
    env.pop("MOIM_USER", None)
    return StdioServerParameters(
        command=sys.executable, args=["-m", "proxy.cli", "mcp", *args], env=env, cwd=str(db.parent)
    )


def stdio_session(db, *args, calls):
    """Start `moim mcp ARGS` on `db`, run `calls(client)` in its session, return what it did."""

    async def main():
        async with Client(stdio_server(db, *args), read_timeout_seconds=120) as client:
            return await calls(client)

    return anyio.run(main)


@pytest.fixture
def stored(tmp_path, embedder):
    """A database where ann said KAYAK, and the layer over it."""
    layer = MemoryLayer(Settings(db_path=tmp_path / "moim.db"), embedder_factory=lambda _: embedder)
    remember_kayak(layer, "ann")
    return layer


def test_stdio_offers_the_four_tools_and_acts_for_its_user_only(stored):
    async def calls(client):
        listed = await client.list_tools()
        remembered = await client.call_tool("remember_fact", {"key": "city", "value": "Lisbon"})
        recalled = await client.call_tool("recall_facts", {})
        found = await client.call_tool("search_memory", {"query": "where is my kayak?", "k": 3})
        return listed, remembered, recalled, found

    listed, remembered, recalled, found = stdio_session(
        stored.settings.db_path, "--user", "ann", calls=calls
    )

    assert {tool.name for tool in listed.tools} == TOOLS
    schemas = {tool.name: tool.input_schema for tool in listed.tools}
    assert schemas["remember_fact"]["required"] == ["key", "value"]
    city = {"key": "city", "value": "Lisbon", "category": "profile", "policy": "speak"}
    assert result(remembered) == ({"remembered": city}, False)
    facts, failed = result(recalled)
    assert not failed and facts["facts"] == [city]
    hits, failed = result(found)
    assert not failed and hits["results"][0]["text"] == KAYAK
    assert hits["note"].startswith("Recalled from this user's memory")
    # stored for ann, in the database the server named, and for no one else
    assert [(f.key, f.value, f.source) for f in stored.list_facts("ann")] == [
        ("city", "Lisbon", "model_tool")
    ]
    assert stored.list_facts("default") == []


def test_stdio_user_comes_from_moim_user_and_forget_archives(stored):
    stored.set_fact("bob", "diet", "vegetarian")
    server = stdio_server(stored.settings.db_path)
    server.env["MOIM_USER"] = "bob"

    async def main():
        async with Client(server, read_timeout_seconds=120) as client:
            forgotten = await client.call_tool("forget_fact", {"key": "diet"})
            again = await client.call_tool("forget_fact", {"key": "diet"})
            nothing = await client.call_tool("search_memory", {"query": "kayak"})
            return forgotten, again, nothing

    forgotten, again, nothing = anyio.run(main)

    assert result(forgotten) == ({"forgotten": True, "key": "diet"}, False)
    assert result(again) == (
        {"forgotten": False, "error": "nothing is remembered under 'diet'"},
        True,
    )
    assert result(nothing)[0]["results"] == []  # ann's kayak is not bob's
    assert [f.status for f in stored.fact_history("bob", "diet")] == ["archived"]


def test_stdio_bad_arguments_are_tool_errors_not_crashes(stored):
    async def calls(client):
        missing = await client.call_tool("remember_fact", {"key": "city"})
        blank = await client.call_tool("remember_fact", {"key": " ", "value": "x"})
        alive = await client.call_tool("recall_facts", {})
        return missing, blank, alive

    missing, blank, alive = stdio_session(stored.settings.db_path, "--user", "ann", calls=calls)

    assert missing.is_error and "value" in missing.content[0].text
    assert result(blank) == (
        {"error": "'key' is required and must be a non-empty string"},
        True,
    )
    assert result(alive)[1] is False


def test_stdio_answers_every_request_sent_before_stdin_closes(stored):
    """`printf '…initialize…\\n…tools/call…\\n' | moim mcp` answered the initialize only:
    the SDK cancels the requests still being handled when its input ends."""
    lines = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "printf", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "search_memory", "arguments": {"query": "where is my kayak?"}},
        },
        {
            "jsonrpc": "2.0",
            "id": "3",
            "method": "tools/call",
            "params": {"name": "remember_fact", "arguments": {"key": "city", "value": "Oslo"}},
        },
    ]
    server = stdio_server(stored.settings.db_path, "--user", "ann")
    finished = subprocess.run(
        [server.command, *server.args],
        input="".join(json.dumps(line) + "\n" for line in lines),
        env=server.env,
        cwd=server.cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert finished.returncode == 0, finished.stderr
    answers = {a["id"]: a for a in map(json.loads, finished.stdout.splitlines())}
    assert set(answers) == {1, 2, "3"}, finished.stdout
    found = json.loads(answers[2]["result"]["content"][0]["text"])
    assert found["results"][0]["text"] == KAYAK
    assert [(f.key, f.value) for f in stored.list_facts("ann")] == [("city", "Oslo")]


def test_moim_mcp_refuses_a_missing_database_and_a_bad_user(tmp_path):
    from click.testing import CliRunner

    from proxy.cli import main

    runner = CliRunner()
    missing = runner.invoke(main, ["mcp", "--user", "ann"], env={"MOIM_DB": str(tmp_path / "x")})
    bad = runner.invoke(main, ["mcp", "--user", "a" * 257], env={"MOIM_DB": str(tmp_path / "x")})

    assert missing.exit_code == 1 and "no database at" in missing.output
    assert not (tmp_path / "x").exists()
    assert bad.exit_code == 2 and "at most 256 characters" in bad.output


def test_stdio_user_is_the_namespace_chat_gives_the_same_id(stored):
    async def calls(client):
        return await client.call_tool("remember_fact", {"key": "city", "value": "Oslo"})

    stdio_session(stored.settings.db_path, "--user", "john smith", calls=calls)

    assert [f.value for f in stored.list_facts("~john%20smith")] == ["Oslo"]


# -- streamable HTTP: /mcp on the proxy --------------------------------------------------------


def http_session(url, headers, calls, timeout=120):
    async def main():
        async with httpx2.AsyncClient(headers=headers, timeout=timeout) as http:
            transport = streamable_http_client(url, http_client=http)
            async with Client(transport, read_timeout_seconds=timeout) as client:
                return await calls(client)

    return anyio.run(main)


def test_http_tools_act_for_the_user_the_headers_name(proxy):
    remember_kayak(proxy.layer, "alice")

    async def calls(client):
        listed = await client.list_tools()
        await client.call_tool("remember_fact", {"key": "pet", "value": "a cat named Miso"})
        found = await client.call_tool("search_memory", {"query": "kayak berth"})
        return listed, found

    listed, found = http_session(proxy.root + "/mcp", {"X-Memory-User-Id": "alice"}, calls)

    assert {tool.name: tool.input_schema for tool in listed.tools} == {
        "search_memory": SCHEMAS["moim_search_memory"]["function"]["parameters"],
        "remember_fact": SCHEMAS["moim_remember_fact"]["function"]["parameters"],
        "recall_facts": SCHEMAS["moim_recall_facts"]["function"]["parameters"],
        "forget_fact": SCHEMAS["moim_forget_fact"]["function"]["parameters"],
    }  # the in-proxy tools' own schemas
    assert result(found)[0]["results"][0]["text"] == KAYAK
    facts = httpx.get(proxy.root + "/v1/memory/facts", headers={"X-Memory-User-Id": "alice"})
    assert [(f["key"], f["value"]) for f in facts.json()["facts"]] == [("pet", "a cat named Miso")]
    assert proxy.layer.list_facts("default") == []


def test_http_path_user_and_read_mode(proxy):
    async def calls(client):
        listed = await client.list_tools()
        refused = await client.call_tool("remember_fact", {"key": "k", "value": "v"})
        return listed, refused

    proxy.layer.set_fact("bob", "city", "Oslo")
    listed, refused = http_session(proxy.root + "/u/bob/mcp", {"X-Memory-Mode": "read"}, calls)

    assert {tool.name for tool in listed.tools} == {"search_memory", "recall_facts"}
    assert refused.is_error
    assert [f.key for f in proxy.layer.list_facts("bob")] == ["city"]


KEYS = (
    ProxyKey("sk-alice", user_id="alice"),
    ProxyKey("sk-team", users=("bob", "carol")),
)


def test_http_with_proxy_keys_a_bound_key_is_its_user_whatever_the_headers_say(make_proxy):
    keyed = make_proxy(keys=KEYS)

    async def calls(client):
        return await client.call_tool("remember_fact", {"key": "city", "value": "Rome"})

    headers = {"Authorization": "Bearer sk-alice", "X-Memory-User-Id": "mallory"}
    remembered = http_session(keyed.root + "/mcp", headers, calls)

    assert result(remembered)[1] is False
    assert [f.value for f in keyed.layer.list_facts("alice")] == ["Rome"]
    assert keyed.layer.list_facts("mallory") == []


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}


@pytest.mark.parametrize(
    ("headers", "status", "code"),
    [
        ({}, 401, "invalid_api_key"),
        ({"Authorization": "Bearer sk-wrong"}, 401, "invalid_api_key"),
        ({"Authorization": "Bearer sk-team", "X-Memory-User-Id": "dave"}, 403, "user_not_allowed"),
    ],
)
def test_http_with_proxy_keys_refuses_like_the_memory_api(make_proxy, headers, status, code):
    keyed = make_proxy(keys=KEYS)
    accept = {"Accept": "application/json, text/event-stream"}

    response = httpx.post(keyed.root + "/mcp", json=INITIALIZE, headers={**accept, **headers})

    assert response.status_code == status
    assert response.json()["error"]["code"] == code
    allowed = {"Authorization": "Bearer sk-team", "X-Memory-User-Id": "carol", **accept}
    assert httpx.post(keyed.root + "/mcp", json=INITIALIZE, headers=allowed).status_code == 200


def test_http_on_loopback_without_keys_refuses_a_foreign_origin(proxy):
    accept = {"Accept": "application/json, text/event-stream"}

    foreign = httpx.post(
        proxy.root + "/mcp", json=INITIALIZE, headers={**accept, "Origin": "http://evil.example"}
    )
    local = httpx.post(proxy.root + "/mcp", json=INITIALIZE, headers=accept)

    assert foreign.status_code == 403
    assert local.status_code == 200


def test_http_search_for_a_query_of_megabytes_finds_what_its_start_names(proxy):
    """A search embedded its whole query: the tokenizer ran over all of it before truncating
    to 256 tokens (~3 s a MB, holding the GIL, so moim answered no one meanwhile), and its
    dates were scanned for; this one took minutes. It reads the first 16,000 characters."""
    remember_kayak(proxy.layer, "alice")
    proxy.layer.index_pending()

    async def calls(client):
        query = "red kayak marina berth " * 1_300_000  # 30 MB
        return await client.call_tool("search_memory", {"query": query, "k": 1})

    found = http_session(proxy.root + "/mcp", {"X-Memory-User-Id": "alice"}, calls, timeout=60)

    answer, failed = result(found)
    assert not failed and [hit["text"] for hit in answer["results"]] == [KAYAK]
