"""moim remembers every turn: each message once, verbatim, under the right user and session.

CONTRACT.md, "Who and how" and "Memory behaviour": user, session and mode come from headers
with their fallbacks; clients resend their history every turn, yet each message is stored
once; the reply is stored as the client saw it, even when the stream is cut short; a failing
memory layer never stops the chat, and says so in `x-memory-error`.
"""

import json
import time
from contextlib import closing

import httpx
import pytest
import sqlean

from memory.store.transfer import export_messages
from tests.upstream import LONG_REPLY

BLOCK_START = "=== Memory Context ==="
ECHO = "echo: "


def chat(proxy, messages, headers=None, model="gpt-4o-mini", **fields):
    """One non-streamed request through moim with httpx; the response."""
    body = {"model": model, "messages": messages, **fields}
    return httpx.post(proxy.url + "/chat/completions", json=body, headers=headers, timeout=10)


def stored(proxy, user_id="default"):
    """(role, content) of every message stored for a user, in order."""
    return [(m.role, m.content) for m in proxy.layer.store.messages(user_id)]


def payloads(proxy, user_id="default"):
    return [item["payload"] for item in export_messages(proxy.layer.store, user_id)]


def remember_dog(proxy, user_id="default"):
    """Store one telling turn and wait until it is indexed, so a later request recalls it."""
    said = [{"role": "user", "content": "My dog is called Rex and he loves the beach"}]
    assert chat(proxy, said, {"x-memory-user-id": user_id}).status_code == 200
    proxy.flush()


def sqlite(proxy):
    """A separate connection to moim's database, as another process would open it."""
    return closing(sqlean.connect(str(proxy.config.db_path), isolation_level=None))


def wait_until(condition, seconds=5.0):
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.02)


# -- each message once ------------------------------------------------------------------------


def test_thirty_turn_conversation_stores_sixty_messages_in_one_session(proxy, upstream):
    history = []
    sessions = set()
    with proxy.client() as client:
        for turn in range(30):
            history.append({"role": "user", "content": f"Turn {turn}: tell me about topic {turn}"})
            raw = client.chat.completions.with_raw_response.create(
                model="gpt-4o-mini", messages=history
            )
            sessions.add(raw.headers["x-memory-session-id"])
            history.append({"role": "assistant", "content": raw.parse().choices[0].message.content})
    proxy.flush()

    messages = proxy.layer.store.messages("default")
    assert [(m.role, m.content) for m in messages] == [(m["role"], m["content"]) for m in history]
    assert len(messages) == 60
    assert {m.session_id for m in messages} == sessions
    assert len(sessions) == 1
    assert not any(m.partial for m in messages)


def test_resending_the_same_history_stores_nothing_new(proxy, upstream):
    history = [
        {"role": "user", "content": "What's a good name for a cat?"},
        {"role": "assistant", "content": "echo: What's a good name for a cat?"},
        {"role": "user", "content": "And for a dog?"},
    ]
    for _ in range(3):
        assert chat(proxy, history).status_code == 200
    proxy.flush()

    assert stored(proxy) == [(m["role"], m["content"]) for m in history] + [
        ("assistant", "echo: And for a dog?")
    ]


def test_system_prompt_is_stored_once_per_session(proxy, upstream):
    history = [{"role": "system", "content": "You are a terse travel agent."}]
    for question in ("Flights to Oslo?", "Hotels there?", "Trains from Oslo to Bergen?"):
        history.append({"role": "user", "content": question})
        reply = chat(proxy, history).json()["choices"][0]["message"]
        history.append({"role": "assistant", "content": reply["content"]})
    proxy.flush()

    assert stored(proxy) == [(m["role"], m["content"]) for m in history]
    assert [role for role, _ in stored(proxy)].count("system") == 1


def test_a_system_prompt_is_stored_but_never_recalled(proxy, upstream):
    # CONTRACT.md: system prompts are stored but are not recalled as excerpts.
    prompt = "You are Captain Bluebeard, a pirate who loves parrots and buried treasure maps."
    chat(proxy, [{"role": "system", "content": prompt}, {"role": "user", "content": "Ahoy"}])
    proxy.flush()
    question = "Tell me about Captain Bluebeard the pirate, his parrots and treasure maps"

    response = chat(proxy, [{"role": "user", "content": question}])
    found = httpx.get(proxy.root + "/v1/memory/search", params={"q": question}).json()

    assert ("system", prompt) in stored(proxy)
    assert upstream.last_json["messages"] == [{"role": "user", "content": question}]
    assert response.headers["x-memory-chunks-injected"] == "0"
    assert prompt not in [hit["text"] for hit in found["results"]]


