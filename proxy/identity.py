"""Step 1, who: the memory namespace, the conversation and the mode of one request.

Read from CONTRACT.md's headers with their fallbacks (Supermemory, Open WebUI and LiteLLM
spellings, the body's `user`, the `/u/{user_id}` path form). A proxy key bound to a user
overrides all of them, so a client cannot speak for someone else.

Two distinct user ids never share a namespace, whichever source names them
(`user_namespace`): an id of letters, digits and `. _ - @ : +` is its own namespace, as it
always was; any other id (`john smith`, `john/smith`) is kept whole but percent-encoded,
behind a `~` that no plain id contains (`~john%20smith`). Ids longer than 256 characters are
refused, naming where they came from, rather than cut short.
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
from urllib.parse import unquote

from memory import media_fingerprints, message_text, strip_block, ui_task
from proxy.errors import BadRequest

# As CONTRACT.md spells them (each is matched case-insensitively), in order of precedence.
USER_HEADERS = (
    "X-Memory-User-Id",
    "x-sm-user-id",
    "X-OpenWebUI-User-Id",
    "x-litellm-end-user-id",
)
SESSION_HEADERS = ("X-Memory-Session-Id", "x-sm-conversation-id", "X-OpenWebUI-Chat-Id")
# The body's fields that name the end user (`user` before the path form, the other after).
BODY_USER_FIELDS = ("user", "safety_identifier")
# 9999-12-31: beyond it dates cannot be shown; NaN and infinities fail the range check.
MAX_TIMESTAMP = 253_402_300_800.0
MAX_ID_LENGTH = 256
_ID = re.compile(r"[\w.@:+\-]{1,256}")  # a plain id: its own namespace (fullmatch)
_NOT_PLAIN = re.compile(r"[^\w.@:+\-]+")
ENCODED_PREFIX = "~"  # not a plain id character: an encoded id never equals a plain one
# What `json.dumps(..., ensure_ascii=False, separators=(",", ":"))` writes, with one encoder
# made once instead of one a call: the form a derived session id hashes (a contract).
_CANONICAL = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


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


# Each mode by its name: a dict lookup, where `Mode(name)` goes through the enum's lookup
# machinery (and a ValueError for a bad name) on every request.
_MODES = {mode.value: mode for mode in Mode}
_FLAGS = {"on": True, "true": True, "1": True, "yes": True}
_FLAGS |= {"off": False, "false": False, "0": False, "no": False}


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
    # The chat UI whose background task the request is (`_ui_task`): memory is then off.
    ui_task: str | None = None


def identify(
    headers: Mapping[str, str],
    body: Mapping[str, Any],
    path_user: str | None = None,
    bound_user: str | None = None,
    memory_enabled: bool = True,
    tools_default: bool = False,
    skip_ui_tasks: bool = False,
) -> Identity:
    """Who is asking and how, from headers (lower-case names: a dict of them, or Starlette's
    case-insensitive `Headers`), body and path; with `skip_ui_tasks`, memory off for a chat
    UI's background task (`_ui_task`)."""
    user_id = _user(headers, body, path_user, bound_user)
    header, session = _first_header(headers, SESSION_HEADERS)
    session_id = _session(session, header) if session else derive_session_id(user_id, body)
    asked = headers.get("x-memory-mode")
    mode = memory_mode(asked, memory_enabled)
    task = _ui_task(asked, mode, body) if skip_ui_tasks else None
    return Identity(
        user_id=user_id,
        session_id=session_id,
        mode=Mode.OFF if task is not None else mode,
        context_budget=_budget(headers.get("x-memory-context-budget")),
        tools=_flag(headers.get("x-memory-tools"), tools_default),
        timestamp=_timestamp(headers.get("x-memory-timestamp")),
        explicit_session=session is not None,
        ui_task=task,
    )


