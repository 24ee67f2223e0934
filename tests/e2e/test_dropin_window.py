"""Clients that trim their history: a chat app or an agent that keeps its system prompt and
only the latest turns once its window fills, through the official SDK and the real proxy.

An agent's request may then hold no user message at all (as a Responses API request that
sends only a tool's output does): recall searches for the task the session stored.

Each message is still stored once and verbatim: what the client drops is not said again, and
what it says again in the same words ("yes", "Done.") is a new message, not one stored before.
"""

import pytest

from tests.e2e.test_recall import block_in, remember_apart
from tests.e2e.test_responses import blocks_in
from tests.upstream import WEATHER_CALL

SYSTEM = {"role": "system", "content": "You are a terse assistant for household chores."}
KEPT = 4  # the client keeps its system prompt and its last four messages


def chat(client, messages):
    """One non-streamed request, as the client's own user; the assistant message it got."""
    reply = client.chat.completions.create(model="gpt-4o-mini", messages=messages)
    return reply.choices[0].message.model_dump(exclude_none=True)


def trimmed(history):
    return [SYSTEM, *history[-KEPT:]]


def stored(proxy):
    proxy.flush()
    return [(m.role, m.content) for m in proxy.layer.store.messages("default")]


def test_a_repeated_reply_and_answer_after_the_window_slid_are_stored_as_said(proxy, upstream):
    """The k-th "yes" of a window that lost the first ones was numbered as the first again:
    the third "yes" and the replies from the fourth on were taken as stored and lost."""
    said = ["Set the alarm code to 7781-QX", "yes", "Book the dentist for Friday", "yes"]
    said += ["Renew passport P-88321", "yes"]
    upstream.script[:] = [{"content": "Done."} for _ in said]
    history = []
    with proxy.client() as client:
        for text in said:
            history.append({"role": "user", "content": text})
            history.append(chat(client, trimmed(history)))

    assert stored(proxy) == [("system", SYSTEM["content"])] + [
        (m["role"], m["content"]) for m in history
    ]


def test_a_window_sent_again_stores_nothing_new(proxy, upstream):
    """A retry of a trimmed request is the same request, and the same reply to it (as for a
    whole history sent again) is the one stored."""
    history = []
    upstream.script[:] = [{"content": "Done."} for _ in range(8)]
    with proxy.client() as client:
        for text in ["Water the ferns", "yes", "Feed the cat", "yes"]:
            history.append({"role": "user", "content": text})
            history.append(chat(client, trimmed(history)))
        before = stored(proxy)
        history.append({"role": "user", "content": "yes"})
        window = trimmed(history)
        chat(client, window)
        chat(client, window)

    assert stored(proxy) == [*before, ("user", "yes"), ("assistant", "Done.")]


TASK = "Find a plumber near Rua Augusta who can fix the leaking boiler before Saturday"
SEARCHES = ["plumbers Rua Augusta", "boiler repair Saturday", "plumber reviews Baixa"]


@pytest.mark.both_backends
def test_an_agent_loop_that_trimmed_its_task_away_recalls_the_task(proxy, upstream):
    """An agent keeps its system prompt and its last tool rounds: once the user's task is
    trimmed away the request has no user message, and recall searched for nothing. It now
    searches for the session's stored task, which comes back as this session's."""
    upstream.script[:] = [
        {"tool_calls": [{"id": f"call_{n}", "name": "search", "arguments": f'{{"q":"{q}"}}'}]}
        for n, q in enumerate(SEARCHES)
    ] + [{"content": "Done."}]
    history = [{"role": "user", "content": TASK}]
    with proxy.client() as client:
        for n, _ in enumerate(SEARCHES):
            history.append(chat(client, trimmed(history)))
            history.append({"role": "tool", "tool_call_id": f"call_{n}", "content": f"{n} hits"})
        proxy.flush()  # the agent's tools took their time: the task is indexed
        window = trimmed(history)
        assert all(m["role"] != "user" for m in window)
        chat(client, window)

    block = block_in(upstream.last_json["messages"])
    assert block is not None and "This session, earlier" in block
    assert f"user: {TASK}" in block


def test_a_responses_round_that_sends_only_a_tools_output_recalls_for_the_task(proxy, upstream):
    """The provider holds the task (`previous_response_id`); the request carries only the
    function's output, and recall searched for nothing: no excerpt of what the user said
    before about the task."""
    remember_apart(proxy, "jo", "I always carry an umbrella when I visit Paris in spring")
    tools = [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}]
    task = "What is the weather in Paris, should I pack an umbrella?"
    jo = {"X-Memory-User-Id": "jo"}
    with proxy.client() as client:
        asked = client.responses.create(
            model="tool-call", input=task, tools=tools, extra_headers=jo
        )
        proxy.flush()
        output = {"type": "function_call_output", "call_id": WEATHER_CALL["id"], "output": "Sun"}
        client.responses.create(
            model="gpt-4o-mini",
            previous_response_id=asked.id,
            input=[output],
            tools=tools,
            extra_headers=jo,
        )

    [block] = [item["content"] for item in blocks_in(upstream.last_responses_json["input"])]
    assert "user: I always carry an umbrella" in block
    assert task not in block  # the provider holds it