def test_identical_user_turns_are_both_stored(proxy, upstream):
    history = [
        {"role": "user", "content": "Shall we book the table for eight?"},
        {"role": "assistant", "content": "echo: Shall we book the table for eight?"},
        {"role": "user", "content": "yes"},
        {"role": "assistant", "content": "echo: yes"},
        {"role": "user", "content": "yes"},
    ]

    chat(proxy, history[:3])
    chat(proxy, history)
    proxy.flush()

    assert stored(proxy) == [(m["role"], m["content"]) for m in history] + [
        ("assistant", "echo: yes")
    ]


# -- verbatim ---------------------------------------------------------------------------------


def test_stored_reply_equals_the_streamed_text(proxy, upstream):
    reply = 'Line one\n  indented — ünïcödé 🎉\n\n<b>html</b> "quoted" \\ trailing  '
    upstream.script.append({"content": reply})
    with proxy.client() as client:
        stream = client.chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": "Say something odd"}],
            stream=True,
        )
        streamed = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    proxy.flush()

    assert streamed == reply
    assert stored(proxy) == [("user", "Say something odd"), ("assistant", reply)]


@pytest.mark.parametrize("stream", [False, True])
def test_a_reply_with_split_or_lone_surrogates_is_stored_as_valid_text(proxy, upstream, stream):
    """Some providers escape a character outside the BMP as a surrogate pair and may split
    the pair across two events, or cut one off: the client gets the bytes as sent, and moim
    stores the pair joined into its character and a lone half as U+FFFD."""
    # seven characters, then a pair the fake's 8-character chunks split in two; then a lone one
    upstream.script.append({"content": "Emoji: \ud83d\ude00 and half \ud83d."})
    body = {
        "model": "gpt-4o-mini",
        "stream": stream,
        "messages": [{"role": "user", "content": "Send an emoji"}],
    }
    response = httpx.post(proxy.url + "/chat/completions", json=body, timeout=10)
    assert response.status_code == 200
    assert b"\\ud83d" in response.content  # relayed as the provider escaped it
    proxy.flush()

    assert stored(proxy) == [
        ("user", "Send an emoji"),
        ("assistant", "Emoji: \U0001f600 and half \ufffd."),
    ]
    assert httpx.get(proxy.root + "/v1/memory/stats").json()["pending"] == 0


def test_tool_results_are_stored(proxy, upstream):
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
    }
    messages = [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": '{"temp_c": 18}'},
    ]

    assert chat(proxy, messages).status_code == 200
    proxy.flush()

    assert stored(proxy) == [
        ("user", "Weather in Paris?"),
        ("assistant", ""),
        ("tool", '{"temp_c": 18}'),
        ("assistant", "echo: Weather in Paris?"),
    ]
    assert payloads(proxy)[1:3] == messages[1:3]


@pytest.mark.parametrize("stream", [False, True])
def test_assistant_tool_call_reply_is_stored_with_its_tool_calls(proxy, upstream, stream):
    with proxy.client() as client:
        response = client.chat.completions.create(
            model="tool-call",
            messages=[{"role": "user", "content": "Weather in Paris?"}],
            stream=stream,
        )
        if stream:
            list(response)
    proxy.flush()

    assert payloads(proxy) == [
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_test_weather",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                }
            ],
        },
    ]


def test_injected_memory_block_is_never_stored(proxy, upstream):
    remember_dog(proxy)
    history = [
        {"role": "system", "content": "You know the user's pets."},
        {"role": "user", "content": "What is my dog called?"},
    ]

    response = chat(proxy, history)
    proxy.flush()

    assert response.headers["x-memory-tokens-injected"] != "0"
    assert upstream.last_json["messages"][1]["content"].startswith(BLOCK_START)
    assert stored(proxy)[2:] == [
        ("system", "You know the user's pets."),
        ("user", "What is my dog called?"),
        ("assistant", "echo: What is my dog called?"),
    ]
    assert not any(BLOCK_START in content for _, content in stored(proxy))
    assert not any(BLOCK_START in json.dumps(p) for p in payloads(proxy))


