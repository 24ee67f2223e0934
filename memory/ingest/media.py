"""What memory keeps of a message's images, audio and files: the part, not its bytes.

A client sends an image, a sound or a file inline, as base64 (a `data:` URL, or the bare
base64 of `input_audio`), and resends it with the history on every turn. Memory reads only
text (`message_text`): the bytes were never recalled, indexed or embedded, but they were kept
in the turn moim journals and queues and in the stored message's `payload`, so a 5 MB image
became 5 MB written to the journal on every turn and 5 MB in the database. `without_inline_data`
keeps each such part with its other fields (type, detail, format, file name) and puts in place
of its data a short note of what was there. A URL or file id is kept: it is no data.

The note carries a short fingerprint of the bytes (`media_fingerprints`): a message's identity
and a derived session read it, so "Describe this image." sent with two different images is two
messages, and the same image resent with the history is the message stored before.
"""

from __future__ import annotations

import hashlib
import re
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
# A note as `_note` writes it; its one group is the fingerprint of the bytes it stands for.
_NOTE = re.compile(r"\[[^\[\]]*, \d+ characters, sha256 ([0-9a-f]{16}), not kept by moim\]")


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


def media_fingerprints(message: Mapping[str, Any]) -> list[str]:
    """A fingerprint of each inline image, sound or file of a message, in order: of its bytes
    as sent, or as read back from the note that took their place (the same fingerprint), so a
    stored message and the same message resent with its bytes are one message."""
    content = message.get("content")
    if not isinstance(content, list):
        return []
    prints = []
    for part in content:
        value = _inline(part)
        if value is not None:
            noted = _NOTE.fullmatch(value)
            prints.append(noted.group(1) if noted else fingerprint(value))
    return prints


def fingerprint(data: str) -> str:
    """16 hex digits of SHA-256 of inline data: enough to tell two images apart. SHA-256,
    not the blake2b moim's other hashes use: a history resends its images on every turn and
    each is hashed a few times a request, and SHA-256 (in the CPU's instructions) is about 3x
    faster (a 3 MB image: 3.7 ms against 11.7)."""
    return hashlib.sha256(data.encode()).hexdigest()[:16]


def _inline(part: Any) -> str | None:
    """A part's inline data, or the note in its place; None for a part with neither."""
    if not isinstance(part, Mapping) or part.get("type") not in _INLINE:
        return None
    field, key = _INLINE[part["type"]]
    holder = part.get(field)
    if key is not None:
        field, holder = key, holder.get(key) if isinstance(holder, Mapping) else None
    if _is_data(holder, field) or (isinstance(holder, str) and _NOTE.fullmatch(holder)):
        return holder
    return None


def _part(part: Any) -> Any:
    """The part with its inline data replaced by a note (a note already in place, as in a
    stored message resent, is kept as it is); a part with neither is the same object."""
    data = _inline(part)
    if data is None or _NOTE.fullmatch(data):
        return part
    field, key = _INLINE[part["type"]]
    if key is None:
        return {**part, field: _note(data)}
    return {**part, field: {**part[field], key: _note(data)}}


def _is_data(value: Any, name: str) -> TypeGuard[str]:
    """Whether a field's value is inline data: an image's URL when it is a `data:` URL, an
    audio's `data` and a file's `file_data` whenever they hold anything."""
    if not isinstance(value, str) or not value:
        return False
    return value.startswith("data:") or name not in _URLS


def _note(data: str) -> str:
    """What stands in for inline data: its media type (a data URL's), its size and its
    fingerprint."""
    kind = data[5:].split(",", 1)[0].split(";", 1)[0] if data.startswith("data:") else ""
    size = f"{len(data)} characters, sha256 {fingerprint(data)}"
    return f"[{kind or 'inline data'}, {size}, not kept by moim]"
