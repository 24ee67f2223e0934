"""proxy/responses_body.py: a Responses API request as chat messages, and the block placed."""

import pytest

from proxy.errors import BadRequest
from proxy.responses_body import conversation_messages, parse_responses_body, place_block

BLOCK = "=== Memory Context ===\nRecalled.\n=== End Memory ==="
CALL = {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}", "id": "fc_1"}


def test_instructions_and_a_string_input_are_a_system_and_a_user_message():
    body = {"model": "m", "instructions": "Be brief.", "input": "hi"}
    assert conversation_messages(body) == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
    ]


def test_items_become_messages_with_a_reply_of_text_and_calls_as_one():
    text = [{"type": "output_text", "text": "Let me look.", "annotations": []}]
    items = [
        {"role": "user", "content": [{"type": "input_text", "text": "Weather?"}]},
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"type": "message", "role": "assistant", "content": text, "id": "msg_1"},
        CALL,
        {**CALL, "call_id": "c2"},
        {"type": "function_call_output", "call_id": "c1", "output": "Sunny"},
        {"type": "function_call_output", "call_id": "c2", "output": "Warm"},
        CALL,
        {"type": "item_reference", "id": "msg_0"},
    ]
    call = {"type": "function", "function": {"name": "f", "arguments": "{}"}}
    assert conversation_messages({"input": items}) == [
        {"role": "user", "content": [{"type": "input_text", "text": "Weather?"}]},
        {
            "role": "assistant",
            "content": text,
            "tool_calls": [{"id": "c1", **call}, {"id": "c2", **call}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "Sunny"},
        {"role": "tool", "tool_call_id": "c2", "content": "Warm"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", **call}]},
    ]


def test_no_input_is_no_message():
    assert conversation_messages({"model": "m", "previous_response_id": "resp_1"}) == []


def test_the_block_goes_before_the_last_user_item_and_nothing_else_changes():
    items = [{"role": "user", "content": "one"}, CALL, {"role": "user", "content": "two"}]
    body = {"model": "m", "instructions": "S", "input": items, "store": False}
    assert place_block(body, BLOCK, "before_last_user") == {
        **body,
        "input": [*items[:2], {"role": "system", "content": BLOCK}, items[2]],
    }
    assert body["input"] == items  # the client's body is not changed


def test_a_string_input_becomes_the_user_item_after_the_block():
    placed = place_block({"model": "m", "input": "hi"}, BLOCK, "before_last_user")
    assert placed["input"] == [
        {"role": "system", "content": BLOCK},
        {"role": "user", "content": "hi"},
    ]


def test_without_a_user_item_the_block_goes_last():
    result = {"type": "function_call_output", "call_id": "c1", "output": "Sunny"}
    placed = place_block({"model": "m", "input": [result]}, BLOCK, "before_last_user")
    assert placed["input"] == [result, {"role": "system", "content": BLOCK}]


def test_placement_system_prepends_to_instructions_or_comes_first():
    with_instructions = {"model": "m", "instructions": "S", "input": "hi"}
    assert place_block(with_instructions, BLOCK, "system") == {
        **with_instructions,
        "instructions": f"{BLOCK}\n\nS",
    }
    placed = place_block({"model": "m", "input": "hi"}, BLOCK, "system")
    assert placed["input"] == [
        {"role": "system", "content": BLOCK},
        {"role": "user", "content": "hi"},
    ]


@pytest.mark.parametrize(
    "raw",
    [
        b'{"model": "m", "input": {"role": "user"}}',
        b'{"model": "m", "input": [{"type": "message", "role": "user"}]}',
        b'{"model": "m", "input": [{"role": "user", "content": ["x"]}]}',
        b'{"model": "m", "input": [{"type": 5}]}',
        b'{"model": "m", "input": [{"type": "function_call_output", "call_id": "c", "output": 1}]}',
        b'{"model": "m", "input": "hi", "instructions": 1}',
    ],
)
def test_what_memory_cannot_read_is_refused(raw):
    with pytest.raises(BadRequest):
        parse_responses_body(raw, 100)


def test_unknown_item_types_and_fields_pass():
    raw = b'{"model": "m", "input": [{"type": "web_search_call", "id": "ws"}], "tools": [1]}'
    assert parse_responses_body(raw, 100)[0]["tools"] == [1]


def test_too_many_items_are_refused():
    with pytest.raises(BadRequest, match="more than 2 items"):
        parse_responses_body(b'{"model": "m", "input": ["a", "b", "c"]}', 2)
