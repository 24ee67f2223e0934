"""The shapes of OpenAI's Responses API, for the fake provider's ``POST /v1/responses``.

``tests/upstream.py`` decides what the assistant says (the same script and model behaviours
as for chat) and serves it; this module builds it as the Responses API does:

- the JSON body is a ``response`` object: ``id`` ``resp_test_<n>``, ``status``, ``output``
  (a ``message`` item with one ``output_text`` part when there is text, then one
  ``function_call`` item per tool call), ``usage`` with ``input_tokens`` / ``output_tokens``
  (one token per 4 characters), and the request's ``instructions``, ``previous_response_id``,
  ``tools``, ``store`` and ``metadata`` echoed back;
- the stream is the real event sequence, each as ``event: <type>`` and ``data: <json>``
  with a growing ``sequence_number``: ``response.created``, ``response.in_progress``, then per
  item ``response.output_item.added``, for text ``response.content_part.added``,
  ``response.output_text.delta`` (8 characters each), ``response.output_text.done``,
  ``response.content_part.done``, for a call ``response.function_call_arguments.delta`` and
  ``.done``, then ``response.output_item.done``; last ``response.completed``. There is no
  ``[DONE]`` line in this API.

The reply to the request's last user message is ``"echo: "`` + its text, as for chat:
``input_text`` finds it in a string ``input`` or in the last ``message`` item with role user
(string content, or the ``text`` of its parts joined).

A request with ``background: true`` is answered at once (not streamed) with the response
``queued`` and no output, or with its events as any stream; ``GET /v1/responses/{id}`` then
polls it (``Background``): the first poll finds it ``in_progress``, every later one
``completed``, with its output; with ``?stream=true`` the poll is all its events again.
"""

import json
from typing import Any

CREATED = 1700000000
CHUNK_CHARS = 8


def input_text(body: dict[str, Any]) -> str:
    """The text of the request's last user message (a string input is one)."""
    items = body.get("input")
    if isinstance(items, str):
        return items
    for item in reversed(items if isinstance(items, list) else []):
        if isinstance(item, dict) and item.get("type", "message") == "message":
            if item.get("role") == "user":
                return _content_text(item.get("content"))
    return ""


def prompt_tokens(body: dict[str, Any]) -> int:
    """A fixed stand-in for the tokens the request's own text would cost."""
    text = str(body.get("instructions") or "") + json.dumps(body.get("input"))
    return _tokens(text)


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def _tokens(text: str) -> int:
    return (len(text) + 3) // 4


def _pieces(text: str) -> list[str]:
    return [text[i : i + CHUNK_CHARS] for i in range(0, len(text), CHUNK_CHARS)]


def output_items(number: int, content: str | None, calls: tuple[dict[str, str], ...]) -> list:
    """The response's output: a message item with the text, then a function_call per call."""
    items: list[dict[str, Any]] = []
    if content is not None:
        part = {"type": "output_text", "text": content, "annotations": []}
        items.append(
            {
                "id": f"msg_test_{number}",
                "type": "message",
                "status": "completed",
                "role": "assistant",
                "content": [part],
            }
        )
    for index, call in enumerate(calls):
        items.append(
            {
                "id": f"fc_test_{number}_{index}",
                "type": "function_call",
                "status": "completed",
                "call_id": call["id"],
                "name": call["name"],
                "arguments": call["arguments"],
            }
        )
    return items


