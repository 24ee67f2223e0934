"""`POST /v1/responses` through the real proxy: memory for OpenAI's Responses API.

The official openai SDK's `client.responses.create` talks to moim, moim to the fake upstream
(which speaks the Responses API: tests/upstream_responses.py); the embedder is the real one.
What the provider receives is the client's body plus the block as a system message item; the
turn (instructions and input items as messages, the reply's text and function calls) is stored
once the provider says `response.completed`.
"""

import json
import time
from contextlib import closing

import httpx
import openai
import pytest
import sqlean

from memory import BLOCK_END, BLOCK_START
from proxy.config import ModelRoute, ProxyKey
from tests.upstream import LONG_REPLY, WEATHER_CALL

MODEL = "gpt-4o-mini"
CLARA = "My sister Clara teaches violin at the conservatory in Lisbon"
QUESTION = "Where does my sister Clara teach violin these days?"


def create(proxy, user, stream=False, **fields):
    """One response through moim as `user`; (response or its events, moim's headers)."""
    headers = {"X-Memory-User-Id": user, **fields.pop("headers", {})}
    fields.setdefault("model", MODEL)
    with proxy.client() as client:
        if not stream:
            raw = client.responses.with_raw_response.create(extra_headers=headers, **fields)
            return raw.parse(), raw.headers
        with client.responses.create(stream=True, extra_headers=headers, **fields) as events:
            return list(events), events.response.headers


def stored(proxy, user):
    """(session, role, content, partial) of each message stored for `user`, in order."""
    return [(m.session_id, m.role, m.content, m.partial) for m in proxy.layer.store.messages(user)]


def sent_input(upstream):
    return upstream.last_responses_json["input"]


def blocks_in(items):
    """The system message items that carry a MOIM block."""
    return [
        item
        for item in items
        if isinstance(item, dict)
        and item.get("role") == "system"
        and str(item.get("content", "")).startswith(BLOCK_START)
    ]


def remember_clara(proxy, user):
    create(proxy, user, input=CLARA)
    proxy.flush()


# -- memory round trip ------------------------------------------------------------------------


def test_said_in_one_conversation_injected_in_a_new_one(proxy, upstream):
    remember_clara(proxy, "alice")
    question = [{"role": "user", "content": [{"type": "input_text", "text": QUESTION}]}]
    response, headers = create(proxy, "alice", instructions="Be brief.", input=question)

    assert response.output_text == "echo: " + QUESTION
    sent = upstream.last_responses_json
    assert sent["instructions"] == "Be brief."  # the system prompt and its cache untouched
    [block] = blocks_in(sent["input"])
    assert sent["input"] == [block, *question]  # just before the last user message
    assert block["content"].endswith(BLOCK_END) and CLARA in block["content"]
    assert int(headers["x-memory-chunks-injected"]) >= 1
    assert int(headers["x-memory-tokens-injected"]) > 0
    for name in ("mode", "tier", "fill-ratio", "facts-injected", "session-id", "overhead-ms"):
        assert headers[f"x-memory-{name}"]
    assert headers["x-request-id"]


def test_a_streamed_response_is_relayed_as_is_and_its_turn_stored(proxy, upstream):
    events, headers = create(proxy, "bob", stream=True, instructions="Be brief.", input=CLARA)
    proxy.flush()

    assert [e.type for e in events][-1] == "response.completed"
    assert events[-1].response.output_text == "echo: " + CLARA
    session = headers["x-memory-session-id"]
    assert stored(proxy, "bob") == [
        (session, "system", "Be brief.", False),
        (session, "user", CLARA, False),
        (session, "assistant", "echo: " + CLARA, False),
    ]
    create(proxy, "bob", stream=True, input=QUESTION)
    assert CLARA in blocks_in(sent_input(upstream))[0]["content"]


def test_a_string_input_becomes_a_user_item_after_the_block(proxy, upstream):
    remember_clara(proxy, "carol")
    create(proxy, "carol", input=QUESTION)
    sent = sent_input(upstream)
    assert len(sent) == 2 and blocks_in(sent) == sent[:1]
    assert sent[1] == {"role": "user", "content": QUESTION}


def test_placement_system_puts_the_block_at_the_start_of_instructions(make_proxy, upstream):
    proxy = make_proxy(settings={"placement": "system"})
    remember_clara(proxy, "dora")
    create(proxy, "dora", instructions="Be brief.", input=QUESTION)
    sent = upstream.last_responses_json
    assert sent["instructions"].startswith(BLOCK_START + "\n")
    assert sent["instructions"].endswith(BLOCK_END + "\n\nBe brief.")
    assert sent["input"] == QUESTION