@pytest.mark.parametrize("placement", ["before_last_user", "system"])
def test_a_block_the_client_sends_back_is_not_stored(make_proxy, upstream, placement):
    proxy = make_proxy(settings={"placement": placement})
    remember_dog(proxy)
    system = "You know the user's pets."
    history = [
        {"role": "system", "content": system},
        {"role": "user", "content": "What is my dog called?"},
    ]
    chat(proxy, history)
    echoed = upstream.last_json["messages"]  # a client that kept what it was sent
    assert BLOCK_START in json.dumps(echoed)

    chat(
        proxy,
        [*echoed, {"role": "assistant", "content": "Rex"}, {"role": "user", "content": "Thanks"}],
    )
    proxy.flush()

    assert not any(BLOCK_START in content for _, content in stored(proxy))
    assert [content for role, content in stored(proxy) if role == "system"] == [system]


# -- who --------------------------------------------------------------------------------------

USER_SOURCES = [  # CONTRACT order: the first present one names the user
    ("header", "X-Memory-User-Id", "u-memory"),
    ("header", "x-sm-user-id", "u-sm"),
    ("header", "X-OpenWebUI-User-Id", "u-openwebui"),
    ("header", "x-litellm-end-user-id", "u-litellm"),
    ("body", "user", "u-body"),
    ("path", None, "u-path"),
]


@pytest.mark.parametrize(
    "first",
    range(len(USER_SOURCES) + 1),
    ids=[name or kind for kind, name, _ in USER_SOURCES] + ["none"],
)
def test_user_id_comes_from_the_first_source_present(proxy, upstream, first):
    present = USER_SOURCES[first:]
    headers = {name: value for kind, name, value in present if kind == "header"}
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Who am I?"}]}
    body |= {name: value for kind, name, value in present if kind == "body"}
    paths = [value for kind, _, value in present if kind == "path"]
    prefix = f"/u/{paths[0]}/v1" if paths else "/v1"

    response = httpx.post(proxy.root + prefix + "/chat/completions", json=body, headers=headers)
    proxy.flush()

    expected = present[0][2] if present else "default"
    assert response.status_code == 200
    assert stored(proxy, expected) == [("user", "Who am I?"), ("assistant", "echo: Who am I?")]
    assert proxy.layer.store.read("SELECT DISTINCT user_id FROM messages") == [(expected,)]


SESSION_SOURCES = [
    ("X-Memory-Session-Id", "chat-memory"),
    ("x-sm-conversation-id", "chat-sm"),
    ("X-OpenWebUI-Chat-Id", "chat-openwebui"),
]


@pytest.mark.parametrize(
    "first", range(len(SESSION_SOURCES)), ids=[name for name, _ in SESSION_SOURCES]
)
def test_session_id_comes_from_the_first_header_present(proxy, upstream, first):
    headers = dict(SESSION_SOURCES[first:])

    response = chat(proxy, [{"role": "user", "content": "Where were we?"}], headers)
    proxy.flush()

    expected = SESSION_SOURCES[first][1]
    assert response.headers["x-memory-session-id"] == expected
    assert {m.session_id for m in proxy.layer.store.messages("default")} == {expected}


def test_derived_session_id_is_stable_across_turns_and_differs_per_opening(proxy, upstream):
    opening = [
        {"role": "system", "content": "Be kind."},
        {"role": "user", "content": "Plan my week"},
    ]
    later = [
        *opening,
        {"role": "assistant", "content": "echo: Plan my week"},
        {"role": "user", "content": "Add a gym day"},
    ]
    other = [
        {"role": "system", "content": "Be kind."},
        {"role": "user", "content": "Plan my month"},
    ]

    first = chat(proxy, opening).headers["x-memory-session-id"]
    second = chat(proxy, later).headers["x-memory-session-id"]
    third = chat(proxy, other).headers["x-memory-session-id"]
    someone_else = chat(proxy, opening, {"x-memory-user-id": "zoe"}).headers["x-memory-session-id"]
    proxy.flush()

    assert first == second
    assert first.startswith("s-")
    assert third != first
    assert someone_else != first
    sessions = [m.session_id for m in proxy.layer.store.messages("default")]
    assert sessions == [first] * 5 + [third] * 3


# -- modes ------------------------------------------------------------------------------------

ASK = [{"role": "user", "content": "What is my dog called?"}]