def _ui_task(asked: str | None, mode: Mode, body: Mapping[str, Any]) -> str | None:
    """The chat UI whose background task (a title, tags, follow-ups: `memory.ui_task`) the
    request is, when memory would otherwise read or write it and the client asked no mode
    (`X-Memory-Mode` wins: the user said so); else None.

    Such a request is forwarded as with `X-Memory-Mode: off`: no block, nothing stored, the
    body as sent (`memory.skip_ui_tasks: false` turns the rule off).
    """
    if mode is Mode.OFF or (asked is not None and asked.strip()):
        return None
    messages = body.get("messages")
    return ui_task(messages) if isinstance(messages, (list, tuple)) else None


def derive_session_id(user_id: str, body: Mapping[str, Any]) -> str:
    """A stable id from the user and the conversation's opening system and user messages.

    A client that resends its history every turn keeps the same opening, so it stays in one
    session. This form is a contract: changing it splits stored conversations. With no system
    message the first `developer` one stands for it (the role OpenAI's newer models take
    instead): two agents' prompts that open with the same user words are two conversations.
    When the first user message carries inline images, sounds or files, their fingerprints
    (`media_fingerprints`) end the form: "Describe this image." asked of two images is two
    conversations. An opening without inline media keeps the form it always had.
    """
    messages = [m for m in body.get("messages") or [] if isinstance(m, Mapping)]
    opening: list[Any] = []
    media: list[str] = []
    for roles in (("system", "developer"), ("user",)):
        for role in roles:
            first = next((m for m in messages if m.get("role") == role), None)
            if first is not None:
                opening.append(strip_block(message_text(first)))
                media = media_fingerprints(first) if role == "user" else media
                break
    canonical = _CANONICAL.encode([user_id, *opening] + ([media] if media else []))
    return "s-" + hashlib.blake2b(canonical.encode(), digest_size=8).hexdigest()


def user_namespace(user_id: str) -> str:
    """The namespace `user_id`'s memory is stored under; distinct ids never share one.

    A plain id (letters, digits, `. _ - @ : +`) is its own namespace. Any other id is `~`
    followed by the id with each run of other characters percent-encoded as UTF-8
    (`john smith` -> `~john%20smith`, `john/smith` -> `~john%2Fsmith`): reversible
    (`urllib.parse.unquote(namespace[1:])`), and never a plain id, since `~` is not one of
    its characters. This form is a contract: changing it moves stored users' memory.
    """
    if _ID.fullmatch(user_id):
        return user_id
    encoded = _NOT_PLAIN.sub(lambda run: _percent(run.group()), user_id)
    return ENCODED_PREFIX + encoded


def given_namespace(value: str) -> str:
    """The namespace an operator means by `value` on the command line.

    Either the id a client sends (`john smith`, encoded as a request's would be) or a
    namespace exactly as `moim users` prints it (`~john%20smith`, taken as it is). A blank
    one is refused: a script's unset variable (`--user "$U"`) must not reach a namespace
    no client can name (a client's blank id is no id: the next source, else `default`).
    """
    if not value.strip():
        raise BadRequest(
            "a blank user id names no user; leave --user out for 'default'",
            param="--user",
            code="invalid_user_id",
        )
    if value.startswith(ENCODED_PREFIX):
        try:
            if user_namespace(unquote(value[1:], errors="strict")) == value:
                return value
        except UnicodeDecodeError:
            pass
    return _checked_user(value, "--user")


def _percent(text: str) -> str:
    return "".join(f"%{byte:02X}" for byte in text.encode("utf-8", "surrogatepass"))


