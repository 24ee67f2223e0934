"""What memory keeps of a message's images, audio and files: the part, not its bytes.

A client sends an image, a sound or a file inline, as base64 (a `data:` URL, or the bare
base64 of `input_audio`), and resends it with the history on every turn. Memory reads only
text (`message_text`): the bytes were never recalled, indexed or embedded, but they were kept
in the turn moim journals and queues and in the stored message's `payload`, so a 5 MB image
became 5 MB written to the journal on every turn and 5 MB in the database. `without_inline_data`
keeps each such part with its other fields (type, detail, format, file name) and puts in place
of its data a short note of what was there. A URL or file id is kept: it is no data.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeGuard

# Per part type: the field holding the data, and within it (if a dict) the key that does.
# Chat's parts, then the Responses API's.
_INLINE: dict[str, tuple[str, str | None]] = {
    "image_url": ("image_url", "url"),
    "input_audio": ("input_audio", "data"),
    "file": ("file", "file_data"),
    "input_image": ("image_url", None),
    "input_file": ("file_data", None),
}
# The fields that hold a URL, which is data only when a `data:` URL.
_URLS = frozenset({"url", "image_url"})


def without_inline_data(messages: Sequence[Mapping[str, Any]]) -> tuple[Mapping[str, Any], ...]:
    """The messages, each part that carries inline data replaced by a copy without it (the
    messages and parts without any are the same objects)."""
    return tuple(_message(message) for message in messages)


def _message(message: Mapping[str, Any]) -> Mapping[str, Any]:
    content = message.get("content")
    if not isinstance(content, list):
        return message
    parts = [_part(part) for part in content]
    if all(new is old for new, old in zip(parts, content, strict=True)):
        return message
    return {**message, "content": parts}


def _part(part: Any) -> Any:
    if not isinstance(part, Mapping) or part.get("type") not in _INLINE:
        return part
    field, key = _INLINE[part["type"]]
    holder = part.get(field)
    if key is None:
        return {**part, field: _note(holder)} if _is_data(holder, field) else part
    if isinstance(holder, Mapping) and _is_data(holder.get(key), key):
        return {**part, field: {**holder, key: _note(holder[key])}}
    return part


def _is_data(value: Any, name: str) -> TypeGuard[str]:
    """Whether a field's value is inline data: an image's URL when it is a `data:` URL, an
    audio's `data` and a file's `file_data` whenever they hold anything."""
    if not isinstance(value, str) or not value:
        return False
    return value.startswith("data:") or name not in _URLS


def _note(data: str) -> str:
    """What stands in for inline data: its media type (a data URL's) and its size."""
    kind = data[5:].split(",", 1)[0].split(";", 1)[0] if data.startswith("data:") else ""
    return f"[{kind or 'inline data'}, {len(data)} characters, not kept by moim]"
