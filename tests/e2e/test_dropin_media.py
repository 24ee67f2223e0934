"""An image, audio clip or file sent inline reaches the provider whole; memory keeps its text.

The bytes of a media part were never recalled, indexed or embedded, but they were journaled
and stored with the message (its `payload`), on every turn that sent them anew: a 3 MB image
became 3 MB of memory (memory/ingest/media.py).
"""

import base64
import hashlib
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


def stored_messages(proxy):
    """The user's stored messages, as `GET /v1/memory/export` gives them."""
    proxy.flush()
    exported = httpx.get(proxy.url + "/memory/export", headers=ALICE, timeout=60)
    assert len(exported.content) < 10_000  # none of the megabytes sent
    items = [json.loads(line) for line in exported.text.splitlines()]
    return [item for item in items if item.get("role") in ("user", "assistant")]


def stored_user_message(proxy):
    """The user's one stored user message."""
    users = [item for item in stored_messages(proxy) if item["role"] == "user"]
    assert len(users) == 1
    return users[0]


def noted(data, kind):
    """The note moim stores in place of inline data (memory/ingest/media.py)."""
    digest = hashlib.sha256(data.encode()).hexdigest()[:16]
    return f"[{kind}, {len(data)} characters, sha256 {digest}, not kept by moim]"


def ask_about(image):
    return [
        {"type": "text", "text": "Describe this image."},
        {"type": "image_url", "image_url": {"url": image}},
    ]


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
            "url": noted(IMAGE, "image/png"),
            "detail": "high",
        },
    }
    assert parts[2] == CHAT_PARTS[2]  # a link is no data
    assert parts[3]["input_audio"] == {
        "data": noted(AUDIO, "inline data"),
        "format": "wav",
    }
    assert parts[4]["file"] == {
        "filename": "kayak.pdf",
        "file_data": noted(PDF, "application/pdf"),
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
        "image_url": noted(IMAGE, "image/png"),
        "detail": "auto",
    }
    assert parts[2] == RESPONSES_PARTS[2]
    assert parts[3] == {
        "type": "input_file",
        "filename": "kayak.pdf",
        "file_data": noted(PDF, "application/pdf"),
    }


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_one_shot_questions_about_two_images_are_two_conversations_each_stored(proxy, api):
    """The same words with another image are another message, in another derived session:
    read as text only, the second question was taken as stored already, and its reply filed
    under the first question."""
    other = "data:image/png;base64," + base64.b64encode(os.urandom(3_000)).decode()
    sessions = []
    with proxy.client() as client:
        for image in (IMAGE, other):
            if api == "chat":
                raw = client.chat.completions.with_raw_response.create(
                    model=MODEL,
                    messages=[{"role": "user", "content": ask_about(image)}],
                    extra_headers=ALICE,
                )
            else:
                parts = [
                    {"type": "input_text", "text": "Describe this image."},
                    {"type": "input_image", "image_url": image, "detail": "auto"},
                ]
                raw = client.responses.with_raw_response.create(
                    model=MODEL, input=[{"role": "user", "content": parts}], extra_headers=ALICE
                )
            sessions.append(raw.headers["x-memory-session-id"])
    assert sessions[0] != sessions[1]

    stored = stored_messages(proxy)
    users = [item for item in stored if item["role"] == "user"]
    assert [item["session_id"] for item in users] == sessions
    notes = [item["payload"]["content"][1]["image_url"] for item in users]
    if api == "chat":
        notes = [note["url"] for note in notes]
    assert notes == [noted(IMAGE, "image/png"), noted(other, "image/png")]
    assert sorted(item["session_id"] for item in stored if item["role"] == "assistant") == sorted(
        sessions
    )


def test_a_conversation_resending_its_image_stores_each_message_once(proxy):
    """The stored note's fingerprint is the resent image's: the history sent again on every
    turn, image and all, is the conversation stored, not a new one."""
    history = [{"role": "user", "content": ask_about(IMAGE)}]
    sessions = set()
    with proxy.client() as client:
        for follow_up in ("What colour is it?", "Thanks!", None):
            raw = client.chat.completions.with_raw_response.create(
                model=MODEL, messages=history, extra_headers=ALICE
            )
            sessions.add(raw.headers["x-memory-session-id"])
            history.append({"role": "assistant", "content": raw.parse().choices[0].message.content})
            if follow_up is not None:
                history.append({"role": "user", "content": follow_up})
            proxy.flush()  # each turn stored before the next resends it
    assert len(sessions) == 1

    stored = stored_messages(proxy)
    assert [item["role"] for item in stored] == ["user", "assistant"] * 3
    assert stored[0]["payload"]["content"][1]["image_url"]["url"] == noted(IMAGE, "image/png")