def _user(
    headers: Mapping[str, str],
    body: Mapping[str, Any],
    path_user: str | None,
    bound_user: str | None,
) -> str:
    """The user's namespace, from the first source that names one (CONTRACT.md's order)."""
    if bound_user:  # the operator's choice in config: not a client's to be refused
        return user_namespace(bound_user)
    header, user_id = _first_header(headers, USER_HEADERS)
    if header is not None and user_id is not None:
        return _checked_user(user_id, header)
    user = _body_user(body, "user")
    if user:
        return user
    if path_user:
        return _checked_user(path_user, "user_id")
    # `safety_identifier`, OpenAI's successor to `user`, after the path form: an operator who
    # named a deployment's users by path keeps them where they were, whatever the app sends.
    return _body_user(body, "safety_identifier") or "default"


def _body_user(body: Mapping[str, Any], field: str) -> str | None:
    """The namespace a body field names (a string, any; blank is none), or None."""
    user = body.get(field)
    if user is not None and not isinstance(user, str):
        raise BadRequest(f"'{field}' must be a string", param=field, code="invalid_user_id")
    if user and user.strip():  # OpenAI takes any string ("John Smith"): kept whole
        return _checked_user(user, field)
    return None


def _checked_user(user_id: str, source: str) -> str:
    if len(user_id) > MAX_ID_LENGTH:
        raise BadRequest(
            f"{source}: a user id is at most {MAX_ID_LENGTH} characters",
            param=source,
            code="invalid_user_id",
        )
    return user_namespace(user_id)


def held_session_id(user_id: str, field: str, value: str) -> str:
    """The session of a Responses API request whose history the provider holds, named by a
    body field: `conversation` (its id is the session's, for good), or `previous_response_id`
    when moim never stored that reply (the requests that follow continue this one's reply,
    which moim does store, so the chain stays in this session from here on). A contract, as
    `derive_session_id` is.
    """
    canonical = _CANONICAL.encode([user_id, field, value])
    return "s-" + hashlib.blake2b(canonical.encode(), digest_size=8).hexdigest()


def _first_header(
    headers: Mapping[str, str], names: tuple[str, ...]
) -> tuple[str | None, str | None]:
    """(the first of `names` that has a value, its value), or (None, None); looked up in
    lower case, as ASGI names headers (the request's are a dict of them: `header_values`)."""
    for name in names:
        value = _utf8(headers.get(name.lower()) or "").strip(_HTTP_SPACE)
        if value:
            return name, value
    return None, None


# What HTTP strips around a header's value (RFC 9110 §5.5), and nothing more: Python's own
# `strip()` also takes Latin-1's 0x85 and 0xA0, the last byte of `à` or `々` read as Latin-1
# (`voilà` became `voilÃ`, another user's id), and, after UTF-8, a no-break space (`alice\xa0`
# became `alice`).
_HTTP_SPACE = " \t"


def _utf8(value: str) -> str:
    """HTTP headers arrive decoded as latin-1; a UTF-8 id ("zoë") is re-decoded as UTF-8."""
    try:
        return value.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return value


def _session(value: str, header: str | None) -> str:
    if not _ID.fullmatch(value):
        raise BadRequest(
            f"invalid session id in {header}: use 1-256 letters, digits or . _ - @ : +",
            param=header,
            code="invalid_session_id",
        )
    return value


def memory_mode(value: str | None, memory_enabled: bool) -> Mode:
    """The mode an `X-Memory-Mode` value asks for (off when memory is off in config)."""
    if not memory_enabled:
        return Mode.OFF
    if value is None or not value.strip():
        return Mode.AUTO
    mode = _MODES.get(value.strip().lower())
    if mode is None:
        raise BadRequest(
            "X-Memory-Mode must be one of auto, read, write, off", param="X-Memory-Mode"
        )
    return mode


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
    """`X-Memory-Tools`: on or off (or true/false, 1/0, yes/no); unset, the config's default.
    Another value is a 400, as for the other headers: taken as "off", a typo silently
    turned off tools the config had on."""
    if value is None or not value.strip():
        return default
    flag = _FLAGS.get(value.strip().lower())
    if flag is None:
        raise BadRequest("X-Memory-Tools must be on or off", param="X-Memory-Tools")
    return flag


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
