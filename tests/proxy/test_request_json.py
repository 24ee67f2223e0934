"""proxy/request_json.py: client JSON is parsed as usual, and refused if it is not Unicode."""

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
