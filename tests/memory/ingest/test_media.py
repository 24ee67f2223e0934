"""Inline media's bytes are left out of what memory keeps; everything else of a message stays."""

import hashlib

from memory import content_hash, media_fingerprints, without_inline_data

PNG = "data:image/png;base64,iVBORw0KGgo="


def note(data, kind):
    digest = hashlib.sha256(data.encode()).hexdigest()[:16]
    return f"[{kind}, {len(data)} characters, sha256 {digest}, not kept by moim]"


def test_a_message_without_parts_is_the_same_object():
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": None}]
    kept = without_inline_data(messages)
    assert all(new is old for new, old in zip(kept, messages, strict=True))


def test_links_file_ids_and_text_are_kept_and_the_message_is_not_copied():
    message = {
        "role": "user",
        "content": [
            {"type": "text", "text": "see"},
            {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
            {"type": "input_image", "file_id": "file-1"},
            {"type": "file", "file": {"file_id": "file-2"}},
            {"type": "input_audio", "input_audio": {"data": "", "format": "wav"}},
            "not a part",
        ],
    }
    assert without_inline_data([message])[0] is message


def test_each_kind_of_inline_data_becomes_a_note_and_the_sent_message_is_unchanged():
    parts = [
        {"type": "image_url", "image_url": {"url": PNG, "detail": "low"}},
        {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}},
        {"type": "file", "file": {"filename": "a.pdf", "file_data": "JVBERi0="}},
        {"type": "input_image", "image_url": PNG},
        {"type": "input_file", "filename": "b.pdf", "file_data": "data:application/pdf;base64,JV"},
    ]
    message = {"role": "user", "name": "ana", "content": parts}
    (kept,) = without_inline_data([message])
    assert kept["name"] == "ana" and message["content"] is parts  # the request's is untouched
    assert kept["content"] == [
        {
            "type": "image_url",
            "image_url": {"url": note(PNG, "image/png"), "detail": "low"},
        },
        {
            "type": "input_audio",
            "input_audio": {
                "data": note("UklGRg==", "inline data"),
                "format": "wav",
            },
        },
        {
            "type": "file",
            "file": {
                "filename": "a.pdf",
                "file_data": note("JVBERi0=", "inline data"),
            },
        },
        {"type": "input_image", "image_url": note(PNG, "image/png")},
        {
            "type": "input_file",
            "filename": "b.pdf",
            "file_data": note("data:application/pdf;base64,JV", "application/pdf"),
        },
    ]


def test_a_stored_note_has_the_fingerprint_and_identity_of_the_bytes_it_replaced():
    parts = [
        {"type": "text", "text": "Describe this image."},
        {"type": "image_url", "image_url": {"url": PNG}},
        {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}},
    ]
    sent = {"role": "user", "content": parts}
    (stored,) = without_inline_data([sent])
    assert media_fingerprints(stored) == media_fingerprints(sent) != []
    assert content_hash(stored) == content_hash(sent)
    assert without_inline_data([stored])[0] == stored  # a note is not noted again
    other = {
        "role": "user",
        "content": [parts[0], {"type": "image_url", "image_url": {"url": PNG + "A"}}],
    }
    assert content_hash(other) != content_hash(sent)
    # a message without inline media keeps the identity it had
    linked = {
        "role": "user",
        "content": [parts[0], {"type": "image_url", "image_url": {"url": "https://a.b/c.png"}}],
    }
    assert media_fingerprints(linked) == []
    assert content_hash(linked) == content_hash({"role": "user", "content": "Describe this image."})
