"""Inline media's bytes are left out of what memory keeps; everything else of a message stays."""

from memory import without_inline_data

PNG = "data:image/png;base64,iVBORw0KGgo="


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
            "image_url": {"url": "[image/png, 34 characters, not kept by moim]", "detail": "low"},
        },
        {
            "type": "input_audio",
            "input_audio": {
                "data": "[inline data, 8 characters, not kept by moim]",
                "format": "wav",
            },
        },
        {
            "type": "file",
            "file": {
                "filename": "a.pdf",
                "file_data": "[inline data, 8 characters, not kept by moim]",
            },
        },
        {"type": "input_image", "image_url": "[image/png, 34 characters, not kept by moim]"},
        {
            "type": "input_file",
            "filename": "b.pdf",
            "file_data": "[application/pdf, 30 characters, not kept by moim]",
        },
    ]
