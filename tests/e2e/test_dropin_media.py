"""An image, audio clip or file sent inline reaches the provider whole; memory keeps its text.

The bytes of a media part were never recalled, indexed or embedded, but they were journaled
and stored with the message (its `payload`), on every turn that sent them anew: a 3 MB image
became 3 MB of memory (memory/ingest/media.py).
"""

import base64
import json
import os

import httpx
import pytest

MODEL = "gpt-4o-mini"
ALICE = {"X-Memory-User-Id": "alice"}
IMAGE = "data:image/png;base64," + base64.b64encode(os.urandom(2_000_000)).decode()
AUDIO = base64.b64encode(os.urandom(200_000)).decode()
PDF = "data:application/pdf;base64," + base64.b64encode(os.urandom(200_000)).decode()
LINKED = "https://example.com/cat.png"
QUESTION = "Which of these shows my red kayak?"
CHAT_PARTS = [
    {"type": "text", "text": QUESTION},
    {"type": "image_url", "image_url": {"url": IMAGE, "detail": "high"}},
    {"type": "image_url", "image_url": {"url": LINKED}},
    {"type": "input_audio", "input_audio": {"data": AUDIO, "format": "wav"}},
    {"type": "file", "file": {"filename": "kayak.pdf", "file_data": PDF}},
    {"type": "file", "file": {"file_id": "file-abc123"}},
]
RESPONSES_PARTS = [
    {"type": "input_text", "text": QUESTION},
    {"type": "input_image", "image_url": IMAGE, "detail": "auto"},
    {"type": "input_image", "image_url": LINKED, "detail": "low"},
    {"type": "input_file", "filename": "kayak.pdf", "file_data": PDF},
]


def stored_user_message(proxy):
    """The user's one stored user message, as `GET /v1/memory/export` gives it."""
    proxy.flush()
    exported = httpx.get(proxy.url + "/memory/export", headers=ALICE, timeout=60)
    items = [json.loads(line) for line in exported.text.splitlines()]
    users = [item for item in items if item.get("role") == "user"]
    assert len(users) == 1
    assert len(exported.content) < 10_000  # none of the megabytes sent
    return users[0]


@pytest.mark.parametrize("stream", [False, True])
def test_a_chat_messages_inline_media_reach_the_provider_but_are_not_kept(proxy, upstream, stream):
    messages = [{"role": "user", "content": CHAT_PARTS}]
    with proxy.client() as client:
        reply = client.chat.completions.create(
            model=MODEL, messages=messages, stream=stream, extra_headers=ALICE
        )
        if stream:
            list(reply)
    assert upstream.last_json["messages"] == messages  # the provider got every byte

    stored = stored_user_message(proxy)
    assert stored["content"] == QUESTION
    parts = stored["payload"]["content"]
    assert parts[0] == CHAT_PARTS[0]
    assert parts[1] == {
        "type": "image_url",
        "image_url": {
            "url": f"[image/png, {len(IMAGE)} characters, not kept by moim]",
            "detail": "high",
        },
    }
    assert parts[2] == CHAT_PARTS[2]  # a link is no data
    assert parts[3]["input_audio"] == {
        "data": f"[inline data, {len(AUDIO)} characters, not kept by moim]",
        "format": "wav",
    }
    assert parts[4]["file"] == {
        "filename": "kayak.pdf",
        "file_data": f"[application/pdf, {len(PDF)} characters, not kept by moim]",
    }
    assert parts[5] == CHAT_PARTS[5]


@pytest.mark.parametrize("stream", [False, True])
def test_a_responses_requests_inline_media_reach_the_provider_but_are_not_kept(
    proxy, upstream, stream
):
    items = [{"role": "user", "content": RESPONSES_PARTS}]
    with proxy.client() as client:
        reply = client.responses.create(
            model=MODEL, input=items, stream=stream, extra_headers=ALICE
        )
        if stream:
            list(reply)
    assert upstream.last_responses_json["input"] == items

    stored = stored_user_message(proxy)
    assert stored["content"] == QUESTION
    parts = stored["payload"]["content"]
    assert parts[0] == RESPONSES_PARTS[0]
    assert parts[1] == {
        "type": "input_image",
        "image_url": f"[image/png, {len(IMAGE)} characters, not kept by moim]",
        "detail": "auto",
    }
    assert parts[2] == RESPONSES_PARTS[2]
    assert parts[3] == {
        "type": "input_file",
        "filename": "kayak.pdf",
        "file_data": f"[application/pdf, {len(PDF)} characters, not kept by moim]",
    }
