"""proxy/json_items.py: a chat body's messages located in its text by the one parse, and the
memory block's message written into that text, the client's bytes otherwise kept."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory import block_place, inject_block
from proxy import request_json

SPACES = st.sampled_from(["", " ", "\n", "\t ", "\r\n  "])
TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | TEXT
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=8,
)
MESSAGES = st.lists(
    st.fixed_dictionaries(
        {"role": st.sampled_from(["system", "developer", "user", "assistant", "tool"])},
        optional={
            "content": TEXT
            | st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": TEXT})),
            "x": VALUES,
        },
    ),
    min_size=1,
    max_size=5,
)


@st.composite
def written_with(draw, key, items, others=VALUES):
    """A body as some client writes it: its array `key` of `items`, other fields of `others`
    in any order, its own spacing and escapes. Returns its text and the array's items."""
    body = draw(st.dictionaries(TEXT.filter(lambda k: k != key), others, max_size=3))
    array = draw(items)
    at = draw(st.integers(0, len(body)))
    fields = [*list(body.items())[:at], (key, array), *list(body.items())[at:]]
    space, ascii_only = draw(SPACES), draw(st.booleans())
    return space + dumped(dict(fields), space, ascii_only) + space, array


def dumped(value, space, ascii_only):
    """`value` as JSON with `space` between its tokens."""
    if isinstance(value, dict):
        pairs = (
            f"{space}{dumped(k, space, ascii_only)}{space}:{space}{dumped(v, space, ascii_only)}"
            for k, v in value.items()
        )
        return "{" + ",".join(pairs) + space + "}"
    if isinstance(value, list):
        return "[" + ",".join(f"{space}{dumped(v, space, ascii_only)}" for v in value) + space + "]"
    return json.dumps(value, ensure_ascii=ascii_only)


def written():
    """A chat body as some client writes it, and its messages."""
    return written_with("messages", MESSAGES)


@given(written(), st.sampled_from(["before_last_user", "system"]), TEXT)
def test_the_body_parses_as_json_loads_reads_it_and_the_block_goes_in_its_text(
    case, placement, block
):
    text, messages = case
    raw = text.encode()
    body, located = request_json.loads_locating(raw, "messages")
    assert body == json.loads(raw)
    items = located.items
    assert items is not None
    assert [json.loads(items.text[a:b]) for a, b in items.spans] == body["messages"]
    index, message, replaces = block_place(messages, block, placement)
    placed = items.with_item(index, json.dumps(message, ensure_ascii=False), replaces)
    assert json.loads(placed) == {**body, "messages": inject_block(messages, block, placement)}
    # as chat places it: an ASCII body's own bytes copied around the message (`spliced`)
    item_edit = items.item_edit(index, json.dumps(message, ensure_ascii=False), replaces)
    assert located.edited(item_edit) == placed
    item = json.dumps(message, ensure_ascii=False)
    if replaces:  # the client's bytes, with the one message written again
        start, end = items.spans[index]
        assert placed.decode() == text[:start] + item + text[end:]
    elif index < len(messages):  # or with the one message added
        start = items.spans[index][0]
        assert placed.decode() == text[:start] + item + "," + text[start:]
    else:
        end = items.spans[-1][1]
        assert placed.decode() == text[:end] + "," + item + text[end:]


@pytest.mark.parametrize(
    "raw",
    [
        b'{"messages": [{"role": "user"},]}',
        b'{"messages": [{"role": "user"}] "model": "m"}',
        b'{"messages": [{"role": "user"}]} {}',
        b'{"messages": [{"role": "user", "content": NaN}]}',
        b'{"messages": [1e400]}',
        b'{"messages": ["\\ud800"]}',
        b'{"messages": [' + b"[" * 150 + b"]" * 150 + b"]}",
        b'{"messages": [}',
        b'{"a" 1, "messages": []}',
        b"\xff",
    ],
)
def test_what_is_not_json_is_refused_as_loads_refuses_it(raw):
    with pytest.raises(ValueError) as loads:
        request_json.loads(raw)
    with pytest.raises(ValueError) as locating:
        request_json.loads_locating(raw, "messages")
    assert str(locating.value) == str(loads.value)


@pytest.mark.parametrize(
    ("raw", "spans"),
    [
        (b'{"messages": [1], "messages": ["ab", 2]}', [(31, 35), (37, 38)]),  # the last wins
        (b'{"messages": [1], "messages": "no"}', None),
        (b'{"model": "m"}', None),
        (b'{"messages": []}', []),
        (b"[1, 2]", None),
        ('\ufeff{"messages": ["é"]}'.encode("utf-8"), [(14, 17)]),  # a BOM, as json.loads
        ('{"messages": ["é"]}'.encode("utf-16"), [(14, 17)]),
    ],
)
def test_the_messages_are_those_json_loads_keeps(raw, spans):
    value, located = request_json.loads_locating(raw, "messages")
    assert value == json.loads(raw)
    items = located.items if located is not None else None
    assert (None if items is None else list(items.spans)) == spans


def test_a_message_goes_in_an_empty_array_and_at_the_end():
    _, located = request_json.loads_locating(b'{"messages": [ ], "n": 1}', "messages")
    assert (
        located.items.with_item(0, '{"role":"system"}', False)
        == b'{"messages": [ {"role":"system"}], "n": 1}'
    )
    _, located = request_json.loads_locating(b'{"messages": [{"role":"tool"} ]}', "messages")
    assert located.items.with_item(1, "{}", False) == b'{"messages": [{"role":"tool"},{} ]}'