def test_mode_read_injects_and_stores_nothing(proxy, upstream):
    remember_dog(proxy)
    before = stored(proxy)

    response = chat(proxy, ASK, {"x-memory-mode": "read"})
    proxy.flush()

    assert response.headers["x-memory-mode"] == "read"
    assert int(response.headers["x-memory-chunks-injected"]) > 0
    assert upstream.last_json["messages"][0]["content"].startswith(BLOCK_START)
    assert stored(proxy) == before


def test_mode_write_stores_and_injects_nothing(proxy, upstream):
    remember_dog(proxy)

    response = chat(proxy, ASK, {"x-memory-mode": "WRITE"})
    proxy.flush()

    assert response.headers["x-memory-mode"] == "write"
    assert response.headers["x-memory-tokens-injected"] == "0"
    assert upstream.last_json["messages"] == ASK
    assert stored(proxy)[2:] == [
        ("user", "What is my dog called?"),
        ("assistant", "echo: What is my dog called?"),
    ]


def test_mode_off_injects_and_stores_nothing(proxy, upstream):
    remember_dog(proxy)
    before = stored(proxy)

    response = chat(proxy, ASK, {"x-memory-mode": "off"})
    proxy.flush()

    assert response.headers["x-memory-mode"] == "off"
    assert upstream.last_json["messages"] == ASK
    assert stored(proxy) == before


def test_mode_auto_injects_and_stores(proxy, upstream):
    remember_dog(proxy)

    response = chat(proxy, ASK)
    proxy.flush()

    assert response.headers["x-memory-mode"] == "auto"
    assert upstream.last_json["messages"][0]["content"].startswith(BLOCK_START)
    assert stored(proxy)[2:] == [
        ("user", "What is my dog called?"),
        ("assistant", "echo: What is my dog called?"),
    ]


def test_invalid_mode_is_a_400_in_openais_shape(proxy, upstream):
    response = chat(proxy, ASK, {"x-memory-mode": "sometimes"})
    proxy.flush()

    assert response.status_code == 400
    assert response.json() == {
        "error": {
            "message": "X-Memory-Mode must be one of auto, read, write, off",
            "type": "invalid_request_error",
            "param": "X-Memory-Mode",
            "code": None,
        }
    }
    assert upstream.requests == []
    assert stored(proxy) == []


# -- partial replies --------------------------------------------------------------------------


def test_client_disconnect_mid_stream_stores_the_partial_reply(proxy, upstream):
    body = {
        "model": "slow",
        "stream": True,
        "messages": [{"role": "user", "content": "Count to forty, slowly"}],
    }

    with httpx.Client(timeout=10) as http:
        with http.stream("POST", proxy.url + "/chat/completions", json=body) as response:
            chunks = response.iter_raw()
            received = [next(chunks), next(chunks)]
    wait_until(lambda: upstream.disconnects == 1)
    proxy.flush()

    assert all(chunk.startswith(b"data: ") for chunk in received)
    messages = proxy.layer.store.messages("default")
    assert [(m.role, m.partial) for m in messages] == [("user", False), ("assistant", True)]
    partial = messages[1].content
    assert partial and LONG_REPLY.startswith(partial) and partial != LONG_REPLY


def test_broken_upstream_stream_breaks_off_the_client_stream_and_stores_the_part(proxy, upstream):
    body = {
        "model": "broken",
        "stream": True,
        "messages": [{"role": "user", "content": "Tell me everything"}],
    }

    started = time.monotonic()
    data = b""
    with httpx.stream("POST", proxy.url + "/chat/completions", json=body, timeout=10) as response:
        with pytest.raises(httpx.RemoteProtocolError):  # as from the provider called directly
            for part in response.iter_raw():
                data += part
    elapsed = time.monotonic() - started
    proxy.flush()

    assert response.status_code == 200
    assert elapsed < 5
    assert b"[DONE]" not in data
    text = "".join(
        e["choices"][0]["delta"].get("content") or ""
        for e in (
            json.loads(line[6:]) for line in data.decode().splitlines() if line.startswith("data: ")
        )
    )
    assert text == "tick 00 tick 01 tick 02 "
    messages = proxy.layer.store.messages("default")
    assert [(m.role, m.content, m.partial) for m in messages] == [
        ("user", "Tell me everything", False),
        ("assistant", text, True),
    ]


