"""The shortest path through moim: a reply arrives, the turn is stored, and later recalled."""

import pytest

pytestmark = pytest.mark.both_backends


def test_a_fact_said_once_is_recalled_in_a_new_conversation(proxy, upstream):
    with proxy.client() as client:
        client.chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": "My dog is called Rex and he loves the beach"}],
        )
        proxy.flush()
        client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "What is my dog's name?"}]
        )
    system = upstream.last_json["messages"][0]
    assert system["role"] == "system"
    assert "My dog is called Rex" in system["content"]
