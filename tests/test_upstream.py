"""The fake upstream itself, driven by the official openai SDK pointed straight at it."""

import json
import time

import httpx
import openai
import pytest

from tests.upstream import LONG_REPLY
from tests.upstream_api import embedding_of

HI = [{"role": "user", "content": "hi"}]


@pytest.fixture
def client(upstream):
    # No retries: the SDK would otherwise sleep for the 429's Retry-After: 7 and try again.
    with openai.OpenAI(base_url=upstream.url, api_key="sk-test", max_retries=0) as client:
        yield client


def stream_events(upstream, body):
    """The raw ``data:`` lines of a streamed chat completion, read with plain httpx."""
    with httpx.Client() as http:
        with http.stream("POST", upstream.url + "/chat/completions", json=body) as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            return [line for line in response.iter_lines() if line]


def test_non_streaming_reply_echoes_last_user_message(client):
    parts = [{"type": "text", "text": "hello "}, {"type": "text", "text": "there"}]
    messages = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": parts},
    ]
    completion = client.chat.completions.create(model="gpt-4o-mini", messages=messages)
    assert completion.model_dump(exclude_none=True) == {
        "id": "chatcmpl-test-1",
        "object": "chat.completion",
        "created": 1700000000,
        "model": "gpt-4o-mini",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "echo: hello there"},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 8, "completion_tokens": 5, "total_tokens": 13},
        "system_fingerprint": "fp_test",
    }


@pytest.mark.parametrize("part", [None, "hi", {"type": "text", "text": 5}])
def test_a_part_a_client_got_wrong_counts_as_no_text(upstream, part):
    """The stand-in answers malformed parts (a client's bug) instead of failing with a 500, so
    a test sees what moim did with them, not the stand-in's crash."""
    content = [part, {"type": "text", "text": "hello"}]
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": content}]}
    response = httpx.post(upstream.url + "/chat/completions", json=body)
    assert response.status_code == 200
    assert response.json()["choices"][0]["message"]["content"] == "echo: hello"


def test_echo_is_cut_to_200_characters(client):
    messages = [{"role": "user", "content": "x" * 500}]
    completion = client.chat.completions.create(model="gpt-4o-mini", messages=messages)
    assert completion.choices[0].message.content == "echo: " + "x" * 194


def test_streaming_chunks_concatenate_to_the_echo(client):
    messages = [{"role": "user", "content": "tell me something longer"}]
    with client.chat.completions.create(
        model="gpt-4o-mini", messages=messages, stream=True
    ) as stream:
        chunks = list(stream)
    assert [c.choices[0].delta.content for c in chunks] == [
        "",
        "echo: te",
        "ll me so",
        "mething ",
        "longer",
        None,
    ]
    assert chunks[0].choices[0].delta.role == "assistant"
    assert [c.choices[0].finish_reason for c in chunks] == [None] * 5 + ["stop"]
    assert {c.id for c in chunks} == {"chatcmpl-test-1"}
    assert [c.usage for c in chunks] == [None] * 6


def test_stream_ends_with_usage_chunk_when_include_usage(client):
    with client.chat.completions.create(
        model="gpt-4o-mini", messages=HI, stream=True, stream_options={"include_usage": True}
    ) as stream:
        chunks = list(stream)
    assert chunks[-1].choices == []
    assert chunks[-1].usage.model_dump(exclude_none=True) == {
        "prompt_tokens": 1,
        "completion_tokens": 2,
        "total_tokens": 3,
    }
    assert [c.usage for c in chunks[:-1]] == [None, None, None]


def test_stream_is_raw_sse_events_ending_with_done(upstream):
    events = stream_events(upstream, {"model": "gpt-4o-mini", "messages": HI, "stream": True})
    assert events[-1] == "data: [DONE]"
    assert [json.loads(e.removeprefix("data: "))["choices"] for e in events[:-1]] == [
        [{"index": 0, "delta": d, "logprobs": None, "finish_reason": f}]
        for d, f in [
            ({"role": "assistant", "content": ""}, None),
            ({"content": "echo: hi"}, None),
            ({}, "stop"),
        ]
    ]


def test_tool_call_non_streaming(client):
    completion = client.chat.completions.create(model="tool-call", messages=HI)
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    assert [c.model_dump() for c in choice.message.tool_calls] == [
        {
            "id": "call_test_weather",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
        }
    ]


