"""One streamed round of the memory tool loop (`proxy/tool_loop.py`), as the loop reads it.

`sse_events` cuts the provider's bytes into whole server-sent events; `RoundFilter` reads each
one, gathers moim's tool calls (their deltas merged) and hides them from the client, renumbering
the client's own calls from index 0; `is_done` tells the stream's `[DONE]`. Which call a
piece is of is read as the reply's collector reads it (`CallPieces`): with Ollama's numbering
(every call index 0) or Gemini's (none), a client's call and moim's stay apart.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from proxy.call_pieces import CallPieces
from proxy.tools import NAMES


async def sse_events(source: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """Whole server-sent events (`\\r\\n` read as `\\n`), each ending in a blank line.

    What is buffered is joined and split only when a piece brings a newline (an event ends
    only at one), so a long line in many pieces is copied once, not once a piece."""
    pending: list[bytes] = []
    async for data in source:
        pending.append(data)
        if b"\n" not in data:
            continue
        *events, rest = b"".join(pending).replace(b"\r\n", b"\n").split(b"\n\n")
        pending = [rest]
        for event in events:
            if event.strip():
                yield event + b"\n\n"
    buffer = b"".join(pending).replace(b"\r\n", b"\n")
    if buffer.strip():
        yield buffer.rstrip(b"\n") + b"\n\n"


def is_done(event: bytes) -> bool:
    return any(
        line.startswith(b"data:") and line[5:].strip() == b"[DONE]" for line in event.split(b"\n")
    )


class RoundFilter:
    """Reads one streamed round: gathers moim's calls and hides them from the client.

    `spoke` turns True once the round shows content or a client tool call: from then on it
    is the client's turn, whatever else it holds.
    """

    def __init__(self) -> None:
        self.spoke = False
        self._pieces = CallPieces()  # which call of the round a piece is of
        self._mine: dict[int, dict[str, Any]] = {}  # call -> merged call
        self._theirs: dict[int, int] = {}  # call -> index shown to the client
        self._taken = False

    def calls(self) -> list[dict[str, Any]]:
        return [self._mine[i] for i in sorted(self._mine)]

    def take_calls(self) -> list[dict[str, Any]]:
        """moim's calls, once: later calls return nothing."""
        calls, self._taken = ([] if self._taken else self.calls()), True
        return calls

    def filter(self, event: bytes) -> bytes | None:
        """The event as the client should see it; None when nothing of it is left."""
        lines = event.rstrip(b"\n").split(b"\n")
        data = [line for line in lines if line.startswith(b"data:")]
        try:
            chunk = json.loads(data[0][5:]) if len(data) == 1 else None
        except ValueError:
            chunk = None
        if not isinstance(chunk, dict) or not isinstance(chunk.get("choices"), list):
            return event
        changed, keep = False, True
        for choice in chunk["choices"]:
            if isinstance(choice, dict) and choice.get("index", 0) == 0:
                changed, keep = self._choice(choice)
        if not changed:
            return event
        if not keep and chunk.get("usage") is None and len(chunk["choices"]) == 1:
            return None
        rest = [line for line in lines if not line.startswith(b"data:")]
        encoded = json.dumps(chunk, ensure_ascii=False).encode()
        return b"\n".join([*rest, b"data: " + encoded]) + b"\n\n"

    def _choice(self, choice: dict[str, Any]) -> tuple[bool, bool]:
        """Filter choice 0 in place; (changed, anything left to show)."""
        delta = choice.get("delta")
        if not isinstance(delta, dict):
            return False, True
        if isinstance(delta.get("content"), str) and delta["content"]:
            self.spoke = True
        changed = False
        calls = delta.get("tool_calls")
        if isinstance(calls, list):
            shown = [c for c in (self._call(c) for c in calls if isinstance(c, dict)) if c]
            changed = shown != calls
            if shown:
                delta["tool_calls"] = shown
            else:
                del delta["tool_calls"]
        if choice.get("finish_reason") == "tool_calls" and not self._theirs:
            choice["finish_reason"], changed = "stop", True
        left = any(v is not None for v in delta.values()) or choice.get("finish_reason")
        return changed, bool(left) or choice.get("logprobs") is not None

    def _call(self, delta: dict[str, Any]) -> dict[str, Any] | None:
        """One tool-call delta: merged into moim's call, or renumbered for the client."""
        number, begins = self._pieces.call_of(delta)
        function: dict[str, Any] = delta.get("function") or {}
        if not isinstance(function, dict):
            function = {}
        if begins:
            if function.get("name") in NAMES:
                self._mine[number] = {
                    "id": None,
                    "function": {"name": function["name"], "arguments": ""},
                }
            else:
                self._theirs[number] = len(self._theirs)
                self.spoke = True
        if number in self._theirs:
            return {**delta, "index": self._theirs[number]}
        call = self._mine[number]
        call["id"] = delta.get("id") or call["id"]
        call["function"]["arguments"] += function.get("arguments") or ""
        return None
