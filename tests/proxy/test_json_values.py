"""proxy/json_items.py's `Located`: the values moim changes beside chat's block message (a
config alias's model name, the Responses API's `input` or `instructions` where its block goes,
the memory-tool loop's tools and rounds) written into the client's text, every other byte
kept, the JSON what the whole body written again would be."""

import json

from hypothesis import given
from hypothesis import strategies as st

from proxy import request_json
from proxy.exchange import model_edit, renamed
from proxy.responses_body import block_edit, place_block
from proxy.tools import NAMES, SCHEMAS, memory_tools_edit
from tests.proxy.test_json_items import MESSAGES, SPACES, TEXT, VALUES, dumped, written_with

MODEL = st.sampled_from(["gpt-4o-mini", "claude-sonnet", "modèle/é", "a\u2028b", 'q"uote'])
ITEMS = st.lists(
    st.fixed_dictionaries(
        {"role": st.sampled_from(["user", "assistant", "system", "developer"]), "content": TEXT},
        optional={"type": st.just("message"), "x": VALUES},
    )
    | st.fixed_dictionaries(
        {
            "type": st.just("function_call"),
            "call_id": TEXT,
            "name": TEXT,
            "arguments": TEXT,
        }
    ),
    max_size=5,
)
ABSENT = object()


@given(written_with("model", MODEL), MODEL)
def test_a_model_renamed_is_written_in_the_clients_text(case, model):
    text, named = case
    raw = text.encode()
    body, located = request_json.loads_locating(raw)

    sent = renamed(raw, located, body, model)

    assert json.loads(sent) == {**body, "model": model}
    if model == named:
        assert sent is raw
    else:
        start, end = located.values["model"]
        assert sent.decode() == text[:start] + json.dumps(model, ensure_ascii=False) + text[end:]


def test_a_repeated_model_is_renamed_where_json_loads_reads_it():
    raw = b'{"model": "a", "input": [1], "model" : "b" }'
    body, located = request_json.loads_locating(raw)

    assert renamed(raw, located, body, "c") == b'{"model": "a", "input": [1], "model" : "c" }'


@st.composite
def responses_bodies(draw):
    """A Responses API body as some client writes it: `model`, maybe `instructions`, an
    `input` that is absent, null, a string or items, other fields, in any order."""
    names = TEXT.filter(lambda k: k not in ("model", "instructions", "input"))
    fields = draw(st.dictionaries(names, VALUES, max_size=2))
    fields["model"] = draw(MODEL)
    if draw(st.booleans()):
        fields["instructions"] = draw(TEXT)
    given_input = draw(st.just(ABSENT) | st.none() | TEXT | ITEMS)
    if given_input is not ABSENT:
        fields["input"] = given_input
    order = draw(st.permutations(list(fields)))
    space, ascii_only = draw(SPACES), draw(st.booleans())
    return space + dumped({name: fields[name] for name in order}, space, ascii_only) + space


@given(responses_bodies(), st.sampled_from(["before_last_user", "system"]), TEXT, MODEL)
def test_the_responses_block_goes_in_the_clients_text_as_place_block_places_it(
    text, placement, block, model
):
    raw = text.encode()
    body, located = request_json.loads_locating(raw, "input")
    edit = block_edit(body, located, block, placement)

    placed = located.edited(edit)
    sent = located.edited(edit, model_edit(located, body, model))

    assert json.loads(placed) == place_block(body, block, placement)
    start, end, new = edit
    assert placed.decode() == text[:start] + new + text[end:]  # the rest is the client's
    assert json.loads(sent) == {**place_block(body, block, placement), "model": model}


@st.composite
def chat_bodies(draw):
    """A chat body as some client writes it, its `tools` absent, a list or anything else."""
    names = TEXT.filter(lambda k: k not in ("messages", "tools"))
    fields = draw(st.dictionaries(names, VALUES, max_size=2))
    fields["messages"] = draw(MESSAGES)
    tools = draw(st.just(ABSENT) | st.lists(VALUES, max_size=3) | VALUES)
    if tools is not ABSENT:
        fields["tools"] = tools
    order = draw(st.permutations(list(fields)))
    space, ascii_only = draw(SPACES), draw(st.booleans())
    return space + dumped({name: fields[name] for name in order}, space, ascii_only) + space


@given(chat_bodies(), st.lists(st.sampled_from(NAMES), min_size=1, unique=True), MESSAGES)
def test_the_tool_loops_additions_go_in_the_clients_text(text, names, added):
    body, located = request_json.loads_locating(text.encode(), "messages")
    written = ",".join(json.dumps(message, ensure_ascii=False) for message in added)
    items = located.items

    sent = located.edited(
        memory_tools_edit(body, located, names),
        items.item_edit(len(items.spans), written, False),
    )

    tools = body["tools"] if isinstance(body.get("tools"), list) else []
    assert json.loads(sent) == {
        **body,
        "messages": [*body["messages"], *added],
        "tools": [*tools, *(SCHEMAS[name] for name in names)],
    }