def test_a_request_with_nothing_to_recall_is_forwarded_byte_for_byte(proxy, upstream):
    raw = b'{"model": "gpt-4o-mini",  "input": "Hello",\n "store": false}'
    response = httpx.post(
        proxy.url + "/responses", content=raw, headers={"content-type": "application/json"}
    )
    assert response.status_code == 200
    assert upstream.requests[-1].body == raw


# -- previous_response_id ---------------------------------------------------------------------

CABIN = "We booked the lakeside cabin at Lake Tahoe for the third of March"
CAR = "The rental car for the trip is a blue Subaru Outback"


def test_previous_response_id_continues_the_session(proxy, upstream):
    first, opened = create(proxy, "erin", instructions="Plan trips.", input=CABIN)
    second, continued = create(proxy, "erin", input=CAR, previous_response_id=first.id)
    events, streamed = create(
        proxy, "erin", stream=True, input="Thanks!", previous_response_id=second.id
    )
    proxy.flush()

    session = opened["x-memory-session-id"]
    assert continued["x-memory-session-id"] == streamed["x-memory-session-id"] == session
    assert stored(proxy, "erin") == [
        (session, "system", "Plan trips.", False),
        (session, "user", CABIN, False),
        (session, "assistant", "echo: " + CABIN, False),
        (session, "user", CAR, False),
        (session, "assistant", "echo: " + CAR, False),
        (session, "user", "Thanks!", False),
        (session, "assistant", "echo: Thanks!", False),
    ]


def test_a_continued_request_does_not_recall_what_the_provider_holds(proxy, upstream):
    first, _ = create(proxy, "fay", input=CABIN)
    second, _ = create(proxy, "fay", input=CAR, previous_response_id=first.id)
    proxy.flush()
    recap = "Remind me where we booked the cabin and which rental car we have"

    create(
        proxy, "fay", input=recap, previous_response_id=second.id, headers={"X-Memory-Mode": "read"}
    )
    assert "Tahoe" not in json.dumps(sent_input(upstream))  # the model sees it already
    create(proxy, "fay", input=recap)  # a new conversation: recalled
    assert "Tahoe" in blocks_in(sent_input(upstream))[0]["content"]


def test_repeating_a_message_in_a_continued_request_stores_it_again(proxy, upstream):
    first, _ = create(proxy, "gus", input="yes")
    create(proxy, "gus", input="yes", previous_response_id=first.id)
    proxy.flush()
    said = [(role, content) for _, role, content, _ in stored(proxy, "gus")]
    assert said == [("user", "yes"), ("assistant", "echo: yes")] * 2


def test_a_reply_moim_never_saw_starts_a_session_its_chain_keeps(proxy, upstream):
    with openai.OpenAI(base_url=upstream.url, api_key="sk", max_retries=0) as direct:
        unseen = direct.responses.create(model=MODEL, input="Hello")  # not through moim
    second, one = create(proxy, "hugo", input="Go on", previous_response_id=unseen.id)
    _, two = create(proxy, "hugo", input="And then?", previous_response_id=second.id)
    proxy.flush()
    assert one["x-memory-session-id"] == two["x-memory-session-id"]
    assert {session for session, *_ in stored(proxy, "hugo")} == {one["x-memory-session-id"]}


def test_a_session_header_wins_over_previous_response_id(proxy, upstream):
    first, _ = create(proxy, "ines", input=CABIN)
    _, headers = create(
        proxy,
        "ines",
        input=CAR,
        previous_response_id=first.id,
        headers={"X-Memory-Session-Id": "trip"},
    )
    assert headers["x-memory-session-id"] == "trip"


def test_continuing_another_users_response_gives_nothing_of_theirs(make_proxy, upstream):
    """Without proxy keys, one provider key, two moim users: B naming A's reply id gets B's
    memory only, and B's turn is stored as B's, in a session of B's; A's memory is as it was.
    (Any caller may name any user here; with proxy keys the request is refused: below.)"""
    proxy = make_proxy(upstream_api_key="sk-provider")

    def ask(user, **fields):
        answer = httpx.post(
            proxy.url + "/responses",
            json={"model": MODEL, **fields},
            headers={"X-Memory-User-Id": user},
        )
        assert answer.status_code == 200, answer.text
        return answer.json(), answer.headers

    proxy.layer.set_fact("ann", "home_city", "Reno")
    proxy.layer.set_fact("ben", "home_city", "Tulsa")
    first, of_ann = ask("ann", input=CABIN)
    proxy.flush()
    ann_before = stored(proxy, "ann")
    recap = "Remind me where we booked the cabin"

    _, of_ben = ask("ben", input=recap, previous_response_id=first["id"])
    proxy.flush()

    sent = json.dumps(upstream.last_responses_json)
    assert upstream.last_responses_json["previous_response_id"] == first["id"]  # as sent
    assert "Tulsa" in sent and "Reno" not in sent and "Tahoe" not in sent
    assert of_ben["x-memory-session-id"] != of_ann["x-memory-session-id"]
    session = of_ben["x-memory-session-id"]
    assert stored(proxy, "ben") == [
        (session, "user", recap, False),
        (session, "assistant", "echo: " + recap, False),
    ]
    assert stored(proxy, "ann") == ann_before
    assert proxy.layer.response_link("ben", first["id"]) is None
    assert proxy.layer.response_link("ann", first["id"]).session_id == of_ann["x-memory-session-id"]


