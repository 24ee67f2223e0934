"""Drop-in compatibility, the wire: what clients other than openai-python send, and how.

Each test is a case an audit of the HTTP layer found moim handling otherwise than the
provider called directly: bytes that are not what the client sent, or a turn not stored as
said.
"""

import gzip
import json
import socket

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from memory import count_tokens, inject_block
from proxy.config import ModelRoute
from tests.conftest import serve_app
from tests.e2e.test_store_locked import locked
from tests.upstream_responses import output_items, response_object

USER = {"x-memory-user-id": "alice", "content-type": "application/json"}
FACT = {"key": "home", "value": "a flat above the bakery on Rua das Flores", "category": "home"}


def with_a_fact(proxy):
    """A proxy whose user has a fact: every request of theirs gets a block, so the body the
    provider gets is the one moim writes again."""
    answer = httpx.post(proxy.url + "/memory/facts", json=FACT, headers=USER)
    assert answer.status_code == 200, answer.text


@pytest.mark.parametrize(
    ("path", "raw"),
    [
        (
            "/chat/completions",
            b'"temperature": NaN, "messages": [{"role": "user", "content": "Hi"}]',
        ),
        (
            "/chat/completions",
            b'"temperature": 1e400, "messages": [{"role": "user", "content": "Hi"}]',
        ),
        ("/responses", b'"top_p": -Infinity, "input": "Hi"'),
    ],
    ids=["nan", "too-large", "responses-infinity"],
)
def test_a_number_with_no_finite_value_is_a_400_and_goes_nowhere(proxy, upstream, path, raw):
    """Python's json reads NaN, Infinity and 1e400 (as inf); moim wrote the body again with its
    block and sent the provider `NaN` / `Infinity`, which is not JSON (a `1e400` the client
    sent became one), and stored the turn as answered."""
    with_a_fact(proxy)

    response = httpx.post(
        proxy.url + path, content=b'{"model": "gpt-4o-mini", ' + raw + b"}", headers=USER
    )

    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "invalid_json"
    assert upstream.requests == []
    proxy.flush()
    assert list(proxy.layer.store.messages("alice")) == []


def http10(root, path, body):
    """An HTTP/1.0 POST of `body` as JSON (as `curl -0` or ApacheBench send it); the response
    read to the connection's close, split at its head."""
    host, port = root.removeprefix("http://").split(":")
    raw = json.dumps(body).encode()
    head = (
        f"POST {path} HTTP/1.0\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"X-Memory-User-Id: alice\r\nContent-Length: {len(raw)}\r\n\r\n"
    )
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(head.encode() + raw)
        received = b""
        while piece := sock.recv(65536):
            received += piece
    head_bytes, _, content = received.partition(b"\r\n\r\n")
    return head_bytes.decode().lower(), content


@pytest.mark.parametrize("parser", ["h11", "httptools"])
def test_a_stream_to_an_http10_client_is_not_sent_in_chunks(make_proxy, upstream, parser):
    """HTTP/1.0 knows no chunked encoding; uvicorn's httptools protocol (moim's default) sent
    the stream in chunks anyway, and the client read "2fa" lines between the events."""
    proxy = make_proxy(http_parser=parser)
    body = {"model": "gpt-4o-mini", "stream": True, "messages": [{"role": "user", "content": "Hi"}]}

    head, content = http10(proxy.root, "/v1/chat/completions", body)

    assert head.startswith("http/1.1 200")
    assert "transfer-encoding" not in head
    events = [line for line in content.split(b"\n\n") if line]
    assert all(event.startswith(b"data: ") for event in events), content[:200]
    assert events[-1] == b"data: [DONE]"
    proxy.flush()
    stored = [m.content for m in proxy.layer.store.messages("alice")]
    assert stored == ["Hi", "echo: Hi"]


# -- legacy function calling (`functions`, `function_call`) ---------------------------------

CALL = {"name": "get_weather", "arguments": '{"city":"Paris"}'}
SAID = "Sunny in Paris."


async def _calling(request: Request) -> Response:
    """A provider answering a `functions` request with a function call, and its result with
    words, streamed (the call's name, then its arguments in two pieces) or not."""
    body = json.loads(await request.body())
    head = {"id": "chatcmpl-legacy", "created": 1, "model": body["model"]}
    answered = body["messages"][-1]["role"] == "function"
    if not body.get("stream"):
        message = {"role": "assistant", "content": SAID if answered else None}
        if not answered:
            message["function_call"] = CALL
        choice = {"index": 0, "message": message, "finish_reason": "stop"}
        completion = {**head, "object": "chat.completion", "choices": [choice]}
        return Response(json.dumps(completion), media_type="application/json")
    deltas = [{"role": "assistant", "content": SAID if answered else None}]
    if not answered:
        arguments = CALL["arguments"]
        deltas += [
            {"function_call": {"name": CALL["name"], "arguments": ""}},
            {"function_call": {"arguments": arguments[:6]}},
            {"function_call": {"arguments": arguments[6:]}},
        ]
    choices = [{"index": 0, "delta": delta, "finish_reason": None} for delta in deltas]
    choices.append(
        {"index": 0, "delta": {}, "finish_reason": "stop" if answered else "function_call"}
    )
    chunk = {**head, "object": "chat.completion.chunk"}
    events = [f"data: {json.dumps({**chunk, 'choices': [c]})}\n\n" for c in choices]
    return StreamingResponse(iter([*events, "data: [DONE]\n\n"]), media_type="text/event-stream")