def test_tool_call_stream_sends_name_first_then_argument_pieces(client):
    with client.chat.completions.create(model="tool-call", messages=HI, stream=True) as stream:
        chunks = list(stream)
    calls = [c.choices[0].delta.tool_calls[0] for c in chunks if c.choices[0].delta.tool_calls]
    assert [(c.index, c.id, c.function.name) for c in calls] == [
        (0, "call_test_weather", "get_weather"),
        (0, None, None),
        (0, None, None),
    ]
    assert [c.function.arguments for c in calls] == ["", '{"city":', '"Paris"}']
    assert json.loads("".join(c.function.arguments for c in calls)) == {"city": "Paris"}
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


@pytest.mark.parametrize(
    ("model", "error", "status"),
    [
        ("error-400", openai.BadRequestError, 400),
        ("error-401", openai.AuthenticationError, 401),
        ("error-429", openai.RateLimitError, 429),
        ("error-500", openai.InternalServerError, 500),
    ],
)
def test_error_models_return_openai_shaped_errors(client, model, error, status):
    with pytest.raises(error) as caught:
        client.chat.completions.create(model=model, messages=HI)
    assert caught.value.status_code == status
    assert set(caught.value.body) == {"message", "type", "param", "code"}


def test_429_carries_retry_after_and_message(client):
    with pytest.raises(openai.RateLimitError) as caught:
        client.chat.completions.create(model="error-429", messages=HI)
    assert caught.value.response.headers["retry-after"] == "7"
    assert caught.value.body == {
        "message": "Rate limit reached (test).",
        "type": "requests",
        "param": None,
        "code": "rate_limit_exceeded",
    }
    assert "Rate limit reached (test)." in str(caught.value)


def test_logprobs_model_includes_logprobs(client):
    completion = client.chat.completions.create(model="logprobs", messages=HI)
    token = {"token": "echo: hi", "logprob": -0.5, "bytes": list(b"echo: hi"), "top_logprobs": []}
    assert completion.choices[0].logprobs.model_dump() == {"content": [token], "refusal": None}
    with client.chat.completions.create(model="logprobs", messages=HI, stream=True) as stream:
        streamed = [c.choices[0].logprobs for c in stream if c.choices[0].logprobs]
    assert [lp.model_dump() for lp in streamed] == [{"content": [token], "refusal": None}]


def test_script_is_consumed_in_order(client, upstream):
    upstream.script.extend(
        [
            {"content": "first"},
            {"tool_calls": [{"id": "call_1", "name": "lookup", "arguments": '{"q":"moim"}'}]},
            {"status": 503, "body": {"error": {"message": "overloaded", "type": "server_error"}}},
        ]
    )
    first = client.chat.completions.create(model="gpt-4o-mini", messages=HI)
    with client.chat.completions.create(model="gpt-4o-mini", messages=HI, stream=True) as stream:
        calls = [c.choices[0].delta.tool_calls[0] for c in stream if c.choices[0].delta.tool_calls]
    with pytest.raises(openai.InternalServerError) as caught:
        client.chat.completions.create(model="gpt-4o-mini", messages=HI)
    after = client.chat.completions.create(model="gpt-4o-mini", messages=HI)

    assert first.choices[0].message.content == "first"
    assert [(c.id, c.function.name) for c in calls] == [("call_1", "lookup")] + [(None, None)] * 2
    assert "".join(c.function.arguments for c in calls) == '{"q":"moim"}'
    assert caught.value.status_code == 503
    assert caught.value.body == {"message": "overloaded", "type": "server_error"}
    assert after.choices[0].message.content == "echo: hi"
    assert upstream.script == []


def test_requests_are_recorded_with_exact_body(client, upstream):
    client.chat.completions.create(model="gpt-4o-mini", messages=HI, temperature=0.5, user="u1")
    client.models.list()
    chat, models = upstream.requests
    assert (chat.method, chat.path) == ("POST", "/v1/chat/completions")
    assert chat.json == {"model": "gpt-4o-mini", "messages": HI, "temperature": 0.5, "user": "u1"}
    assert json.loads(chat.body) == chat.json
    assert chat.headers["authorization"] == "Bearer sk-test"
    assert chat.headers["content-type"] == "application/json"
    assert upstream.last_json == chat.json
    assert (models.method, models.path, models.body, models.json) == (
        "GET",
        "/v1/models",
        b"",
        None,
    )


def test_models_lists_gpt_4o_mini_first(client):
    models = client.models.list()
    assert models.data[0].model_dump() == {
        "id": "gpt-4o-mini",
        "object": "model",
        "created": 1700000000,
        "owned_by": "test",
    }


def test_unknown_path_is_recorded_and_404(upstream):
    with httpx.Client() as http:
        response = http.delete(upstream.url + "/nowhere", headers={"x-probe": "1"})
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "unknown_url"
    [recorded] = upstream.requests
    assert (recorded.method, recorded.path) == ("DELETE", "/v1/nowhere")
    assert recorded.headers["x-probe"] == "1"


