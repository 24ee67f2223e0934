"""Step 1, who: the memory namespace, the conversation and the mode of one request.

Read from CONTRACT.md's headers with their fallbacks (Supermemory, Open WebUI and LiteLLM
spellings, the body's `user`, the `/u/{user_id}` path form). A proxy key bound to a user
overrides all of them, so a client cannot speak for someone else.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from memory import message_text, strip_block
from proxy.errors import BadRequest

USER_HEADERS = (
    "x-memory-user-id",
    "x-sm-user-id",
    "x-openwebui-user-id",
    "x-litellm-end-user-id",
)
SESSION_HEADERS = ("x-memory-session-id", "x-sm-conversation-id", "x-openwebui-chat-id")
# 9999-12-31: beyond it dates cannot be shown; NaN and infinities fail the range check.
MAX_TIMESTAMP = 253_402_300_800.0
_ID = re.compile(r"^[\w.@:+\-]{1,256}$", re.UNICODE)
_INVALID_ID_CHARS = re.compile(r"[^\w.@:+\-]", re.UNICODE)


class Mode(StrEnum):
    AUTO = "auto"  # read and write
    READ = "read"  # recall and inject, store nothing
    WRITE = "write"  # store, inject nothing
    OFF = "off"  # neither; the body goes upstream unchanged

    @property
    def reads(self) -> bool:
        return self in (Mode.AUTO, Mode.READ)

    @property
    def writes(self) -> bool:
        return self in (Mode.AUTO, Mode.WRITE)


@dataclass(frozen=True, slots=True)
class Identity:
    user_id: str
    session_id: str
    mode: Mode
    context_budget: int | None = None
    tools: bool = False
    # When replaying history: the time to store this request's new messages at.
    timestamp: float | None = None
    # False when the session id was derived (memory may then find the conversation it continues).
    explicit_session: bool = True


def identify(
    headers: Mapping[str, str],
    body: Mapping[str, Any],
    path_user: str | None = None,
    bound_user: str | None = None,
    memory_enabled: bool = True,
    tools_default: bool = False,
) -> Identity:
    """Who is asking and how, from headers (case-insensitive mapping), body and path."""
    user_id = bound_user or _first_header(headers, USER_HEADERS)
    if user_id is None and isinstance(body.get("user"), str) and body["user"].strip():
        # OpenAI accepts any string here ("John Smith"); keep it recognisable, make it an id.
        user_id = _INVALID_ID_CHARS.sub("_", body["user"].strip())[:256]
    user_id = _valid_id(user_id or path_user or "default", "user id")
    session = _first_header(headers, SESSION_HEADERS)
    session_id = _valid_id(session, "session id") if session else derive_session_id(user_id, body)
    mode = _mode(headers.get("x-memory-mode"), memory_enabled)
    return Identity(
        user_id=user_id,
        session_id=session_id,
        mode=mode,
        context_budget=_budget(headers.get("x-memory-context-budget")),
        tools=_flag(headers.get("x-memory-tools"), tools_default),
        timestamp=_timestamp(headers.get("x-memory-timestamp")),
        explicit_session=session is not None,
    )


def derive_session_id(user_id: str, body: Mapping[str, Any]) -> str:
    """A stable id from the user and the conversation's opening system and user messages.

    A client that resends its history every turn keeps the same opening, so it stays in one
    session. This form is a contract: changing it splits stored conversations.
    """
    messages = body.get("messages") or []
    opening = []
    for role in ("system", "user"):
        for message in messages:
            if isinstance(message, Mapping) and message.get("role") == role:
                opening.append(strip_block(message_text(message)))
                break
    canonical = json.dumps([user_id, *opening], ensure_ascii=False, separators=(",", ":"))
    return "s-" + hashlib.blake2b(canonical.encode(), digest_size=8).hexdigest()


def held_session_id(user_id: str, field: str, value: str) -> str:
    """The session of a Responses API request whose history the provider holds, named by a
    body field: `conversation` (its id is the session's, for good), or `previous_response_id`
    when moim never stored that reply (the requests that follow continue this one's reply,
    which moim does store, so the chain stays in this session from here on). A contract, as
    `derive_session_id` is.
    """
    canonical = json.dumps([user_id, field, value], ensure_ascii=False, separators=(",", ":"))
    return "s-" + hashlib.blake2b(canonical.encode(), digest_size=8).hexdigest()


def _first_header(headers: Mapping[str, str], names: tuple[str, ...]) -> str | None:
    for name in names:
        value = headers.get(name)
        if value and value.strip():
            return _utf8(value.strip())
    return None


def _utf8(value: str) -> str:
    """HTTP headers arrive decoded as latin-1; a UTF-8 id ("zoë") is re-decoded as UTF-8."""
    try:
        return value.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return value


def _valid_id(value: str, what: str) -> str:
    if not _ID.match(value):
        raise BadRequest(
            f"invalid {what}: use 1-256 letters, digits or . _ - @ : +",
            code="invalid_" + what.replace(" ", "_"),
        )
    return value


def _mode(value: str | None, memory_enabled: bool) -> Mode:
    if not memory_enabled:
        return Mode.OFF
    if value is None or not value.strip():
        return Mode.AUTO
    try:
        return Mode(value.strip().lower())
    except ValueError:
        raise BadRequest(
            "X-Memory-Mode must be one of auto, read, write, off", param="X-Memory-Mode"
        ) from None


def _budget(value: str | None) -> int | None:
    if value is None or not value.strip():
        return None
    try:
        budget = int(value)
    except ValueError:
        budget = -1
    if budget < 0:
        raise BadRequest(
            "X-Memory-Context-Budget must be a non-negative integer",
            param="X-Memory-Context-Budget",
        )
    return budget


def _flag(value: str | None, default: bool) -> bool:
    if value is None or not value.strip():
        return default
    return value.strip().lower() in ("on", "true", "1", "yes")


def _timestamp(value: str | None) -> float | None:
    if value is None or not value.strip():
        return None
    text = value.strip()
    invalid = BadRequest(
        "X-Memory-Timestamp must be Unix seconds or ISO 8601, between 1970 and 9999",
        param="X-Memory-Timestamp",
    )
    try:
        seconds = float(text)
    except ValueError:
        try:
            moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise invalid from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        seconds = moment.timestamp()
    if not 0 <= seconds < MAX_TIMESTAMP:
        raise invalid
    return seconds
