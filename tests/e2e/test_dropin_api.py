"""Drop-in compatibility, third round: what the provider's API takes, moim takes too.

Each test is a case an audit found moim answering differently from the provider called
directly: a request that is valid OpenAI input refused, or one that fits the model's context
window pushed over it by the memory block.
"""

import pytest

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
