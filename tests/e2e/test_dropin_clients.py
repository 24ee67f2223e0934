"""Drop-in with the clients people point at moim (LangChain, pydantic-ai, instructor, the
Azure SDK): what they send that the official SDK's own tests did not, through the real proxy.

Each test is a case an audit found moim treating differently from the provider, or storing
what it should not, reproduced with the openai SDK or raw httpx.
"""

import json

import pytest

from tests.upstream import WEATHER_CALL

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {}}}]
ASK = {"role": "user", "content": "Weather in Paris?"}


def stored(proxy, user):
    proxy.flush()
    return [(m.role, m.content) for m in proxy.layer.store.messages(user)]


@pytest.mark.parametrize("path", ["/chat/completions", "/responses"])
def test_a_call_sent_back_with_its_arguments_rewritten_is_the_call_stored(proxy, upstream, path):
    """LangChain and pydantic-ai parse a call's arguments and write them again when they send
    the history back (`{"city": "Paris"}` for the provider's `{"city":"Paris"}`): the same
    call, which moim stored a second time."""
    headers = {"X-Memory-User-Id": "agent"}
    rewritten = json.dumps(json.loads(WEATHER_CALL["arguments"]))
    assert rewritten != WEATHER_CALL["arguments"]
    result = "Sunny, 24 °C"
    with proxy.client(default_headers=headers) as client:
        if path == "/responses":
            tools = [{"type": "function", "name": "get_weather", "parameters": {}}]
            client.responses.create(model="tool-call", input=[ASK], tools=tools)
            call = {"type": "function_call", "call_id": WEATHER_CALL["id"], "name": "get_weather"}
            output = {"type": "function_call_output", "call_id": WEATHER_CALL["id"]}
            history = [ASK, {**call, "arguments": rewritten}, {**output, "output": result}]
            client.responses.create(model="gpt-4o-mini", input=history, tools=tools)
        else:
            client.chat.completions.create(model="tool-call", messages=[ASK], tools=TOOLS)
            function = {"name": "get_weather", "arguments": rewritten}
            call = {"id": WEATHER_CALL["id"], "type": "function", "function": function}
            history = [
                ASK,
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": WEATHER_CALL["id"], "content": result},
            ]
            client.chat.completions.create(model="gpt-4o-mini", messages=history, tools=TOOLS)

    assert stored(proxy, "agent") == [
        ("user", ASK["content"]),
        ("assistant", ""),  # the call, once
        ("tool", result),
        ("assistant", "echo: " + ASK["content"]),
    ]
