"""Drop-in compatibility, the wire: what clients other than openai-python send, and how.

Each test is a case an audit of the HTTP layer found moim handling otherwise than the
provider called directly: bytes that are not what the client sent, or a turn not stored as
said.
"""

import json
import socket

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