def test_broken_stream_is_cut_after_three_chunks(client):
    started = time.monotonic()
    received = []
    with pytest.raises(httpx.RemoteProtocolError):
        with client.chat.completions.create(model="broken", messages=HI, stream=True) as stream:
            for chunk in stream:
                received.append(chunk.choices[0].delta.content)
    assert received == ["", "tick 00 ", "tick 01 ", "tick 02 "]
    assert time.monotonic() - started < 5


def test_broken_non_streaming_reply_is_cut(client):
    with pytest.raises(openai.APIConnectionError):
        client.chat.completions.create(model="broken", messages=HI)


def test_slow_stream_counts_client_disconnect(client, upstream):
    with client.chat.completions.create(model="slow", messages=HI, stream=True) as stream:
        first = [next(stream).choices[0].delta.content for _ in range(3)]
    assert first == ["", "tick 00 ", "tick 01 "]
    deadline = time.monotonic() + 2
    while upstream.disconnects == 0 and time.monotonic() < deadline:
        time.sleep(0.005)
    assert upstream.disconnects == 1


def test_stream_read_to_the_end_is_not_a_disconnect(client, upstream):
    with client.chat.completions.create(model="gpt-4o-mini", messages=HI, stream=True) as stream:
        list(stream)
    client.models.list()  # served on the same connection, so the stream's handler has finished
    assert upstream.disconnects == 0


def test_slow_reply_is_forty_chunks(upstream):
    upstream.script.append({"content": LONG_REPLY})  # the slow model's text without its delay
    events = stream_events(upstream, {"model": "slow", "messages": HI, "stream": True})
    deltas = [json.loads(e.removeprefix("data: "))["choices"][0]["delta"] for e in events[:-1]]
    assert [d["content"] for d in deltas[1:-1]] == [f"tick {i:02d} " for i in range(40)]


def test_server_sockets_have_tcp_nodelay(client, upstream):
    client.chat.completions.create(model="gpt-4o-mini", messages=HI)
    client.models.list()
    assert [r.tcp_nodelay for r in upstream.requests] == [True, True]


# -- the endpoints of tests/upstream_api.py -----------------------------------------------------


def test_embeddings_are_deterministic_floats_or_base64(client):
    floats = client.embeddings.create(model="e", input=["a", "b"], encoding_format="float")
    decoded = client.embeddings.create(model="e", input=[[1, 2, 3]])  # the SDK asks for base64
    assert [d.embedding for d in floats.data] == [embedding_of("a"), embedding_of("b")]
    assert decoded.data[0].embedding == embedding_of([1, 2, 3])
    assert client.embeddings.create(model="e", input="a", dimensions=3).data[0].embedding == (
        embedding_of("a", 3)
    )


def test_legacy_completions_echo_the_prompt_streamed_or_not(client):
    whole = client.completions.create(model="gpt-4o-mini", prompt="Hello there")
    pieces = client.completions.create(model="gpt-4o-mini", prompt="Hello there", stream=True)
    assert whole.choices[0].text == "echo: Hello there"
    assert [p.choices[0].text for p in pieces] == ["echo: He", "llo ther", "e"]


def test_moderations_flag_the_word_forbidden(client):
    result = client.moderations.create(input=["fine", "a forbidden thing"])
    assert [r.flagged for r in result.results] == [False, True]


def test_files_upload_list_download_delete(client, upstream):
    uploaded = client.files.create(file=("a.jsonl", b"\x00\x01{}\n"), purpose="batch")
    assert client.files.content(uploaded.id).read() == b"\x00\x01{}\n"
    assert [f.id for f in client.files.list(purpose="batch").data] == [uploaded.id]
    assert client.files.list(purpose="assistants").data == []
    assert upstream.requests[-1].query == "purpose=assistants"
    assert client.files.delete(uploaded.id).deleted
    with pytest.raises(openai.NotFoundError):
        client.files.retrieve(uploaded.id)


def test_speech_is_every_byte_value_then_the_input(client):
    audio = client.audio.speech.create(model="tts-1", voice="alloy", input="hé")
    assert audio.content == bytes(range(256)) + "hé".encode()
    assert audio.response.headers["content-type"] == "audio/mpeg"


def test_retrieve_model_or_404(client):
    assert client.models.retrieve("gpt-4o").owned_by == "test"
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("nope")


def test_raw_path_and_query_are_recorded(upstream):
    httpx.get(upstream.url + "/files/a%2Fb?x=%20y")
    [recorded] = upstream.requests
    assert (recorded.path, recorded.raw_path, recorded.query) == (
        "/v1/files/a/b",
        "/v1/files/a%2Fb",
        "x=%20y",
    )
