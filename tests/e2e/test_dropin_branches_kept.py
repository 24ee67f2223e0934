"""Clients that trim, summarise or loop, and edit nothing: no message of theirs is left behind.

memory/ingest/branches.py sets aside the exchange a chat UI's edit or regeneration replaced.
These clients also send requests that do not carry all of the session's record, yet none of
their turns was taken back: each request's turn stays recalled.
"""

import pytest

from memory.store.left_messages import LEFT

pytestmark = pytest.mark.both_backends

SYSTEM = {"role": "system", "content": "You are a travel assistant."}
QUESTIONS = [
    "My flight to Oslo leaves on Tuesday from gate B7.",
    "My hotel in Oslo is the Grand on Karl Johans gate.",
    "My flight back from Oslo leaves on Sunday from gate C2.",
    "My train to Bergen leaves on Thursday from track 4.",
    "My ferry from Bergen leaves on Friday from pier 3.",
]


def said(role, text):
    return {"role": role, "content": text}


def send(client, messages):
    reply = client.chat.completions.create(model="gpt-4o-mini", messages=messages)
    return reply.choices[0].message.model_dump(exclude_none=True)


def left(proxy):
    rows = proxy.layer.store.read(f"SELECT content FROM messages WHERE indexed = {LEFT}", ())
    return [row[0] for row in rows]


def window(history, new):
    """The system prompt and the last three messages: a sliding window."""
    return [SYSTEM, *history[-3:], new]


def users_only(history, new):
    """Only the user's own messages, none of the replies."""
    return [SYSTEM, *[m for m in history if m["role"] == "user"], new]


def summary(history, new):
    """A summary of all but the last exchange, as a system message, then that exchange."""
    gist = " ".join(m["content"][:20] for m in history[:-2])
    return [SYSTEM, said("system", "Summary so far: " + gist), *history[-2:], new]


@pytest.mark.parametrize("client_sends", [window, users_only, summary])
def test_a_client_that_trims_its_history_leaves_nothing(proxy, client_sends):
    history = []
    with proxy.client() as client:
        for text in QUESTIONS:
            new = said("user", text)
            reply = send(client, client_sends(history, new))
            history += [new, reply]
            proxy.flush()

    assert left(proxy) == []


def test_an_agents_tool_loop_leaves_nothing(proxy, upstream):
    call = {"id": "c1", "name": "get_weather", "arguments": '{"city": "Oslo"}'}
    upstream.script[:] = [
        {"content": "", "tool_calls": [call]},
        {"content": "It is 4 degrees in Oslo."},
        {"content": "", "tool_calls": [{**call, "id": "c2"}]},
        {"content": "Still 4 degrees in Oslo."},
    ]
    tool = {"type": "function", "function": {"name": "get_weather", "parameters": {}}}
    history = [SYSTEM]
    with proxy.client() as client:
        for text in ("What's the weather in Oslo?", "And what's the weather in Oslo now?"):
            history.append(said("user", text))
            while True:
                reply = client.chat.completions.create(
                    model="gpt-4o-mini", messages=history, tools=[tool]
                )
                message = reply.choices[0].message.model_dump(exclude_none=True)
                history.append(message)
                proxy.flush()
                if not message.get("tool_calls"):
                    break
                for made in message["tool_calls"]:
                    result = {"role": "tool", "tool_call_id": made["id"], "content": "4 C"}
                    history.append(result)

    assert left(proxy) == []
