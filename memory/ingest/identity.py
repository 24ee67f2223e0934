"""Message identity: which message of a resent history is the same message as one stored.

Clients resend the whole history with every request, so a message is identified by a content
hash within its session (`message_keys`): the k-th identical message of a conversation (a
second "yes") is a different message from the first. The hash's canonical form is a contract
with stored messages: changing it makes them look new again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any

from memory.block.render import strip_block
from memory.block.tokens import message_text
from memory.ingest.media import media_fingerprints
from memory.remembered import Remembered


def content_hash(message: Mapping[str, Any]) -> str:
    """Hash of what a message says: role, name, text, tool calls (their arguments as compact
    JSON), tool_call_id.

    A spoken reply (`modalities: ["audio"]`) is identified by its audio id instead of its
    text: the proxy stores it with its transcript and `audio: {"id"}`, and a client resends it
    as `audio: {"id"}` with no content (OpenAI's multi-turn audio), the same message.

    A message with inline images, sounds or files is identified by their fingerprints too
    (`media_fingerprints`: of the bytes sent, or read from the note stored in their place), so
    the same words sent with another image are another message.

    This canonical form is a contract: changing it makes stored messages look new again.
    """
    sent = tuple(
        (
            c.get("id"),
            (c.get("function") or {}).get("name"),
            (c.get("function") or {}).get("arguments"),
        )
        for c in (message.get("tool_calls") or [])
        if isinstance(c, Mapping)
    )
    role, name, call_id = message.get("role"), message.get("name"), message.get("tool_call_id")
    audio_id = _audio_id(message)
    if audio_id is not None:
        return _hash(role, name, "", _compact(sent), call_id, audio_id)
    text = message_text(message)
    media = media_fingerprints(message)
    if media:
        return _hash(role, name, text, _compact(sent), call_id, media=media)
    if not _plain(role, name, call_id):
        return _hash(role, name, text, _compact(sent), call_id)
    if sent or len(text) > _HASHED_LIMIT:
        return _remembered_hash(role, name, text, sent, call_id)
    return _recent_hash(role, name, text, call_id)  # a history resent every turn


# Clients resend the whole history with every request, and recall, session resolution and
# the writer each hash it: a plain message's hash is remembered (at most 2,048 of them, of
# at most 4,000 characters each), as its token count is (memory/block/tokens.py).
_HASHED_LIMIT = 4_000


def _plain(*values: Any) -> bool:
    return all(value is None or isinstance(value, str) for value in values)


@lru_cache(maxsize=2048)
def _recent_hash(role: str | None, name: str | None, text: str, call_id: str | None) -> str:
    return _hash(role, name, text, [], call_id)


def forget_recent_hashes() -> None:
    """Let go of every message text held with its hash (a user forgotten: theirs go too)."""
    _recent_hash.cache_clear()
    _CALL_HASHES.clear()


# A tool call's hash reads its arguments as JSON (`_arguments`), ~0.1 ms for 6 kB, and an
# agent's history resends hundreds of calls with every request, each hashed a few times, and
# its tool results (2-20 kB each, ~0.1 ms a hash). The hashes of recent messages with calls
# or longer texts are remembered under Python's own (keyed, per process) hash of what was
# sent (`memory/remembered.py`), so no text is held; at most 4,096.
_CALL_HASHES: Remembered[str] = Remembered(4096)


def _remembered_hash(
    role: str | None, name: str | None, text: str, sent: tuple[Any, ...], call_id: str | None
) -> str:
    """`_hash` of a message with tool calls (`sent`: each call's id, name, arguments as sent,
    maybe none) or a text too long to hold (`_HASHED_LIMIT`)."""

    def make() -> str:
        return _hash(role, name, text, _compact(sent), call_id)

    try:
        return _CALL_HASHES.get((role, name, text, sent, call_id), make)
    except TypeError:  # arguments sent as a JSON object, not a string
        return make()


def _compact(sent: tuple[Any, ...]) -> list[Any]:
    """Each call as its canonical form hashes it: id, name, arguments as compact JSON."""
    return [(call, name, _arguments(arguments)) for call, name, arguments in sent]


def _arguments(arguments: Any) -> Any:
    """A call's arguments as compact JSON, key order kept: clients that parse them and write
    them again when they send the history back (LangChain, pydantic-ai) send the provider's
    `{"city":"Paris"}` as `{"city": "Paris"}`, the same call. Compact arguments, as OpenAI's
    models write them, are unchanged; arguments that are not JSON are kept as they are."""
    if not isinstance(arguments, str):
        return arguments
    try:
        compact = json.dumps(json.loads(arguments), ensure_ascii=False, separators=(",", ":"))
        compact.encode()  # a lone surrogate escape is no text to hash
    except (ValueError, RecursionError):
        return arguments
    return compact


def _audio_id(message: Mapping[str, Any]) -> str | None:
    """The id of an assistant message's audio (a spoken reply), if it has one."""
    audio = message.get("audio")
    if message.get("role") != "assistant" or not isinstance(audio, Mapping):
        return None
    audio_id = audio.get("id")
    return audio_id if isinstance(audio_id, str) and audio_id else None


def _hash(
    role: Any,
    name: Any,
    text: str,
    calls: list[Any],
    call_id: Any,
    audio_id: str | None = None,
    media: list[str] | None = None,
) -> str:
    if role in ("system", "developer"):
        text = strip_block(text)
    # A sixth element only for spoken replies (a string) and messages with inline media (a
    # list of fingerprints): every other message's form is as it was.
    fields = [role, name, text, calls, call_id] + ([audio_id] if audio_id is not None else [])
    fields += [media] if media else []
    canonical = json.dumps(fields, ensure_ascii=False, separators=(",", ":"))
    return hashlib.blake2b(canonical.encode(), digest_size=16).hexdigest()


def message_keys(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """Session-scoped identities: the content hash plus its occurrence number."""
    seen: dict[str, int] = {}
    keys = []
    for message in messages:
        digest = content_hash(message)
        seen[digest] = seen.get(digest, 0) + 1
        keys.append(f"{digest}#{seen[digest]}")
    return keys


def continued_keys(messages: Sequence[Mapping[str, Any]], stored: Iterable[str]) -> list[str]:
    """Keys for messages that follow those stored (`Turn.continues`): each message's occurrence
    number counts on from the session's stored ones, except for system and developer messages."""
    return _counted_on(messages, message_keys(messages), stored, range(len(messages)))


# How many comparisons lining a history up may take, per message sent and stored: a session
# of one word said over and over ("yes", "ok", …) has a place for each, and trying every
# place's run is quadratic (4,000 stored, 1,000 sent: 1.6 s of the writer). Past it the
# history is numbered as sent, as before lining up (`message_keys`).
_ALIGN_WORK = 32


def resent_keys(messages: Sequence[Mapping[str, Any]], stored: Sequence[str]) -> list[str]:
    """Keys for a resent history, given the session's stored keys in the order stored.

    A client that sends its whole history gets `message_keys`. One that trims its oldest
    messages (a sliding window) no longer starts where the session did, so the k-th "yes" it
    sends is not the session's k-th. So the history is lined up with the stored messages, left
    to right: a message that starts a run of stored ones takes their keys, where the run is
    longest (the latest of equal ones: where a window that slid starts); a message that starts
    none is new, numbered on from the session's stored ones (`continued_keys`). System and
    developer messages keep their number in the request, as they always did.
    """
    keys = message_keys(messages)
    digests = [key.partition("#")[0] for key in keys]
    held = [key.partition("#")[0] for key in stored]
    if digests[: len(held)] == held:  # the whole history, sent again: the common case
        return keys
    said = [i for i, m in enumerate(messages) if m.get("role") not in ("system", "developer")]
    places: dict[str, list[int]] = {}
    for place, digest in enumerate(held):
        places.setdefault(digest, []).append(place)
    new, at, step = [], 0, 0  # `at`: the first stored message not lined up yet
    work = _ALIGN_WORK * (len(said) + len(held))
    while step < len(said):
        best, start = 0, 0
        for place in places.get(digests[said[step]], ()):
            if place < at:
                continue
            run = 0
            while (
                step + run < len(said)
                and place + run < len(held)
                and digests[said[step + run]] == held[place + run]
            ):
                run += 1
            work -= run + 1
            if work < 0:  # a history of the same few words over and over: numbered as sent
                return message_keys(messages)
            if run and run >= best:
                best, start = run, place
        for offset in range(best):
            keys[said[step + offset]] = stored[start + offset]
        if best:
            at, step = start + best, step + best
        else:
            new.append(said[step])
            step += 1
    return _counted_on(messages, keys, stored, new)


def _counted_on(
    messages: Sequence[Mapping[str, Any]],
    keys: list[str],
    stored: Iterable[str],
    indexes: Iterable[int],
) -> list[str]:
    """`keys`, with those at `indexes` numbered on from the stored ones, in order; system and
    developer messages (resent with every request) keep their number in the request."""
    last: dict[str, int] = {}
    for key in stored:
        digest, _, number = key.partition("#")
        last[digest] = max(last.get(digest, 0), int(number or 0))
    for index in indexes:
        if messages[index].get("role") not in ("system", "developer"):
            digest = keys[index].partition("#")[0]
            last[digest] = last.get(digest, 0) + 1
            keys[index] = f"{digest}#{last[digest]}"
    return keys