BOUND_KEYS = (
    ProxyKey("sk-ann-key", user_id="ann"),
    ProxyKey("sk-ben-key", user_id="ben"),
    ProxyKey("sk-admin-key", admin=True),  # the tests' flush
)


def as_key(proxy, key, **fields):
    """A Responses request with proxy key `key`: (status, JSON body)."""
    answer = httpx.post(
        proxy.url + "/responses",
        json={"model": MODEL, **fields},
        headers={"Authorization": f"Bearer {key}"},
    )
    return answer.status_code, answer.json()


@pytest.mark.both_backends
@pytest.mark.parametrize("mode", ["auto", "off"])
def test_with_proxy_keys_another_users_reply_cannot_be_continued(make_proxy, upstream, mode):
    """With proxy keys every user's replies sit on the one provider key, and the provider
    continues any reply named to it with that reply's whole history: B naming A's reply id
    would have the model read A's conversation to B. Refused (404, as OpenAI answers an id it
    does not know), nothing forwarded or stored; A and B each continue their own, whatever
    the memory mode (a reply of a mode that stores nothing is known in RAM)."""
    proxy = make_proxy(keys=BOUND_KEYS, upstream_api_key="sk-provider")
    modes = {"extra_headers": {"X-Memory-Mode": mode}}
    with proxy.client(api_key="sk-ann-key") as ann:
        first = ann.responses.create(model=MODEL, input=CABIN, **modes)
        with ann.responses.create(model=MODEL, input=CAR, stream=True, **modes) as events:
            streamed = [e for e in events if e.type == "response.completed"][0].response
    proxy.flush()
    forwarded = len(upstream.requests)

    with proxy.client(api_key="sk-ben-key") as ben:
        for reply in (first, streamed):
            with pytest.raises(openai.NotFoundError) as refused:
                ben.responses.create(
                    model=MODEL, input="Repeat it all", previous_response_id=reply.id
                )
            assert refused.value.code == "previous_response_not_found"
            assert refused.value.param == "previous_response_id"
    assert len(upstream.requests) == forwarded
    proxy.flush()
    assert stored(proxy, "ben") == []

    with proxy.client(api_key="sk-ann-key") as ann:
        for reply in (first, streamed):
            again = ann.responses.create(
                model=MODEL, input="Go on", previous_response_id=reply.id, **modes
            )
            assert again.output_text == "echo: Go on"
    status, _ = as_key(proxy, "sk-admin-key", input="Go on", previous_response_id=first.id)
    assert status == 200  # an admin key reaches the provider account's state anyway


def test_with_proxy_keys_a_provider_conversation_needs_an_account_key(make_proxy, upstream):
    """A provider conversation (`conversation`) is the provider account's, made through
    `/v1/conversations`, which a user's key may not reach: naming one is refused as reading
    it would be, unless the key is admin or `auth.account_endpoints_for_all_keys` is set."""
    proxy = make_proxy(keys=BOUND_KEYS, upstream_api_key="sk-provider")
    status, error = as_key(proxy, "sk-ben-key", input=CABIN, conversation="conv_of_ann")
    assert status == 403 and error["error"]["code"] == "account_endpoint_needs_admin"
    assert error["error"]["param"] == "conversation"
    assert upstream.requests == []
    assert as_key(proxy, "sk-admin-key", input=CABIN, conversation="conv_x")[0] == 200

    opened = make_proxy(
        keys=BOUND_KEYS, upstream_api_key="sk-provider", account_endpoints_for_all_keys=True
    )
    assert as_key(opened, "sk-ben-key", input=CABIN, conversation="conv_x")[0] == 200
    _, of_ann = as_key(opened, "sk-ann-key", input=CABIN)
    status, error = as_key(opened, "sk-ben-key", input="Go on", previous_response_id=of_ann["id"])
    assert status == 200, error  # the operator let every key share the account's state


