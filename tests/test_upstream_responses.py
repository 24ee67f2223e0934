"""The fake upstream's ``/v1/responses``, driven by the official openai SDK pointed straight at it.

The SDK parses both the JSON and the event stream into its own types, so these pin that the
stand-in speaks the Responses API as a client reads it.
"""

import httpx
import openai
import pytest

from tests.upstream import WEATHER_CALL


@pytest.fixture
def client(upstream):
    with openai.OpenAI(base_url=upstream.url, api_key="sk-test", max_retries=0) as client:
        yield client


def test_a_response_echoes_the_last_user_message(client, upstream):
    items = [
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": [{"type": "input_text", "text": "second"}]},
    ]
    response = client.responses.create(model="gpt-4o-mini", instructions="Be brief.", input=items)
    assert (response.id, response.status, response.output_text) == (
        "resp_test_1",
        "completed",
        "echo: second",
    )
    assert response.instructions == "Be brief."
    assert response.usage.total_tokens == response.usage.input_tokens + 3
    assert upstream.last_responses_json["input"] == items


def test_a_string_input_is_the_user_message(client):
    assert client.responses.create(model="gpt-4o-mini", input="hi").output_text == "echo: hi"


def test_the_stream_is_the_api_event_sequence(client):
    stream = client.responses.create(model="gpt-4o-mini", input="hello there", stream=True)
    events = list(stream)
    kinds = [event.type for event in events]
    assert kinds[:5] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
    ]
    assert kinds[-4:] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert deltas == "echo: hello there" == events[-1].response.output_text
    assert [e.sequence_number for e in events] == list(range(len(events)))


def test_a_tool_call_is_a_function_call_item(client):
    stream = client.responses.create(model="tool-call", input="weather?", stream=True)
    events = list(stream)
    done = events[-1].response.output
    assert [(i.type, i.call_id, i.name, i.arguments) for i in done] == [
        ("function_call", WEATHER_CALL["id"], "get_weather", WEATHER_CALL["arguments"])
    ]
    pieces = [e.delta for e in events if e.type == "response.function_call_arguments.delta"]
    assert "".join(pieces) == WEATHER_CALL["arguments"]


def test_previous_response_id_must_be_one_it_gave_out(client):
    first = client.responses.create(model="gpt-4o-mini", input="one")
    second = client.responses.create(
        model="gpt-4o-mini", input="two", previous_response_id=first.id
    )
    assert second.previous_response_id == first.id
    with pytest.raises(openai.BadRequestError) as raised:
        client.responses.create(model="gpt-4o-mini", input="x", previous_response_id="resp_nope")
    assert raised.value.code == "previous_response_not_found"


def test_a_broken_stream_stops_after_three_deltas(upstream):
    body = {"model": "broken", "input": "go", "stream": True}
    received = []
    with httpx.stream("POST", upstream.url + "/responses", json=body) as response:
        with pytest.raises(httpx.RemoteProtocolError):
            for data in response.iter_raw():
                received.append(data)
    kinds = [line for line in b"".join(received).decode().split("\n") if line.startswith("event:")]
    assert kinds[-1] == "event: response.output_text.delta"
    assert len(kinds) == 4 + 3
