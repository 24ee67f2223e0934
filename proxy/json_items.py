"""Where each value of a request's JSON object lies in its text, so one can be written in.

moim places its memory block in a chat body as one message. Writing the whole body again
with `json.dumps` took ~4.7 ms at 487 kB (an agent's 127k-token history, docs/performance.md
"An agent's history"), on the request's path; writing the one message into the body's own
text takes a copy of it (~0.1 ms). The provider gets the same JSON (parsed, it is equal to
what `json.dumps` wrote), with the client's field order, unknown fields and spacing kept.

The same holds for the other values moim changes: a config alias's model name
(`proxy/exchange.py: renamed`), and the Responses API's `input` or `instructions` where its
block goes (`proxy/responses_body.py: block_edit`). Each change is an `Edit` of the client's
text; the body sent is that text with its edits, every other byte kept.

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
# The text from `start` to `end` becomes `new` (JSON text).
Edit = tuple[int, int, str]


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
        """The text as UTF-8 with `item` (JSON) in the array at `index` (`item_edit`)."""
        return edited(self.text, self.item_edit(index, item, replaces))

    def item_edit(self, index: int, item: str, replaces: bool) -> Edit:
        """`item` (JSON) in the array at `index`: in place of the item there (`replaces`), or
        before it (at the end when `index` is the array's length)."""
        if replaces:
            start, end = self.spans[index]
            return start, end, item
        if index < len(self.spans):
            start = self.spans[index][0]
            return start, start, item + ","
        end = self.spans[-1][1] if self.spans else self.close
        return end, end, ("," if self.spans else "") + item


@dataclass(frozen=True, slots=True)
class Located:
    """A JSON object's text and where its top-level values lie in it: `values` each name's
    value (start, end), the last of a repeated name (the one `json.loads` keeps); `close` the
    object's closing brace; `items` where the items of the array asked for lie, if it is one."""

    text: str
    values: dict[str, tuple[int, int]]
    close: int
    items: Items | None = None
    ascii_bytes: bytes | None = None  # the body's bytes, when each of `text`'s characters is one

    def value_edit(self, name: str, value: str) -> Edit:
        """`value` (JSON) as the top-level `name`'s: in place of its value, or added last."""
        if name in self.values:
            start, end = self.values[name]
            return start, end, value
        comma = "," if self.values else ""
        return self.close, self.close, f"{comma}{json.dumps(name, ensure_ascii=False)}:{value}"

    def edited(self, *edits: Edit | None) -> bytes:
        """The text as UTF-8 with `edits` (none overlapping; None: no edit). An ASCII body's
        own bytes are copied around them, once (`spliced`)."""
        if self.ascii_bytes is not None:
            return spliced(self.ascii_bytes, *edits)
        return edited(self.text, *edits)


def edited(text: str, *edits: Edit | None) -> bytes:
    """`text` as UTF-8 with `edits` made (none overlapping; None: no edit).

    Each piece is encoded apart, then the bytes joined: a slice holds the narrowest kind of
    str for its characters, so the client's ASCII text is copied as it is. Joined first, one
    "•" or "—" of the block made the whole body a two-byte str, encoded to UTF-8 character by
    character: 0.28 ms for an agent's 487 kB (0.85 in a request, beside the other threads)
    against 0.03."""
    pieces: list[bytes] = []
    at = 0
    for start, end, new in sorted(edit for edit in edits if edit is not None):
        pieces += (text[at:start].encode(), new.encode())
        at = end
    pieces.append(text[at:].encode())
    return b"".join(pieces)


def spliced(raw: bytes, *edits: Edit | None) -> bytes:
    """`edited` for a text whose characters are `raw`'s bytes (ASCII): the bytes between the
    edits joined as views of `raw`, one copy of them in all (an agent's 487 kB body with a
    block: 0.07 ms against 0.17 encoding its pieces, the caches cold)."""
    view, pieces, at = memoryview(raw), list[bytes | memoryview](), 0
    for start, end, new in sorted(edit for edit in edits if edit is not None):
        pieces += (view[at:start], new.encode())
        at = end
    pieces.append(view[at:])
    return b"".join(pieces)


def locate(raw: bytes, key: str | None, scan: Scan) -> tuple[dict[str, Any], Located] | None:
    """The JSON object in `raw`, and where its values lie in its text, with the items of its
    array `key` (`Located.items`: None when `key` is not an array); None when `raw` is
    anything else, or not JSON (the caller then parses it as usual, which says why). `scan`
    reads one value, as a `JSONDecoder`'s `scan_once`."""
    text = raw.decode(json.detect_encoding(raw), "surrogatepass")  # as json.loads decodes
    # as many characters as bytes: UTF-8 (no BOM) of ASCII alone, each at its byte's index
    ascii_bytes = raw if len(text) == len(raw) else None
    at = _space(text, 0)
    if text[at : at + 1] != "{":
        return None
    value: dict[str, Any] = {}
    values: dict[str, tuple[int, int]] = {}
    items = None
    at = _space(text, at + 1)
    if text[at : at + 1] == "}":
        whole = _space(text, at + 1) == len(text)
        return (value, Located(text, values, at, None, ascii_bytes)) if whole else None
    while True:
        if text[at : at + 1] != '"':
            return None
        name, at = scanstring(text, at + 1, True)
        at = _space(text, at)
        if text[at : at + 1] != ":":
            return None
        at = _space(text, at + 1)
        start = at
        if name == key and text[at : at + 1] == "[":
            value[name], at, spans, close = _array(text, at, scan)
            items = Items(text, start, spans, close)
        else:
            value[name], at = scan(text, at)
            if name == key:  # a later `key` that is not an array wins, as in json.loads
                items = None
        values[name] = (start, at)  # a repeated name: its last value, as json.loads keeps
        at = _space(text, at)
        if text[at : at + 1] == "}":
            break
        if text[at : at + 1] != ",":
            return None
        at = _space(text, at + 1)
    whole = _space(text, at + 1) == len(text)
    return (value, Located(text, values, at, items, ascii_bytes)) if whole else None


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
