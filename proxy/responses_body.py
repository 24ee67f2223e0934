"""A Responses API request as moim's memory steps read it, and the block written back into it.

`POST /v1/responses` carries the conversation as `instructions` (the system prompt) and
`input`: a string (one user message) or a list of items. The memory steps read chat messages,
so `conversation_messages` turns the request into them:

- `instructions` → a first system message;
- a `message` item (or an item with no `type`, as the SDK's shorthand) → a message of its role,
  its content kept as sent (a string, or parts whose `text` is the message's text); an item
  with no `type` (or a null one), an `id` and no `role` is an item reference (the SDK's
  `ItemReference`, whose `type` is optional), forwarded but not read;
- a `function_call` item → a tool call (id = its `call_id`) of the assistant message before
  it when that is the assistant's, else of a new assistant message, so a reply of text and
  calls is one message, whether it comes from the provider's output or is sent back as input;
- a `function_call_output` item → a `tool` message for that `call_id`;
- a `custom_tool_call` item (GPT-5's free-form tools) and its `custom_tool_call_output` the
  same way, the call as chat has it (`type: "custom"`, `custom: {name, input}`);
- other items (reasoning, built-in tools' calls, item references) are forwarded but not read.

`place_block` writes the MOIM block back as a system message item (CONTRACT.md: the block is
inside a system message), where the placement says: "before_last_user" just before the last
user message item (a string input becomes that one item), "system" at the start of
`instructions` (or as a first item when there are none). Nothing else in the body changes.
`block_edit` is the same change made in the client's text (`proxy/json_items.py`): the one
item written into `input`'s array, or `instructions` or a string `input` written again.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from memory import Placement, block_place, inject_block
from proxy.errors import BadRequest
from proxy.json_items import Edit, Located
from proxy.pipeline import model_body

ROLES = ("user", "assistant", "system", "developer")


def parse_responses_body(
    raw: bytes, max_items: int, locate: bool = True
) -> tuple[dict[str, Any], Located | None]:
    """The request JSON, checked as far as memory reads it (other fields are the
    provider's), and where its values lie in its text, with (`locate`) its input items."""
    body, located = model_body(raw, "input" if locate else None)
    for name in ("instructions", "previous_response_id"):
        if body.get(name) is not None and not isinstance(body[name], str):
            raise BadRequest(f"'{name}' must be a string", param=name, code="invalid_" + name)
    if body.get("conversation") is not None and thread_of(body) is None:
        raise BadRequest(
            "'conversation' must be a conversation id or an object with an 'id' string",
            param="conversation",
            code="invalid_conversation",
        )
    items = body.get("input")
    if items is None or isinstance(items, str):
        return body, located
    if not isinstance(items, list):
        raise BadRequest(
            "'input' must be a string or an array of items", param="input", code="invalid_input"
        )
    if len(items) > max_items:
        raise BadRequest(f"'input' has more than {max_items} items", param="input")
    for index, item in enumerate(items):
        _check_item(item, f"input[{index}]")
    return body, located


def _check_item(item: Any, where: str) -> None:
    def bad(what: str) -> BadRequest:
        return BadRequest(f"{where} {what}", param=where, code="invalid_input_item")

    if not isinstance(item, dict):
        raise bad("must be an object")
    kind = _kind(item)
    if kind == "message":
        if item.get("role") not in ROLES:
            raise bad("must have a 'role': one of " + ", ".join(ROLES))
        content = item.get("content")
        if not isinstance(content, (str, list)):
            raise bad("must have a 'content' string or array")
        if isinstance(content, list) and not all(isinstance(p, dict) for p in content):
            raise bad("content parts must be objects")
    elif kind == "function_call":
        if not all(isinstance(item.get(k), str) for k in ("call_id", "name", "arguments")):
            raise bad("(function_call) must have 'call_id', 'name' and 'arguments' strings")
    elif kind == "function_call_output":
        if not isinstance(item.get("call_id"), str):
            raise bad("(function_call_output) must have a 'call_id' string")
        if not isinstance(item.get("output"), (str, list)):
            raise bad("(function_call_output) must have an 'output' string or array")
    elif not isinstance(kind, str):
        raise bad("'type' must be a string")


def _kind(item: Mapping[str, Any]) -> Any:
    """An item's `type`; when it has none (or null), "message" (the SDK's EasyInputMessage),
    or "item_reference" for an item with an `id` and no `role` (OpenAI's `ItemReference`
    takes an optional `type`)."""
    kind = item.get("type")
    if kind is not None:
        return kind
    return "item_reference" if "role" not in item and "id" in item else "message"


def thread_of(body: Mapping[str, Any]) -> str | None:
    """The id of the provider's conversation the request belongs to (`conversation`), if any."""
    thread = body.get("conversation")
    if isinstance(thread, Mapping):
        thread = thread.get("id")
    return thread if isinstance(thread, str) and thread else None


def conversation_messages(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The request as chat messages: instructions first, then its input items."""
    messages: list[dict[str, Any]] = []
    instructions = body.get("instructions")
    if isinstance(instructions, str) and instructions:
        messages.append({"role": "system", "content": instructions})
    return messages + item_messages(input_items(body.get("input")))


def input_items(items: Any) -> list[dict[str, Any]]:
    """`input` as a list of items: a string is one user message; no input is none."""
    if isinstance(items, str):
        return [{"role": "user", "content": items}]
    return [item for item in items if isinstance(item, dict)] if isinstance(items, list) else []


def item_messages(items: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Items (of a request's input or a response's output) as chat messages; items memory
    does not read, or that lack what it reads, are left out."""
    messages: list[dict[str, Any]] = []
    joinable = False  # the last message is the assistant's, which a function call may join
    for item in items:
        kind = _kind(item)
        if not isinstance(kind, str):  # a provider's output is not checked as input is
            continue
        if kind == "message" and item.get("role") in ROLES:
            messages.append({"role": item["role"], "content": item.get("content")})
            joinable = item["role"] == "assistant"
        elif kind in _CALLS and isinstance(item.get("call_id"), str):
            call = _call(kind, item)
            if joinable:
                last = messages[-1]
                messages[-1] = {**last, "tool_calls": [*last.get("tool_calls", []), call]}
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
                joinable = True
        elif kind in _OUTPUTS and isinstance(item.get("call_id"), str):
            output = item.get("output")
            messages.append({"role": "tool", "tool_call_id": item["call_id"], "content": output})
            joinable = False
    return messages


# A call item's type → the chat tool call's type and the item's fields it holds.
_CALLS = {
    "function_call": ("function", ("name", "arguments")),
    "custom_tool_call": ("custom", ("name", "input")),
}
_OUTPUTS = frozenset({"function_call_output", "custom_tool_call_output"})


def _call(kind: str, item: Mapping[str, Any]) -> dict[str, Any]:
    """A call item as a chat tool call (id = its `call_id`)."""
    chat_type, fields = _CALLS[kind]
    return {"id": item["call_id"], "type": chat_type, chat_type: {f: item.get(f) for f in fields}}


def place_block(body: Mapping[str, Any], block: str, placement: Placement) -> dict[str, Any]:
    """A copy of the body with the block placed (see the module docstring)."""
    instructions = body.get("instructions")
    if placement == "system" and isinstance(instructions, str) and instructions:
        return {**body, "instructions": f"{block}\n\n{instructions}"}
    items = input_items(body.get("input"))
    if placement == "system":
        return {**body, "input": [{"role": "system", "content": block}, *items]}
    return {**body, "input": inject_block(items, block, "before_last_user")}


def block_edit(body: Mapping[str, Any], located: Located, block: str, placement: Placement) -> Edit:
    """`place_block`'s change as an edit of the client's text (`located`: where the body's
    values and, an array, `input`'s items lie): the one item written into `input`, else
    `instructions` or `input` (a string, or none) written again."""
    instructions = body.get("instructions")
    if placement == "system" and isinstance(instructions, str) and instructions:
        prefixed = json.dumps(f"{block}\n\n{instructions}", ensure_ascii=False)
        return located.value_edit("instructions", prefixed)
    items = located.items
    if items is None:  # a string input becomes a list: short, written whole
        written = json.dumps(place_block(body, block, placement)["input"], ensure_ascii=False)
        return located.value_edit("input", written)
    if placement == "system":
        index, item, replaces = 0, {"role": "system", "content": block}, False
    else:
        index, item, replaces = block_place(body["input"], block, "before_last_user")
    return items.item_edit(index, json.dumps(item, ensure_ascii=False), replaces)