def test_sdk_stream_from_a_broken_upstream_raises_after_the_part(proxy, upstream):
    said = []
    with proxy.client(timeout=5) as client:
        stream = client.chat.completions.create(
            model="broken", messages=[{"role": "user", "content": "Go on"}], stream=True
        )
        with pytest.raises(httpx.RemoteProtocolError):  # as from the provider called directly
            for chunk in stream:
                said.append(chunk.choices[0].delta.content or "" if chunk.choices else "")

    assert "".join(said) == "tick 00 tick 01 tick 02 "


# -- failing memory ---------------------------------------------------------------------------


def test_a_failing_store_does_not_stop_the_chat_and_its_turns_are_kept_until_it_works(
    proxy, upstream
):
    with sqlite(proxy) as db:
        db.execute(
            "CREATE TRIGGER fail_insert BEFORE INSERT ON messages "
            "BEGIN SELECT RAISE(ABORT, 'disk full'); END"
        )
    first = [{"role": "user", "content": "Remember that my sister lives in Porto"}]

    answered = chat(proxy, first)
    wait_until(lambda: httpx.get(proxy.root + "/health/readiness").status_code == 503)
    other = chat(proxy, [{"role": "user", "content": "Another question"}])
    readiness = httpx.get(proxy.root + "/health/readiness").json()

    assert answered.status_code == 200
    assert answered.json()["choices"][0]["message"]["content"] == ECHO + first[0]["content"]
    assert "x-memory-error" not in answered.headers  # journaled: stored once the store works
    assert other.status_code == 200
    assert other.json()["choices"][0]["message"]["content"] == "echo: Another question"
    assert "x-memory-error" not in other.headers  # another turn's failure is not this one's
    assert readiness["status"] == "failing" and "store failing" in readiness["writer"]
    assert stored(proxy) == []

    with sqlite(proxy) as db:
        db.execute("DROP TRIGGER fail_insert")
    history = [
        *first,
        {"role": "assistant", "content": ECHO + first[0]["content"]},
        {"role": "user", "content": "Where does she live?"},
    ]
    assert "x-memory-error" not in chat(proxy, history).headers
    proxy.flush()  # the two held turns first, then this one
    healthy = chat(proxy, [{"role": "user", "content": "All good now?"}])
    proxy.flush()

    assert "x-memory-error" not in healthy.headers
    assert httpx.get(proxy.root + "/health/readiness").json()["status"] == "ok"
    sessions: dict[str, list[tuple[str, str]]] = {}
    for message in proxy.layer.store.messages("default"):
        sessions.setdefault(message.session_id, []).append((message.role, message.content))
    assert sorted(sessions.values()) == sorted(
        [
            [(m["role"], m["content"]) for m in history]
            + [("assistant", "echo: Where does she live?")],
            [("user", "Another question"), ("assistant", "echo: Another question")],
            [("user", "All good now?"), ("assistant", "echo: All good now?")],
        ]
    )


def test_a_failing_recall_forwards_the_client_body_and_is_reported(proxy, upstream):
    remember_dog(proxy)
    with sqlite(proxy) as db:
        db.execute("DROP TABLE chunks")  # the chunk rows every recall reads (FTS5 may not be)
    raw = json.dumps(
        {
            "model": "gpt-4o-mini",
            "messages": [{"role": "user", "content": "What is my dog called?"}],
        }
    )

    response = httpx.post(
        proxy.url + "/chat/completions",
        content=raw.encode(),
        headers={"content-type": "application/json"},
    )

    assert response.status_code == 200
    assert response.json()["choices"][0]["message"]["content"] == "echo: What is my dog called?"
    assert response.headers["x-memory-error"].startswith("recall failed")
    assert response.headers["x-memory-tokens-injected"] == "0"
    assert upstream.requests[-1].body == raw.encode()


def test_a_failing_recall_still_streams(proxy, upstream):
    remember_dog(proxy)  # with nothing stored, recall skips the searches and cannot fail
    with sqlite(proxy) as db:
        db.execute("DROP TABLE chunks")  # the chunk rows every recall reads (FTS5 may not be)
    body = {
        "model": "gpt-4o-mini",
        "stream": True,
        "messages": [{"role": "user", "content": "Where does my sister live nowadays?"}],
    }

    with httpx.stream("POST", proxy.url + "/chat/completions", json=body) as response:
        data = response.read()

    assert response.status_code == 200
    assert response.headers["x-memory-error"].startswith("recall failed")
    assert data.endswith(b"data: [DONE]\n\n")
