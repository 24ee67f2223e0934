"""Drop-in compatibility, the client's bytes: what moim changes in a body (a config alias's model
name, the Responses API's block) is written into the client's text, every other byte kept.

moim wrote such a body again whole (`json.dumps`: its own spacing, escapes and numbers, and for
an alias `\\uXXXX` for every non-ASCII character, a larger body than the client sent; ~4.7 ms
for an agent's 487 kB history). The provider gets the same JSON as before.
"""

import json

import httpx
import pytest

from proxy.config import ModelRoute
from proxy.responses_body import place_block
from proxy.tools import NAMES, SCHEMAS
from tests.e2e.test_dropin_wire import CLIENTS_BODY, USER, _message, with_a_fact

ALIAS = b'"model": "fast"'


def aliased(make_proxy, upstream, **settings):
    """A proxy whose model `fast` is a config alias of the stand-in's `gpt-4o-mini`."""
    route = ModelRoute(model="gpt-4o-mini", api_base=upstream.url, openai_compatible=True)
    return make_proxy(upstream_base_url="http://127.0.0.1:9/v1", routes={"fast": route}, **settings)


def test_an_alias_renames_the_model_in_the_clients_bytes(make_proxy, upstream):
    proxy = aliased(make_proxy, upstream)
    raw = CLIENTS_BODY.replace(b'"model": "gpt-4o-mini"', ALIAS)

    response = httpx.post(
        proxy.url + "/chat/completions", content=raw, headers={**USER, "x-memory-mode": "off"}
    )

    assert response.status_code == 200, response.text
    assert upstream.requests[-1].body == CLIENTS_BODY


def test_an_alias_and_the_block_both_go_into_the_clients_bytes(make_proxy, upstream):
    proxy = aliased(make_proxy, upstream)
    with_a_fact(proxy)
    raw = CLIENTS_BODY.replace(b'"model": "gpt-4o-mini"', ALIAS)

    response = httpx.post(proxy.url + "/chat/completions", content=raw, headers=USER)

    assert response.status_code == 200, response.text
    assert int(response.headers["x-memory-facts-injected"]) == 1
    sent = upstream.requests[-1]
    block = next(m["content"] for m in sent.json["messages"] if "Rua das Flores" in m["content"])
    was = b'{"role": "user", "content": "Where do I live?"}'
    now = _message({"role": "system", "content": block}) + b"," + was
    assert sent.body == CLIENTS_BODY.replace(was, now)


def test_an_alias_of_a_passthrough_endpoint_renames_the_model_in_the_clients_bytes(
    make_proxy, upstream
):
    route = ModelRoute(
        model="text-embedding-3-large", api_base=upstream.url, openai_compatible=True
    )
    proxy = make_proxy(upstream_base_url="http://127.0.0.1:9/v1", routes={"embed": route})
    raw = b'{ "input" : ["caf\\u00e9", "na\xc3\xafve"],\n"model":"embed", "dimensions": 4 }'

    response = httpx.post(
        proxy.url + "/embeddings", content=raw, headers={"content-type": "application/json"}
    )

    assert response.status_code == 200, response.text
    assert upstream.requests[-1].body == raw.replace(b'"embed"', b'"text-embedding-3-large"')


# A Responses API body as a client wrote it: its spacing, escapes, a field OpenAI does not know.
RESPONSES_BODY = (
    b'{\n "instructions":"Be terse.",\n "input": [\n'
    b'  {"role": "user", "content": "Caf\\u00e9 \\/ na\xc3\xafve"},\n'
    b'  {"type":"message","role":"assistant","content":"Noted."},\n'
    b'  {"role": "user", "content": "Where do I live?"}\n ],\n'
    b' "model": "fast", "x_trace": [1.50, 2e3]\n}\n'
)


@pytest.mark.parametrize("placement", ["before_last_user", "system"])
def test_the_responses_block_goes_into_the_clients_bytes(make_proxy, upstream, placement):
    proxy = aliased(make_proxy, upstream, settings={"placement": placement})
    with_a_fact(proxy)

    response = httpx.post(proxy.url + "/responses", content=RESPONSES_BODY, headers=USER)

    assert response.status_code == 200, response.text
    assert int(response.headers["x-memory-facts-injected"]) == 1
    sent, client = upstream.requests[-1], json.loads(RESPONSES_BODY)
    if placement == "system":
        block = sent.json["instructions"].split("\n\nBe terse.")[0]
        was = b'"instructions":"Be terse."'
        now = b'"instructions":' + _message(f"{block}\n\nBe terse.")
    else:
        block = next(i["content"] for i in sent.json["input"] if "Rua das Flores" in i["content"])
        was = b'{"role": "user", "content": "Where do I live?"}'
        now = _message({"role": "system", "content": block}) + b"," + was
    assert sent.json == {**place_block(client, block, placement), "model": "gpt-4o-mini"}
    assert RESPONSES_BODY.count(was) == 1
    renamed = RESPONSES_BODY.replace(ALIAS, b'"model": "gpt-4o-mini"')
    assert sent.body == renamed.replace(was, now)


def test_a_string_input_becomes_items_in_the_clients_bytes(make_proxy, upstream):
    proxy = make_proxy()
    with_a_fact(proxy)
    raw = b'{"model":"gpt-4o-mini",  "input" :"Where do I live?", "x_trace": 1.50}'

    response = httpx.post(proxy.url + "/responses", content=raw, headers=USER)

    assert response.status_code == 200, response.text
    sent = upstream.requests[-1]
    items = sent.json["input"]
    assert [item["role"] for item in items] == ["system", "user"]
    assert "Rua das Flores" in items[0]["content"]
    written = _message(items)
    assert sent.body == raw.replace(b'"Where do I live?"', written)


def tools_body(stream):
    """A chat body with a tool of the client's, as it wrote it."""
    return (
        b'{"model": "gpt-4o-mini",\n  "messages": [\n'
        b'    {"role": "user", "content": "Caf\\u00e9 na\xc3\xafve?"}\n  ],\n'
        b'  "tools": [ {"type": "function", "function": {"name": "get_weather", '
        b'"parameters": {}}} ],\n  "stream": ' + (b"true" if stream else b"false") + b"}"
    )


@pytest.mark.parametrize("stream", [False, True])
def test_the_tool_loops_rounds_are_the_clients_bytes_with_moims_additions(proxy, upstream, stream):
    """Each round of the memory-tool loop wrote the whole body again (`json.dumps`); now
    moim's tools go at the end of the client's `tools` and its rounds' messages at the end of
    `messages`, in the client's text."""
    remember = {"id": "c1", "name": "moim_remember_fact", "arguments": '{"key":"k","value":"v"}'}
    upstream.script = [{"tool_calls": [remember]}, {"content": "Noted."}]
    raw = tools_body(stream)

    response = httpx.post(
        proxy.url + "/chat/completions", content=raw, headers={**USER, "x-memory-tools": "on"}
    )

    assert response.status_code == 200, response.text
    first, second = [r for r in upstream.requests if r.path == "/v1/chat/completions"]
    schemas = b",".join(_message(SCHEMAS[name]) for name in NAMES)
    assert first.body == raw.replace(b"{}}} ]", b"{}}} ," + schemas + b"]")
    call, result = second.json["messages"][-2:]
    assert (call["tool_calls"][0]["id"], result["tool_call_id"]) == ("c1", "c1")
    said = b'na\xc3\xafve?"}'
    added = b"," + _message(call) + b"," + _message(result)
    assert second.body == first.body.replace(said, said + added)