def test_a_provider_conversation_is_one_session_its_messages_stored_as_new(proxy, upstream):
    _, first = create(proxy, "nora", input=CABIN, conversation="conv_trip")
    _, second = create(proxy, "nora", input=CABIN, conversation={"id": "conv_trip"})
    _, other = create(proxy, "olga", input=CABIN, conversation="conv_trip")
    proxy.flush()
    recap = "Remind me where we booked the cabin"
    create(proxy, "nora", input=recap, conversation="conv_trip", headers={"X-Memory-Mode": "read"})

    assert first["x-memory-session-id"] == second["x-memory-session-id"]
    assert other["x-memory-session-id"] != first["x-memory-session-id"]
    said = [(role, content) for _, role, content, _ in stored(proxy, "nora")]
    assert said == [("user", CABIN), ("assistant", "echo: " + CABIN)] * 2
    assert "Tahoe" not in json.dumps(sent_input(upstream))  # the provider holds it


# -- function calls ---------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
def test_function_calls_and_outputs_are_stored_once_as_tool_calls(proxy, upstream, stream):
    ask = [{"role": "user", "content": "Weather in Paris?"}]
    tools = [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}]
    if stream:
        events, _ = create(proxy, "jo", stream=True, model="tool-call", input=ask, tools=tools)
        output = [item.model_dump(exclude_none=True) for item in events[-1].response.output]
    else:
        response, _ = create(proxy, "jo", model="tool-call", input=ask, tools=tools)
        output = [item.model_dump(exclude_none=True) for item in response.output]
    result = {"type": "function_call_output", "call_id": WEATHER_CALL["id"], "output": "Sunny"}
    create(proxy, "jo", input=[*ask, *output, result], tools=tools)  # the history sent back
    proxy.flush()

    messages = proxy.layer.store.messages("jo")
    assert [(m.role, m.content) for m in messages] == [
        ("user", "Weather in Paris?"),
        ("assistant", ""),
        ("tool", "Sunny"),
        ("assistant", "echo: Weather in Paris?"),
    ]
    payload = json.loads(
        proxy.layer.store.read("SELECT payload FROM messages WHERE id = ?", (messages[1].id,))[0][0]
    )
    assert payload["tool_calls"] == [
        {
            "id": WEATHER_CALL["id"],
            "type": "function",
            "function": {"name": "get_weather", "arguments": WEATHER_CALL["arguments"]},
        }
    ]


# -- partial replies --------------------------------------------------------------------------


def test_a_client_that_leaves_mid_stream_has_the_partial_reply_stored(proxy, upstream):
    body = {"model": "slow", "stream": True, "input": "Count to forty, slowly"}
    with httpx.Client(timeout=10) as http:
        with http.stream("POST", proxy.url + "/responses", json=body) as response:
            chunks = response.iter_raw()
            received = b""
            while received.count(b"response.output_text.delta") < 6:
                received += next(chunks)
    deadline = time.monotonic() + 5
    while upstream.disconnects != 1:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    proxy.flush()

    messages = proxy.layer.store.messages("default")
    assert [(m.role, m.partial) for m in messages] == [("user", False), ("assistant", True)]
    partial = messages[1].content
    assert partial and LONG_REPLY.startswith(partial) and partial != LONG_REPLY


def test_a_broken_upstream_stream_breaks_off_and_stores_the_part_said(proxy, upstream):
    body = {"model": "broken", "stream": True, "input": "Tell me everything"}
    data = b""
    with httpx.stream("POST", proxy.url + "/responses", json=body, timeout=10) as response:
        with pytest.raises(httpx.RemoteProtocolError):  # as from the provider called directly
            for part in response.iter_raw():
                data += part
    proxy.flush()
    assert response.status_code == 200 and b"response.completed" not in data
    messages = proxy.layer.store.messages("default")
    assert [(m.role, m.content, m.partial) for m in messages] == [
        ("user", "Tell me everything", False),
        ("assistant", "tick 00 tick 01 tick 02 ", True),
    ]


# -- modes, routes, errors --------------------------------------------------------------------


def test_mode_off_forwards_the_body_byte_for_byte_and_stores_nothing(proxy, upstream):
    remember_clara(proxy, "kim")
    raw = json.dumps({"input": QUESTION, "model": MODEL, "instructions": "Be brief."}).encode()
    headers = {
        "content-type": "application/json",
        "x-memory-user-id": "kim",
        "x-memory-mode": "off",
    }
    response = httpx.post(proxy.url + "/responses", content=raw, headers=headers)
    proxy.flush()

    assert response.status_code == 200 and response.headers["x-memory-mode"] == "off"
    assert upstream.requests[-1].body == raw
    assert len(stored(proxy, "kim")) == 2  # the first conversation only


