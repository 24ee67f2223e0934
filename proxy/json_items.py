"""Where each item of a request's array lies in its JSON text, so one item can be written in.

moim places its memory block in a chat body as one message. Writing the whole body again
with `json.dumps` took ~4.7 ms at 487 kB (an agent's 127k-token history, docs/performance.md
"An agent's history"), on the request's path; writing the one message into the body's own
text takes a copy of it (~0.1 ms). The provider gets the same JSON (parsed, it is equal to
what `json.dumps` wrote), with the client's field order, unknown fields and spacing kept.

The spans come from the one parse of the body (`request_json.loads_locating`): the object's
top level is walked here, each value read by the standard library's C scanner, as
`json.loads` reads it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from json.decoder import WHITESPACE, scanstring  # type: ignore[attr-defined]
from typing import Any

Scan = Callable[[str, int], tuple[Any, int]]


@dataclass(frozen=True, slots=True)
class Items:
    """A JSON object's text, and where one of its top-level arrays lies in it: `start` its
    opening bracket, `spans` each item's (start, end), `close` its closing bracket."""

    text: str
    start: int
    spans: tuple[tuple[int, int], ...]
    close: int

    def array(self) -> str:
        """The array's JSON text on one line: its line breaks, which JSON has only between
        tokens (a string holds its own escaped), made spaces (`memory.Turn.messages_json`)."""
        return self.text[self.start : self.close + 1].replace("\n", " ")

    def with_item(self, index: int, item: str, replaces: bool) -> bytes:
        """The text as UTF-8 with `item` (JSON) in the array at `index`: in place of the item
        there (`replaces`), or before it (at the end when `index` is the array's length)."""
        text = self.text
        if replaces:
            start, end = self.spans[index]
            return (text[:start] + item + text[end:]).encode()
        if index < len(self.spans):
            start = self.spans[index][0]
            return (text[:start] + item + "," + text[start:]).encode()
        end = self.spans[-1][1] if self.spans else self.close
        comma = "," if self.spans else ""
        return (text[:end] + comma + item + text[end:]).encode()


def locate(raw: bytes, key: str, scan: Scan) -> tuple[dict[str, Any], Items | None] | None:
    """The JSON object in `raw`, and where the items of its array `key` lie (None when `key`
    is not an array); None when `raw` is anything else, or not JSON (the caller then parses
    it as usual, which says why). `scan` reads one value, as a `JSONDecoder`'s `scan_once`."""
    text = raw.decode(json.detect_encoding(raw), "surrogatepass")  # as json.loads decodes
    at = _space(text, 0)
    if text[at : at + 1] != "{":
        return None
    value: dict[str, Any] = {}
    items = None
    at = _space(text, at + 1)
    if text[at : at + 1] == "}":
        return (value, None) if _space(text, at + 1) == len(text) else None
    while True:
        if text[at : at + 1] != '"':
            return None
        name, at = scanstring(text, at + 1, True)
        at = _space(text, at)
        if text[at : at + 1] != ":":
            return None
        at = _space(text, at + 1)
        if name == key and text[at : at + 1] == "[":
            start = at
            value[name], at, spans, close = _array(text, at, scan)
            items = Items(text, start, spans, close)
        else:
            value[name], at = scan(text, at)
            if name == key:  # a later `key` that is not an array wins, as in json.loads
                items = None
        at = _space(text, at)
        if text[at : at + 1] == "}":
            break
        if text[at : at + 1] != ",":
            return None
        at = _space(text, at + 1)
    return (value, items) if _space(text, at + 1) == len(text) else None


_SPACE = " \t\n\r"  # JSON's whitespace (RFC 8259 §2)


def _array(
    text: str, at: int, scan: Scan
) -> tuple[list[Any], int, tuple[tuple[int, int], ...], int]:
    """The array starting at `at` (its `[`): its items, the index after it, each item's
    span and its `]`'s index. Raises StopIteration or ValueError where it is not JSON. (One
    call of the C scanner an item and few others: ~2 µs a message over `json.loads`.)"""
    items: list[Any] = []
    spans: list[tuple[int, int]] = []
    add_item, add_span, space = items.append, spans.append, WHITESPACE.match
    at = space(text, at + 1).end()
    if text[at : at + 1] == "]":
        return items, at + 1, (), at
    while True:
        item, end = scan(text, at)
        add_item(item)
        add_span((at, end))
        after = text[end : end + 1]
        if after in _SPACE:  # at the end of the text too ("" is in any str): not JSON below
            end = space(text, end).end()
            after = text[end : end + 1]
        if after == "]":
            return items, end + 1, tuple(spans), end
        if after != ",":
            raise ValueError("expected ',' or ']'")
        at = end + 1
        if text[at : at + 1] in _SPACE:
            at = space(text, at).end()


def _space(text: str, at: int) -> int:
    """The index of the first character at or after `at` that is not JSON whitespace."""
    return int(WHITESPACE.match(text, at).end())
