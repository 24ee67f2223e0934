"""proxy/request_json.py: client JSON is parsed as usual, refused if not Unicode or too deep."""

import json

import pytest

from proxy import request_json


@pytest.mark.parametrize(
    "raw",
    [
        b'{"content": "\\ud800"}',
        b'{"content": "tail \\uDFFF"}',
        b'["ok", {"deep": ["\\udbff and nothing after"]}]',
        '{"content": "\\ud83d\\u0041"}',  # a high surrogate not followed by a low one
        '{"\\udc00": "a key too"}',
        # not escaped: the surrogate's own bytes (CESU-8 / WTF-8), which json.loads reads
        b'{"content": "a\xed\xa0\xbdb"}',
        b'{"content": "\xed\xb8\x80"}',
        # a body in UTF-16 or UTF-32 (json.loads reads them): escaped, or a lone code unit
        '{"content": "\\ud800"}'.encode("utf-16"),
        '{"content": "\\udfff"}'.encode("utf-32-le"),
        b'\x00{\x00"\x00a\x00"\x00:\x00"\xd8\x00\x00"\x00}',
    ],
)
def test_a_lone_surrogate_is_a_value_error(raw):
    with pytest.raises(ValueError, match="lone UTF-16 surrogate"):
        request_json.loads(raw)
    if isinstance(raw, bytes):  # as a chat body is read: the one parse that locates its items
        with pytest.raises(ValueError, match="lone UTF-16 surrogate"):
            request_json.loads_locating(raw, "messages")


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        (b'{"content": "\\ud83d\\ude00"}', {"content": "\U0001f600"}),
        ('{"content": "\\\\ud800 is only text"}', {"content": "\\ud800 is only text"}),
        ('["caf\\u00e9", 1, null]', ["café", 1, None]),
        ('["line\u2028separator"]', ["line\u2028separator"]),
        (
            '{"content": "\\ud83d\\ude00 \U0001f600"}'.encode("utf-16"),
            {"content": "\U0001f600 \U0001f600"},
        ),
        ('["\ud7ff\ue000 caf\u00e9"]'.encode(), ["\ud7ff\ue000 café"]),  # next to the surrogates
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
