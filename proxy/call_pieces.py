"""Which tool call of a streamed reply each tool-call piece belongs to.

A call's pieces share its `index`, as OpenAI numbers them. Some OpenAI-compatible servers give
every call of a reply index 0 (Ollama) or none (Gemini): a piece bearing an id other than its
index's call's begins a new call, and a piece without an index goes on the last. The reply's
collector (`proxy/streaming.py`) and the memory-tool loop's filter (`proxy/round_filter.py`)
both read pieces by this one rule, so what moim stores and what it runs are the same calls.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class CallPieces:
    """Numbers a streamed reply's calls 0, 1, 2, … in the order they begin."""

    def __init__(self) -> None:
        self._ids: list[Any] = []  # each call's id, once a piece has given it
        self._by_index: dict[int, int] = {}  # a piece's `index` -> the call it last went on

    def call_of(self, piece: Mapping[str, Any]) -> tuple[int, bool]:
        """(the number of the call this piece belongs to, whether it begins that call)."""
        index = piece.get("index") if isinstance(piece.get("index"), int) else None
        new_id = piece.get("id") or None
        if index is not None:
            call = self._by_index.get(index)
        else:
            call = len(self._ids) - 1 if self._ids else None
        if call is not None and new_id is not None and self._ids[call] not in (None, new_id):
            call = None  # another call under the same index (or none)
        begins = call is None
        if call is None:
            self._ids.append(None)
            call = len(self._ids) - 1
        if index is not None:
            self._by_index[index] = call
        if new_id is not None:
            self._ids[call] = new_id
        return call, begins
