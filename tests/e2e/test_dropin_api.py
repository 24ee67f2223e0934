"""Drop-in compatibility, third round: what the provider's API takes, moim takes too.

Each test is a case an audit found moim answering differently from the provider called
directly: a request that is valid OpenAI input refused, or one that fits the model's context
window pushed over it by the memory block.
"""

import httpx
import pytest

from memory import count_message_tokens

MODEL = "gpt-4o-mini"


@pytest.mark.parametrize(
    "reference",
    [{"id": "msg_earlier"}, {"id": "msg_earlier", "type": None}],
    ids=["no-type", "type-null"],
)
def test_an_item_reference_without_a_type_reaches_the_provider(proxy, upstream, reference):
    """OpenAI's `ItemReference` is `{"id": …}` with an optional `type` (openai-python's
    `ResponseInputItemParam`); moim read an item without a type as a message and asked for
    its role."""
    with proxy.client() as client:
        client.responses.create(
            model=MODEL,
            input=[reference, {"role": "user", "content": "And then?"}],
            extra_headers={"X-Memory-User-Id": "alice"},
        )
    proxy.flush()

    assert upstream.last_responses_json["input"][0] == reference
    stored = [(m.role, m.content) for m in proxy.layer.store.messages("alice")]
    assert stored == [("user", "And then?"), ("assistant", "echo: And then?")]


# -- the context window -----------------------------------------------------------------------

WINDOW = 400  # the model's context window, as config.yaml's `context_windows` may set it
FACT = {"key": "home", "value": "a flat above the bakery on Rua das Flores", "category": "home"}


def near_the_edge(make_proxy):
    """A proxy whose model has a small window, for a user with a fact to inject."""
    proxy = make_proxy(settings={"context_windows": {MODEL: WINDOW}})
    headers = {"X-Memory-User-Id": "alice"}
    assert httpx.post(proxy.url + "/memory/facts", json=FACT, headers=headers).status_code == 200
    return proxy


def words(tokens):
    """A user message of about `tokens` tokens (" word" is one token in o200k_base)."""
    return [{"role": "user", "content": "word" + " word" * (tokens - 1)}]


def sent_tokens(upstream):
    return count_message_tokens(upstream.last_json["messages"], MODEL)


@pytest.mark.parametrize(
    ("request_tokens", "fields"),
    [(WINDOW - 20, {}), (WINDOW - 100, {"max_tokens": 90}), (250, {"max_completion_tokens": 140})],
    ids=["history", "max_tokens", "max_completion_tokens"],
)
def test_the_block_never_pushes_a_request_that_fits_over_the_window(
    make_proxy, upstream, request_tokens, fields
):
    """Facts go in at every tier, but only in the room the window has left: a provider
    refuses a request whose messages and reserved reply pass the model's window."""
    proxy = near_the_edge(make_proxy)
    messages = words(request_tokens)
    assert count_message_tokens(messages, MODEL) + fields.get("max_tokens", 0) <= WINDOW

    with proxy.client() as client:
        raw = client.chat.completions.with_raw_response.create(
            model=MODEL, messages=messages, extra_headers={"X-Memory-User-Id": "alice"}, **fields
        )

    reserved = max(fields.values(), default=0)
    assert sent_tokens(upstream) + reserved <= WINDOW
    assert upstream.last_json["messages"] == messages
    assert (raw.headers["x-memory-facts-injected"], raw.headers["x-memory-tokens-injected"]) == (
        "0",
        "0",
    )


def test_with_room_left_the_facts_go_in_near_the_edge(make_proxy, upstream):
    proxy = near_the_edge(make_proxy)
    messages = words(WINDOW - 110)

    with proxy.client() as client:
        raw = client.chat.completions.with_raw_response.create(
            model=MODEL, messages=messages, extra_headers={"X-Memory-User-Id": "alice"}
        )

    assert raw.headers["x-memory-tier"] == "3"
    assert raw.headers["x-memory-facts-injected"] == "1"
    assert FACT["value"] in upstream.last_json["messages"][0]["content"]
    assert sent_tokens(upstream) <= WINDOW


def test_a_responses_request_keeps_its_max_output_tokens_free_of_the_block(make_proxy, upstream):
    proxy = near_the_edge(make_proxy)

    with proxy.client() as client:
        raw = client.responses.with_raw_response.create(
            model=MODEL,
            input="word" + " word" * 250,
            max_output_tokens=140,
            extra_headers={"X-Memory-User-Id": "alice"},
        )

    assert raw.headers["x-memory-facts-injected"] == "0"
    assert upstream.last_responses_json["input"] == "word" + " word" * 250