@pytest.mark.parametrize("mode", ["off", "auto"])
def test_the_stream_reaches_the_client_byte_for_byte(proxy, upstream, mode):
    body = {"model": MODEL, "input": "Hello there", "stream": True}
    direct = httpx.post(upstream.url + "/responses", json=body).content
    upstream.reset()  # the same response id again
    with httpx.stream(
        "POST", proxy.url + "/responses", json=body, headers={"x-memory-mode": mode}
    ) as response:
        relayed = response.read()
    assert response.headers["content-type"].startswith("text/event-stream")
    assert relayed == direct


def test_the_user_may_be_named_in_the_path(proxy, upstream):
    with openai.OpenAI(base_url=proxy.root + "/u/lena/v1", api_key="sk", max_retries=0) as client:
        client.responses.create(model=MODEL, input=CLARA)
    proxy.flush()
    assert [content for _, _, content, _ in stored(proxy, "lena")] == [CLARA, "echo: " + CLARA]


BAD_BODIES = [
    ({"model": MODEL, "input": 42}, "input"),
    ({"model": MODEL, "input": [{"role": "robot", "content": "hi"}]}, "input[0]"),
    ({"model": MODEL, "input": [{"role": "user", "content": 7}]}, "input[0]"),
    ({"model": MODEL, "input": ["hi"]}, "input[0]"),
    ({"model": MODEL, "input": [{"type": "function_call", "name": "f"}]}, "input[0]"),
    ({"model": MODEL, "input": [{"type": "function_call_output", "output": "x"}]}, "input[0]"),
    ({"model": MODEL, "input": "hi", "instructions": ["be brief"]}, "instructions"),
    ({"model": MODEL, "input": "hi", "previous_response_id": 3}, "previous_response_id"),
    ({"model": MODEL, "input": "hi", "stream": "yes"}, "stream"),
    ({"model": MODEL, "input": "hi", "conversation": {"name": "x"}}, "conversation"),
    ({"input": "hi"}, "model"),
]


@pytest.mark.parametrize(("body", "param"), BAD_BODIES)
def test_bad_input_is_a_400_in_openais_shape_and_nothing_is_forwarded_or_stored(
    proxy, upstream, body, param
):
    with proxy.client() as client:
        with pytest.raises(openai.BadRequestError) as raised:
            client.responses.create(**body)
    proxy.flush()

    error = raised.value.response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert (error["type"], error["param"]) == ("invalid_request_error", param)
    assert upstream.requests == []
    assert proxy.layer.stats("default").messages == 0


def test_invalid_json_is_a_400(proxy, upstream):
    response = httpx.post(
        proxy.url + "/responses", content=b"{nope", headers={"content-type": "application/json"}
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_json"
    assert upstream.requests == []


def test_a_litellm_route_is_a_400_naming_it_and_nothing_is_stored(make_proxy, upstream):
    route = ModelRoute(model="anthropic/claude-sonnet-4-5", api_key="sk-up")
    proxy = make_proxy(routes={"claude": route})
    with proxy.client() as client:
        with pytest.raises(openai.BadRequestError) as raised:
            client.responses.create(model="claude", input=CLARA)
    proxy.flush()
    assert raised.value.code == "responses_unsupported_route"
    assert "claude" in raised.value.message
    assert upstream.requests == []
    assert proxy.layer.stats("default").messages == 0


def test_a_provider_error_comes_back_as_is_and_nothing_is_stored(proxy, upstream):
    with proxy.client() as client:
        with pytest.raises(openai.RateLimitError) as raised:
            client.responses.create(model="error-429", input=CLARA)
    proxy.flush()
    assert raised.value.response.headers["retry-after"] == "7"
    assert proxy.layer.stats("default").messages == 0


def test_a_failing_recall_forwards_the_client_body_and_is_reported(proxy, upstream):
    remember_clara(proxy, "mia")
    with closing(sqlean.connect(str(proxy.config.db_path), isolation_level=None)) as db:
        db.execute("DROP TABLE chunks")  # the chunk rows every recall reads (FTS5 may not be)
    raw = json.dumps({"model": MODEL, "input": QUESTION, "stream": True}).encode()
    headers = {"content-type": "application/json", "x-memory-user-id": "mia"}

    with httpx.stream("POST", proxy.url + "/responses", content=raw, headers=headers) as response:
        data = response.read()

    assert response.status_code == 200
    assert response.headers["x-memory-error"].startswith("recall failed")
    assert upstream.requests[-1].body == raw
    assert b"event: response.completed" in data
