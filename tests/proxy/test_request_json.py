"""proxy/request_json.py: client JSON is parsed as usual, refused if not Unicode or too deep."""

import json
from unittest.mock import patch

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy import request_json
from proxy.request_json import _SURROGATE_ESCAPE_BYTES


@pytest.mark.parametrize(
    "raw",
    [
        b'{"content": "\\ud800"}',
        b'{"content": "tail \\uDFFF"}',
        b'["ok", {"deep": ["\\udbff and nothing after"]}]',
        '{"content": "\\ud83d\\u0041"}',  # a high surrogate not followed by a low one
        '{"\\udc00": "a key too"}',
    ],
)
def test_a_lone_surrogate_is_a_value_error(raw):
    with pytest.raises(ValueError, match="lone UTF-16 surrogate"):
        request_json.loads(raw)


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        (b'{"content": "\\ud83d\\ude00"}', {"content": "\U0001f600"}),
        ('{"content": "\\\\ud800 is only text"}', {"content": "\\ud800 is only text"}),
        ('["caf\\u00e9", 1, null]', ["café", 1, None]),
        ('["line\u2028separator"]', ["line\u2028separator"]),
    ],
)
def test_everything_else_parses_as_json_loads_does(raw, value):
    assert request_json.loads(raw) == value


def test_malformed_json_is_still_a_value_error():
    with pytest.raises(ValueError):
        request_json.loads(b'{"content": ')


def nested(depth, opening="["):
    closing = "]" if opening == "[" else "}"
    return opening * depth + "1" + closing * depth


@pytest.mark.parametrize("depth", [101, 990, 100_000])
@pytest.mark.parametrize("opening", ["[", '{"a":'])
def test_json_nested_past_100_levels_is_a_value_error(depth, opening):
    for raw in (nested(depth, opening), nested(depth, opening).encode()):
        with pytest.raises(ValueError, match="nested deeper than 100 levels"):
            request_json.loads(raw)


def test_100_levels_parse_and_brackets_in_strings_do_not_count():
    assert request_json.loads(nested(100)) == json.loads(nested(100))
    brackets = json.dumps({"text": "[" * 500 + "{" * 500, "list": [[1]] * 200})
    assert request_json.loads(brackets.encode()) == json.loads(brackets)


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b'{"temperature": NaN}', "NaN is not a JSON number"),
        (b'{"temperature": Infinity}', "Infinity is not a JSON number"),
        (b'{"logit_bias": {"50256": -Infinity}}', "-Infinity is not a JSON number"),
        (b'{"temperature": 1e400}', "the number 1e400 is too large"),
        (b'{"seed": -' + b"9" * 400 + b".0}", "is too large"),
    ],
)
def test_a_number_with_no_finite_value_is_a_value_error(raw, reason):
    """`json.dumps` writes them back as `NaN` / `Infinity`, which no JSON parser reads."""
    with pytest.raises(ValueError, match=reason):
        request_json.loads(raw)


def test_finite_numbers_parse_as_json_loads_does():
    raw = b'{"temperature": 0.7, "top_p": 1e-300, "seed": 123456789012345678901234567890}'
    assert request_json.loads(raw) == json.loads(raw)


# A body of 16 kB or more is searched as an array (`_array_marks`), a smaller one as bytes.
LARGE = " " * 16_384


@pytest.mark.parametrize("pad", ["", LARGE])
def test_a_large_body_is_refused_and_read_as_a_small_one(pad):
    with pytest.raises(ValueError, match="lone UTF-16 surrogate"):
        request_json.loads(f'{{"content": "\\ud800"}}{pad}'.encode())
    with pytest.raises(ValueError, match="lone UTF-16 surrogate"):
        request_json.loads(f'{pad}{{"content": "tail \\uDFFF"}}'.encode())
    with pytest.raises(ValueError, match="nested deeper than 100 levels"):
        request_json.loads((pad + nested(101)).encode())
    pair = f'{pad}{{"content": "\\ud83d\\ude00", "s": "\\\\ud800", "x": [[1]]}}'.encode()
    assert request_json.loads(pair) == json.loads(pair)


ALPHABET = st.sampled_from(
    [b"[", b"{", b"\\", b"\\u", b"\\ud", b"\\uD8", b"\\udf", b"\\ud7", b"u", b"D", b"8", b"x"]
)


@settings(max_examples=300)
@given(st.lists(ALPHABET, max_size=24).map(b"".join), st.integers(1, 9))
def test_the_array_search_finds_what_the_bytes_search_finds(tail, block):
    """At a block's end too: each block's escapes are read past it."""
    raw = b"x" * 16_384 + tail
    searched = (raw.count(b"[") + raw.count(b"{"), bool(_SURROGATE_ESCAPE_BYTES.search(raw)))
    assert request_json._array_marks(raw) == searched
    with patch.object(request_json, "_BLOCK", block):
        assert request_json._array_marks(tail) == request_json._marks(tail)