def response_object(
    number: int, body: dict[str, Any], output: list[dict[str, Any]], status: str = "completed"
) -> dict[str, Any]:
    """The ``response`` object, as the JSON body and inside the created/completed events."""
    said = "".join(
        part.get("text", "") for item in output for part in item.get("content", [])
    ) + "".join(item.get("arguments", "") for item in output)
    prompt, completion = prompt_tokens(body), _tokens(said)
    usage = {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": completion,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": prompt + completion,
    }
    return {
        "id": f"resp_test_{number}",
        "object": "response",
        "created_at": CREATED,
        "status": status,
        "error": None,
        "incomplete_details": None,
        "instructions": body.get("instructions"),
        "max_output_tokens": body.get("max_output_tokens"),
        "model": str(body.get("model", "")),
        "output": output,
        "parallel_tool_calls": True,
        "previous_response_id": body.get("previous_response_id"),
        "reasoning": {"effort": None, "summary": None},
        "store": body.get("store", True),
        "temperature": 1.0,
        "text": {"format": {"type": "text"}},
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": body.get("tools", []),
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": usage if status == "completed" else None,
        "user": None,
        "metadata": body.get("metadata", {}),
    }


def response_events(number: int, body: dict[str, Any], output: list[dict[str, Any]]) -> list:
    """The whole stream as encoded SSE events, one per element, in the API's order."""
    events: list[dict[str, Any]] = []
    opened = response_object(number, body, [], status="in_progress")
    events.append({"type": "response.created", "response": opened})
    events.append({"type": "response.in_progress", "response": opened})
    for index, item in enumerate(output):
        events.extend(_item_events(index, item))
    events.append({"type": "response.completed", "response": response_object(number, body, output)})
    return [
        f"event: {e['type']}\ndata: {json.dumps({**e, 'sequence_number': n})}\n\n".encode()
        for n, e in enumerate(events)
    ]


def _item_events(index: int, item: dict[str, Any]) -> list[dict[str, Any]]:
    where = {"item_id": item["id"], "output_index": index}
    if item["type"] == "function_call":
        events = [_added(index, {**item, "status": "in_progress", "arguments": ""})]
        for piece in _pieces(item["arguments"]):
            delta = {"type": "response.function_call_arguments.delta", **where}
            events.append({**delta, "delta": piece})
        done = {"type": "response.function_call_arguments.done", **where}
        events.append({**done, "arguments": item["arguments"]})
    else:
        events = [_added(index, {**item, "status": "in_progress", "content": []})]
        text = item["content"][0]["text"]
        part = {**where, "content_index": 0}
        empty = {"type": "output_text", "text": "", "annotations": []}
        events.append({"type": "response.content_part.added", **part, "part": empty})
        for piece in _pieces(text):
            events.append({"type": "response.output_text.delta", **part, "delta": piece})
        events.append({"type": "response.output_text.done", **part, "text": text})
        events.append({"type": "response.content_part.done", **part, "part": item["content"][0]})
    events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    return events


def _added(index: int, item: dict[str, Any]) -> dict[str, Any]:
    return {"type": "response.output_item.added", "output_index": index, "item": item}


class Background:
    """Responses written "in the background": queued when asked, polled until completed."""

    def __init__(self) -> None:
        self._done: dict[str, dict[str, Any]] = {}
        self._events: dict[str, list[bytes]] = {}
        self._polls: dict[str, int] = {}

    def reset(self) -> None:
        self._done.clear()
        self._events.clear()
        self._polls.clear()

    def start(self, number: int, body: dict[str, Any], output: list[dict[str, Any]]) -> dict:
        """The answer to a request not streamed: the response queued; its output kept for the
        polls (a streamed one is kept as well, and answered with its events)."""
        done = response_object(number, body, output)
        self._done[done["id"]] = done
        self._events[done["id"]] = response_events(number, body, output)
        return response_object(number, body, [], status="queued")

    def events(self, response_id: str) -> list[bytes] | None:
        """`GET /v1/responses/{id}?stream=true`: the response's events, all of them."""
        return self._events.get(response_id)

    def poll(self, response_id: str) -> dict[str, Any] | None:
        """`GET /v1/responses/{id}`: in progress the first time, completed after; None when the
        id is not a background response."""
        done = self._done.get(response_id)
        if done is None:
            return None
        self._polls[response_id] = self._polls.get(response_id, 0) + 1
        if self._polls[response_id] == 1:
            return {**done, "status": "in_progress", "output": [], "usage": None}
        return done
