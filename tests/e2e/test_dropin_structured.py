"""Structured output through a forced tool call: the answer is the call's arguments.

Clients that extract structured data with a tool (the SDK's `parse` with
`pydantic_function_tool`, instructor, LangChain's `with_structured_output`) name the function
the model must call in `tool_choice`, and read the answer from `tool_calls[].arguments`; the
reply has no content. moim stored such a reply with no text, so it was never recalled.
"""

import openai
import pytest
from pydantic import BaseModel

USER = {"x-memory-user-id": "sofia"}
ANSWER = '{"name":"Ada Quiroga","city":"Lisbon"}'
TOLD = "Extract the contact: Ada Quiroga wrote that she has moved to the coast."
ASKED = "Which city does Ada Quiroga live in now?"


class Contact(BaseModel):
    name: str
    city: str


def extract(client, api, stream):
    """The answer as the client reads it, from the call the request forced."""
    if api == "responses":
        tool = {"type": "function", "name": "Contact", "parameters": Contact.model_json_schema()}
        reply = client.responses.create(
            model="gpt-4o-mini",
            input=TOLD,
            tools=[tool],
            tool_choice={"type": "function", "name": "Contact"},
        )
        return reply.output[0].arguments
    tool = openai.pydantic_function_tool(Contact)
    forced = {"type": "function", "function": {"name": "Contact"}}
    messages = [{"role": "user", "content": TOLD}]
    if stream:
        with client.chat.completions.stream(
            model="gpt-4o-mini", messages=messages, tools=[tool], tool_choice=forced
        ) as events:
            call = events.get_final_completion().choices[0].message.tool_calls[0]
    else:
        reply = client.chat.completions.parse(
            model="gpt-4o-mini", messages=messages, tools=[tool], tool_choice=forced
        )
        call = reply.choices[0].message.tool_calls[0]
    return call.function.parsed_arguments.model_dump_json()


@pytest.mark.parametrize("api, stream", [("chat", False), ("chat", True), ("responses", False)])
def test_the_answer_of_a_forced_tool_call_is_stored_as_said_and_recalled(
    proxy, upstream, api, stream
):
    call = {"id": "call_contact", "name": "Contact", "arguments": ANSWER}
    upstream.script[:] = [{"tool_calls": [call]}]
    with proxy.client(default_headers=USER) as client:
        assert extract(client, api, stream) == '{"name":"Ada Quiroga","city":"Lisbon"}'
        proxy.flush()

        client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": ASKED}]
        )

    stored = [(m.role, m.content) for m in proxy.layer.store.messages("sofia")]
    assert stored[:2] == [("user", TOLD), ("assistant", ANSWER)]
    block = [m["content"] for m in upstream.last_json["messages"] if m["role"] == "system"]
    assert block and ANSWER in block[0]
