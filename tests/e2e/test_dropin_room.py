"""The block fits the room the provider counts, not only the room the messages leave.

A provider counts against the model's context window the tool and function definitions a
request offers, moim's own memory tools when they are on, and every image, audio clip or file
among the messages; a block sized for the messages alone pushed an agent with many tools
near its window over it (proxy/room.py).
"""

import json

import httpx
import pytest
import tiktoken

from memory import count_message_tokens
from memory.block.tokens import _count_short

MODEL = "gpt-4o-mini"
WINDOW = 400  # the model's context window, as config.yaml's `context_windows` may set it
FACT = {"key": "home", "value": "a flat above the bakery on Rua das Flores", "category": "home"}
ALICE = {"X-Memory-User-Id": "alice"}
# A history that leaves room for the fact (tests/e2e/test_dropin_api.py: the facts go in)
HISTORY = [{"role": "user", "content": "word" + " word" * (WINDOW - 111)}]


def tool(name):
    """A function tool of about 60 tokens."""
    parameters = {
        "type": "object",
        "properties": {"city": {"type": "string", "description": "the city, e.g. Lisbon"}},
        "required": ["city"],
    }
    description = f"Look up the {name} of a city and return it as a short sentence."
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }


TOOLS = [tool("weather"), tool("population"), tool("mayor")]


@pytest.fixture
def edge(make_proxy):
    """A proxy whose model has a small window, for a user with a fact to inject."""
    proxy = make_proxy(settings={"context_windows": {MODEL: WINDOW}})
    assert httpx.post(proxy.url + "/memory/facts", json=FACT, headers=ALICE).status_code == 200
    return proxy


def provider_tokens(body):
    """What the provider counts, roughly: the messages, and the tools' JSON."""
    encoding = tiktoken.get_encoding("o200k_base")
    tools = sum(len(encoding.encode(json.dumps(t))) for t in body.get("tools", []))
    return count_message_tokens(body["messages"], MODEL) + tools


def test_the_history_alone_leaves_room_for_the_fact(edge, upstream):
    with edge.client() as client:
        raw = client.chat.completions.with_raw_response.create(
            model=MODEL, messages=HISTORY, extra_headers=ALICE
        )

    assert raw.headers["x-memory-facts-injected"] == "1"
    assert provider_tokens(upstream.last_json) <= WINDOW


# A history that leaves less room than the fact's block (44 tokens) needs
TIGHT = [{"role": "user", "content": "word" + " word" * (WINDOW - 50)}]
NO_CAP = "1000000000"


@pytest.mark.parametrize(
    ("history", "budget", "facts"),
    [(HISTORY, "0", "0"), (HISTORY, "5", "0"), (HISTORY, NO_CAP, "1"), (TIGHT, NO_CAP, "0")],
    ids=["zero", "tiny", "past-the-room", "past-a-tight-room"],
)
def test_a_context_budget_caps_the_block_and_never_widens_the_room(
    edge, upstream, history, budget, facts
):
    # CONTRACT.md's X-Memory-Context-Budget: 0 injects nothing, nor does a budget too small
    # for the smallest block; one past the room the window leaves is held to that room.
    headers = {**ALICE, "X-Memory-Context-Budget": budget}
    with edge.client() as client:
        raw = client.chat.completions.with_raw_response.create(
            model=MODEL, messages=history, extra_headers=headers
        )

    assert raw.headers["x-memory-facts-injected"] == facts
    assert provider_tokens(upstream.last_json) <= WINDOW
    if facts == "0":
        assert raw.headers["x-memory-tokens-injected"] == "0"
        assert upstream.last_json["messages"] == history


@pytest.mark.parametrize(
    "fields",
    [{"tools": TOOLS}, {"functions": [t["function"] for t in TOOLS]}],
    ids=["tools", "functions"],
)
def test_tool_definitions_take_their_room_from_the_block(edge, upstream, fields):
    with edge.client() as client:
        raw = client.chat.completions.with_raw_response.create(
            model=MODEL, messages=HISTORY, extra_headers=ALICE, **fields
        )

    assert raw.headers["x-memory-facts-injected"] == "0"
    assert upstream.last_json["messages"] == HISTORY


def test_moims_memory_tools_take_their_room_from_the_block(edge, upstream):
    with edge.client() as client:
        raw = client.chat.completions.with_raw_response.create(
            model=MODEL, messages=HISTORY, extra_headers={**ALICE, "X-Memory-Tools": "on"}
        )

    assert upstream.last_json["tools"]  # the loop offered moim's tools
    assert raw.headers["x-memory-facts-injected"] == "0"
    assert upstream.last_json["messages"] == HISTORY


def test_an_image_takes_its_room_from_the_block(make_proxy, upstream):
    """An image costs hundreds of tokens (OpenAI: up to 1,536); its URL, a few: a window
    that holds the text, the image and little more has no room for the fact."""
    proxy = make_proxy(settings={"context_windows": {MODEL: 1580}})
    assert httpx.post(proxy.url + "/memory/facts", json=FACT, headers=ALICE).is_success
    image = {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}
    text = {"type": "text", "text": "What is in this picture?"}
    messages = [{"role": "user", "content": [text, image]}]

    with proxy.client() as client:
        raw = client.chat.completions.with_raw_response.create(
            model=MODEL, messages=messages, extra_headers=ALICE
        )

    assert raw.headers["x-memory-facts-injected"] == "0"
    assert upstream.last_json["messages"] == messages


def test_a_responses_request_counts_its_tools(edge, upstream):
    tools = [{"type": "function", **t["function"]} for t in TOOLS]
    with edge.client() as client:
        raw = client.responses.with_raw_response.create(
            model=MODEL, input=HISTORY[0]["content"], tools=tools, extra_headers=ALICE
        )

    assert raw.headers["x-memory-facts-injected"] == "0"
    assert upstream.last_responses_json["input"] == HISTORY[0]["content"]


def test_with_room_for_both_the_tools_and_the_block_the_fact_goes_in(make_proxy, upstream):
    proxy = make_proxy(settings={"context_windows": {MODEL: WINDOW + 300}})
    assert httpx.post(proxy.url + "/memory/facts", json=FACT, headers=ALICE).is_success

    with proxy.client() as client:
        raw = client.chat.completions.with_raw_response.create(
            model=MODEL, messages=HISTORY, tools=TOOLS, extra_headers=ALICE
        )

    assert raw.headers["x-memory-facts-injected"] == "1"
    assert provider_tokens(upstream.last_json) <= WINDOW + 300


def test_tools_past_the_window_are_counted_only_until_no_room_is_left(edge, upstream):
    """100,000 tools (30 MB) were each counted, ~10 s of CPU on the request path, for a
    window long since full: counting stops once the room is gone; the provider gets them all."""
    tools = [tool(f"lookup_{n}") for n in range(20_000)]
    counted = _count_short.cache_info().misses

    with edge.client() as client:
        raw = client.chat.completions.with_raw_response.create(
            model=MODEL, messages=HISTORY, tools=tools, extra_headers=ALICE
        )

    assert _count_short.cache_info().misses - counted < 100  # ~60 tokens a tool, 400 in all
    assert raw.headers["x-memory-facts-injected"] == "0"
    assert len(upstream.last_json["tools"]) == 20_000