@pytest.fixture(scope="module")
def calling():
    app = Starlette(routes=[Route("/v1/chat/completions", _calling, methods=["POST"])])
    with serve_app(app) as root:
        yield root + "/v1"


def exported(proxy):
    proxy.flush()
    lines = httpx.get(proxy.url + "/memory/export", headers=USER).text.splitlines()
    return [json.loads(line)["payload"] for line in lines]


@pytest.mark.parametrize("stream", [False, True])
def test_a_legacy_function_call_reply_is_stored_as_made(make_proxy, calling, stream):
    """A reply that was only a `function_call` (the `functions` API) had no text and no tool
    calls, so moim took it for no reply and stored none; the client's resent history stored
    it later, if the conversation went on."""
    proxy = make_proxy(upstream_base_url=calling)
    question = {"role": "user", "content": "Weather in Paris?"}
    functions = [{"name": "get_weather", "parameters": {"type": "object", "properties": {}}}]
    with proxy.client(default_headers=USER) as client:

        def ask(messages):
            answer = client.chat.completions.create(
                model="gpt-3.5-turbo", messages=messages, functions=functions, stream=stream
            )
            return list(answer) if stream else answer

        ask([question])
        assert [m["role"] for m in exported(proxy)] == ["user", "assistant"]
        assert exported(proxy)[1]["function_call"] == CALL

        result = {"role": "function", "name": "get_weather", "content": "sunny"}
        ask([question, {"role": "assistant", "content": None, "function_call": CALL}, result])

    payloads = exported(proxy)
    assert [m["role"] for m in payloads] == ["user", "assistant", "function", "assistant"]
    assert payloads[3]["content"] == SAID


def test_a_legacy_function_call_in_the_history_counts_against_the_window(make_proxy, upstream):
    """The room the block may take was measured without a `function_call`'s arguments (a
    tool call's were counted): a request that fits was pushed over its window by the block."""
    window, model = 400, "gpt-4o-mini"
    proxy = make_proxy(settings={"context_windows": {model: window}})
    with_a_fact(proxy)
    call = {"name": "save_notes", "arguments": json.dumps({"text": "word" + " word" * 349})}
    history = [
        {"role": "user", "content": "Save my notes."},
        {"role": "assistant", "content": None, "function_call": call},
        {"role": "function", "name": "save_notes", "content": "saved"},
        {"role": "user", "content": "Thanks!"},
    ]
    assert count_tokens(json.dumps(call), model) + 30 < window  # the request fits

    with proxy.client() as client:
        raw = client.chat.completions.with_raw_response.create(
            model=model, messages=history, extra_headers=USER
        )

    assert raw.headers["x-memory-facts-injected"] == "0"
    assert upstream.last_json["messages"] == history


# -- a provider that compresses what moim asked for uncompressed ------------------------------

BACKGROUND_BODY = {"model": "gpt-4o-mini", "input": "Write me a haiku.", "background": True}
HAIKU = "Old pond, a frog jumps."


async def _written_in_the_background(request: Request) -> Response:
    """Queued when asked; a poll finds it completed, its JSON gzip-compressed although moim
    asked for `identity` (as some providers and gateways answer)."""
    if request.method == "POST":
        body = json.loads(await request.body())
        queued = response_object(1, body, [], status="queued")
        return Response(json.dumps({**queued, "background": True}), media_type="application/json")
    done = response_object(1, BACKGROUND_BODY, output_items(1, HAIKU, ()))
    squeezed = gzip.compress(json.dumps({**done, "background": True}).encode())
    return Response(squeezed, media_type="application/json", headers={"content-encoding": "gzip"})


@pytest.fixture(scope="module")
def squeezing():
    routes = [
        Route("/v1/responses", _written_in_the_background, methods=["POST"]),
        Route("/v1/responses/{id}", _written_in_the_background, methods=["GET"]),
    ]
    with serve_app(Starlette(routes=routes)) as root:
        yield root + "/v1"


def test_a_background_reply_polled_compressed_is_read_and_stored(make_proxy, squeezing):
    """The poll is a pass-through, relayed as its bytes; moim read those bytes for the reply,
    gzip and all, and stored nothing. The client gets the body it can read either way."""
    proxy = make_proxy(upstream_base_url=squeezing)
    with proxy.client(default_headers=USER) as client:
        queued = client.responses.create(**BACKGROUND_BODY)
        polled = client.responses.retrieve(queued.id)

    assert (queued.status, polled.status, polled.output_text) == ("queued", "completed", HAIKU)
    proxy.flush()
    stored = [(m.role, m.content) for m in proxy.layer.store.messages("alice")]
    assert stored == [("user", BACKGROUND_BODY["input"]), ("assistant", HAIKU)]


