"""Whether a line of an export is one moim can import: `moim memory import`, `POST …/import`.

An import checks every item before it stores any, so a hand-edited or damaged file is refused
whole, with the line that is wrong, instead of leaving the part before it stored. Messages need
the fields `memory/store/transfer.py` writes, with their types; facts what
`memory/facts/rules.py` checks when it restores them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memory.facts.restore import checked_fact_row

# 9999-12-31: a later `created_at` is no date any tool can show.
MAX_TIMESTAMP = 253_402_300_800.0
_TEXT_FIELDS = ("session_id", "message_key", "content_hash", "role", "content")
_OPTIONAL = {
    "id": int,
    "name": str,
    "model": str,
    "tokens": int,
    "partial": bool,
    "left": bool,  # memory/store/left_messages.py
}


def item_problem(item: Any) -> str | None:
    """Why `item` (one parsed line) is not an exported message or fact; None when it is one."""
    if not isinstance(item, Mapping):
        return "not a JSON object"
    if "type" not in item and "content" not in item:  # '{"x": 1}': no kind of item at all
        return "neither a message nor a fact (no 'type', no 'content')"
    kind = item.get("type", "message")
    if kind == "message":
        return _message_problem(item)
    if kind == "fact":
        return _fact_problem(item)
    return f"unknown type {kind!r} (an export has only 'message' and 'fact')"


def _message_problem(item: Mapping[str, Any]) -> str | None:
    for name in _TEXT_FIELDS:
        if not isinstance(item.get(name), str):
            return f"message: '{name}' must be a string"
    created = item.get("created_at")
    if not isinstance(created, int | float) or isinstance(created, bool):
        return "message: 'created_at' must be a number (Unix seconds)"
    if not 0 <= created < MAX_TIMESTAMP:
        return "message: 'created_at' is out of range"
    for name, kind in _OPTIONAL.items():
        value = item.get(name)
        if value is not None and (
            not isinstance(value, kind) or (kind is int and isinstance(value, bool))
        ):
            return f"message: '{name}' must be {kind.__name__} or null"
    # SQLite stores 64-bit integers: a larger one would fail in the store, midway
    for name, low in (("id", 1), ("tokens", 0)):
        value = item.get(name)
        if isinstance(value, int) and not low <= value < 2**62:
            return f"message: '{name}' is out of range"
    return None


def _fact_problem(item: Mapping[str, Any]) -> str | None:
    if not isinstance(item.get("key"), str):
        return "fact: 'key' must be a string"
    try:
        checked_fact_row(item)
    except (KeyError, ValueError, TypeError) as exc:
        detail = f"'{exc.args[0]}' is missing" if isinstance(exc, KeyError) else str(exc)
        return f"fact {item['key']!r}: {detail}"
    return None
