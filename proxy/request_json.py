"""Client JSON at moim's edge: parsed with the standard library, refused if it is not Unicode.

JSON may escape a lone UTF-16 surrogate (`"\\ud800"`, half of a pair). `json.loads` then
returns a str that no UTF-8 encoder accepts, and every later step that hashes, journals or
stores the text would fail on it (RFC 8259 §8.2: such strings are not interoperable). moim
refuses such a body where it parses it, as it refuses malformed JSON: a `ValueError`, which
each caller turns into its 400.
"""

from __future__ import annotations

import json
import re
from typing import Any

# An escaped surrogate, high (D800-DBFF) or low (DC00-DFFF); valid pairs match too, so a match
# only means the parsed value must be checked.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89abcdefABCDEF]")
_SURROGATE_ESCAPE_BYTES = re.compile(rb"\\u[dD][89abcdefABCDEF]")


def loads(raw: bytes | str) -> Any:
    """`json.loads`, raising ValueError also when a string holds a lone surrogate."""
    value = json.loads(raw)
    # searched as it came (a chat body is bytes: no second decode of it on the request path)
    escaped = (
        _SURROGATE_ESCAPE.search(raw)
        if isinstance(raw, str)
        else _SURROGATE_ESCAPE_BYTES.search(raw)
    )
    if escaped:  # rare: only then is the whole value re-encoded
        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError("a string holds a lone UTF-16 surrogate") from None
    return value