@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER"])
def test_a_client_key_reaches_a_litellm_provider_whatever_the_case_of_its_scheme(
    make_proxy, upstream, scheme
):
    """HTTP's auth scheme names are case-insensitive (RFC 9110 §11.1); on a litellm route moim
    took the key out of `Bearer <key>` alone, and a client sending `bearer <key>` had the
    provider asked with the key `bearer <key>` (a 401 the client's key did not deserve)."""
    keyless = ModelRoute(model="openai/gpt-4o-mini", api_base=upstream.url)
    proxy = make_proxy(routes={"keyless": keyless})
    body = {"model": "keyless", "messages": [{"role": "user", "content": "Hello"}]}

    response = httpx.post(
        proxy.url + "/chat/completions",
        json=body,
        headers={**USER, "authorization": f"{scheme} sk-client"},
        timeout=30,
    )

    assert response.status_code == 200, response.text
    assert upstream.requests[-1].headers["authorization"] == "Bearer sk-client"


# A client's body as it wrote it: its own spacing, escapes, numbers and field order, a field
# OpenAI does not know, a system prompt written without spaces.
CLIENTS_BODY = (
    b'{\n  "x_trace": {"b": 1, "a": [1.50, 2e3, -0.0]},\n  "model": "gpt-4o-mini",\n'
    b'  "messages": [\n    {"role":"system","content":"You are terse."},\n'
    b'    {"role": "user", "content": "Caf\\u00e9 \\/ \\u2028 na\xc3\xafve"},\n'
    b'    {"content": "Noted.", "role": "assistant"},\n'
    b'    {"role": "user", "content": "Where do I live?"}\n  ],\n  "temperature": 0.50\n}\n'
)


@pytest.mark.parametrize("placement", ["before_last_user", "system"])
def test_the_block_goes_into_the_clients_bytes_which_are_otherwise_kept(
    make_proxy, upstream, placement
):
    """moim wrote the whole body again to add its block (`json.dumps`: its own spacing,
    escapes and numbers; ~4.7 ms for an agent's 487 kB history); now the block's message is
    written into the client's text, and the provider gets the same JSON as before: the
    client's bytes with that one message added (or, placed in the system prompt, changed)."""
    proxy = make_proxy(settings={"placement": placement})
    with_a_fact(proxy)

    response = httpx.post(proxy.url + "/chat/completions", content=CLIENTS_BODY, headers=USER)

    assert response.status_code == 200, response.text
    assert int(response.headers["x-memory-facts-injected"]) == 1
    sent = upstream.requests[-1]
    client = json.loads(CLIENTS_BODY)
    block = next(m["content"] for m in sent.json["messages"] if "Rua das Flores" in m["content"])
    block = block.split("\n\nYou are terse.")[0]
    assert sent.json == {**client, "messages": inject_block(client["messages"], block, placement)}
    if placement == "system":
        system = {"role": "system", "content": block + "\n\nYou are terse."}
        was, now = b'{"role":"system","content":"You are terse."}', _message(system)
    else:
        was = b'{"role": "user", "content": "Where do I live?"}'
        now = _message({"role": "system", "content": block}) + b"," + was
    assert CLIENTS_BODY.count(was) == 1
    assert sent.body == CLIENTS_BODY.replace(was, now)


def _message(message):
    return json.dumps(message, ensure_ascii=False).encode()


def test_the_journal_copies_the_clients_text_of_the_messages_and_the_same_turn_is_stored(
    make_proxy, upstream
):
    """A turn's journal line wrote the whole history again (`json.dumps`: ~4 ms for an agent's
    487 kB, on the event loop as the reply ends); it now copies the client's text of the
    messages, its line breaks made spaces (JSON has them only between tokens). The line is
    read while the store is locked, so the writer cannot store the turn and empty it."""
    proxy = make_proxy(settings={"busy_timeout": 0.2})
    journal = proxy.config.db_path.with_name(proxy.config.db_path.name + ".journal")

    with locked(proxy.config.db_path):
        response = httpx.post(proxy.url + "/chat/completions", content=CLIENTS_BODY, headers=USER)
        assert response.status_code == 200, response.text
        [line] = journal.read_bytes().splitlines()

    client = json.loads(CLIENTS_BODY)
    assert json.loads(line)["messages"] == client["messages"]
    assert b'{"role":"system","content":"You are terse."}' in line  # the client's own bytes
    assert b'"content": "Caf\\u00e9 \\/ \\u2028 na\xc3\xafve"}' in line
    proxy.flush()
    stored = [(m.role, m.content) for m in proxy.layer.store.messages("alice")]
    said = [(m["role"], m["content"]) for m in client["messages"]]
    assert stored == [*said, ("assistant", stored[-1][1])]
