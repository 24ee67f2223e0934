"""Drop-in compatibility, the wire: what clients other than openai-python send, and how.

Each test is a case an audit of the HTTP layer found moim handling otherwise than the
provider called directly: bytes that are not what the client sent, or a turn not stored as
said.
"""

import httpx
import pytest

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
