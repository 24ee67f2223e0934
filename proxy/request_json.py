"""Client JSON at moim's edge: parsed with the standard library, refused if moim cannot use it.

What `json.loads` reads but moim cannot use is refused where it is parsed, as malformed JSON
is: a `ValueError`, which each caller turns into its 400 with the reason.

- A lone UTF-16 surrogate (`"\\ud800"`, half of a pair). `json.loads` returns a str that no
  UTF-8 encoder accepts, and every later step that hashes, journals or stores the text would
  fail on it (RFC 8259 §8.2: such strings are not interoperable).
- Nesting deeper than `MAX_DEPTH` arrays and objects. Around 1,000 levels `json.loads`
  itself raises RecursionError; short of that, every later step that walks the value
  (`json.dumps` of the body sent on, of the journal line, litellm's copies) recurses once or
  more per level, and fails the same way further on. No OpenAI request nests anywhere near
  100 levels (structured outputs allow 10 in a schema).
- A number with no finite value: `NaN`, `Infinity`, `-Infinity` (not JSON at all, RFC 8259
  §6, though `json.loads` reads them) and a number too large for a double (`1e400`, read as
  inf). moim writes the body again when it adds the memory block, and `json.dumps` writes
  them as `NaN` / `Infinity`: the provider was sent a body that is not JSON, a `1e400` the
  client sent became one.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from proxy.json_items import Located, Scan, locate

MAX_DEPTH = 100
# An escaped surrogate, high (D800-DBFF) or low (DC00-DFFF); valid pairs match too, so a match
# only means the parsed value must be checked.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89abcdefABCDEF]")
_SURROGATE_ESCAPE_BYTES = re.compile(rb"\\u[dD][89abcdefABCDEF]")
# A surrogate's own bytes in UTF-8 (ED A0-BF: CESU-8 / WTF-8, not UTF-8), which `json.loads`
# decodes as it finds them ("surrogatepass"). Searched only where an ED byte is (a C scan):
# one pattern of both took 5 ms on a 730 kB body, against 0.55 for the escape's alone.
_SURROGATE_BYTES = re.compile(rb"\xed[\xa0-\xbf]")
_TOO_DEEP = f"JSON nested deeper than {MAX_DEPTH} levels"


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"the number {text[:40]} is too large")
    return value


# What `loads` parses with, reading one value at a time (`loads_locating`).
_DECODER = json.JSONDecoder(parse_constant=_no_constant, parse_float=_finite)
_SCAN: Scan = _DECODER.scan_once  # type: ignore[attr-defined]  # set by __init__, untyped


def loads(raw: bytes | str) -> Any:
    """`json.loads`, raising ValueError also for a lone surrogate, too deep a nesting or a
    number with no finite value."""
    try:
        value = json.loads(raw, parse_constant=_no_constant, parse_float=_finite)
    except RecursionError:
        raise ValueError(_TOO_DEEP) from None
    return _checked(raw, value)


def loads_locating(raw: bytes, key: str | None = None) -> tuple[Any, Located | None]:
    """`loads`, with where each value of the object lies in its text, and each item of its
    array `key` (`proxy/json_items.py`: the body's text with a value written in), from the
    same parse; None for a body that is no object."""
    try:
        found = locate(raw, key, _SCAN)
    except (ValueError, StopIteration, RecursionError):  # not JSON: `loads` says why
        found = None
    if found is None:
        return loads(raw), None
    value, located = found
    return _checked(raw, value), located


def _checked(raw: bytes | str, value: Any) -> Any:
    """`value` parsed from `raw`, unless it nests too deep or holds a lone surrogate."""
    # Fewer brackets than the limit cannot nest past it (a C count, no walk, for most bodies).
    if (
        _brackets(raw) > MAX_DEPTH
        and isinstance(value, (dict, list))
        and _depth_over(value, MAX_DEPTH)
    ):
        raise ValueError(_TOO_DEEP)
    # searched as it came (a chat body is bytes: no second decode of it on the request path);
    # a UTF-16 or UTF-32 body (rare) is checked whole, as neither search reads its bytes
    escaped = (
        _SURROGATE_ESCAPE.search(raw)
        if isinstance(raw, str)
        else _SURROGATE_ESCAPE_BYTES.search(raw)
        or (b"\xed" in raw and _SURROGATE_BYTES.search(raw))
        or not _utf8(raw)
    )
    if escaped:  # rare: only then is the whole value re-encoded
        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError("a string holds a lone UTF-16 surrogate") from None
    return value


def _utf8(raw: bytes) -> bool:
    """Whether `json.loads` reads `raw` as UTF-8 (with or without a BOM): its first bytes."""
    return json.detect_encoding(raw).startswith("utf-8")


def _brackets(raw: bytes | str) -> int:
    if isinstance(raw, str):
        return raw.count("[") + raw.count("{")
    return raw.count(b"[") + raw.count(b"{")


def _depth_over(value: Any, limit: int) -> bool:
    """Whether arrays and objects nest more than `limit` deep: a walk one level at a time, not
    a recursion (a 600 kB body of 10,000 messages: 20 ms, about what parsing it took)."""
    level = [value]
    for _ in range(limit):
        deeper = []
        for item in level:
            for child in item.values() if isinstance(item, dict) else item:
                if isinstance(child, (dict, list)):
                    deeper.append(child)
        if not deeper:
            return False
        level = deeper
    return True
