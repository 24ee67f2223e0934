"""The errors a client gets when its provider fails: moim's own when it could not talk to the
provider (unreachable, timed out, broken off), and litellm's exceptions mapped onto OpenAI's
error shape (the provider's status and error object when it answered). Out of
`proxy/upstream.py`, which sends the request.
"""

from __future__ import annotations

import base64
import json
import logging
import re
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx

from proxy.auth import bearer_token
from proxy.errors import UpstreamError
from proxy.litellm_redirects import redirect_refused

logger = logging.getLogger("proxy.upstream")  # the operator's filter for provider failures


def unreachable(exc: httpx.HTTPError) -> UpstreamError:
    """The error a client gets when the provider could not be reached or answer in time.

    The client's error names only the kind; the log says where and why (refused, no such
    host, TLS spoken to a plain port, …), so an operator finds a wrong base URL from the log.
    """
    if isinstance(exc, httpx.TimeoutException):
        logger.warning("upstream timed out: %s", _failed_call(exc))
        return own_error(504, "upstream timed out", "upstream_timeout")
    logger.warning("upstream unreachable: %s", _failed_call(exc))
    return own_error(502, f"upstream unreachable: {type(exc).__name__}", "upstream_unreachable")


def _failed_call(exc: httpx.HTTPError) -> str:
    """`POST http://host:port/path: ConnectError: …`, without the URL's credentials or query
    (a gateway's password, an `api-key` parameter), in the URL and in the error's text."""
    reason = f"{type(exc).__name__}: {exc}".rstrip(": ")
    try:
        request = exc.request
    except RuntimeError:  # an error made for a call that had no request (litellm's timeout)
        return reason
    url = request.url
    for secret in (url.userinfo.decode("latin-1"), url.password, url.query.decode("latin-1")):
        if secret:
            reason = reason.replace(secret, "***")
    shown = url.copy_with(username=None, password=None, query=None, fragment=None)
    return f"{request.method} {shown}: {reason}"


def broken_off() -> UpstreamError:
    """The error a client gets when the provider broke off a body moim reads before it answers
    (a non-streamed reply, an error, a memory-tool round held back): a clean 502, nothing
    stored. Once moim relays a body, the relay breaks the client's connection off instead
    (`proxy.streaming.BrokeOff`)."""
    return own_error(502, "upstream closed the connection", "upstream_broken")


def own_error(status: int, message: str, code: str) -> UpstreamError:
    """moim's error for a provider it could not talk to, saying so (not "upstream returned")."""
    return UpstreamError(status, upstream_error(message, code), message=message)


def without_key(data: bytes, authorization: str | None) -> bytes:
    """A provider's body with the key moim sent it masked wherever it is quoted.

    Some providers and gateways quote the key they refused ("Incorrect API key provided:
    sk-…"), and the body goes to the client, which with proxy keys must never learn the
    operator's key. The key is the `Authorization` value's token (or the value itself, as
    litellm routes send it), and for Basic auth (a base URL's `user:password@`) also the
    `user:password` it encodes and the password (the user, with no password: a key given as
    the URL's user, `https://KEY@host`); a short one is left alone, as it would match
    ordinary text. Each of its characters becomes a `*`, so a body keeps its length (and its
    `Content-Length`).
    """
    for key in _keys_of(authorization):
        data = data.replace(key, b"*" * len(key))
    return data


async def chunks_without_key(
    chunks: AsyncIterator[bytes], authorization: str | None
) -> AsyncIterator[bytes]:
    """A body relayed as it comes (a stream, whose error event may quote the key mid-way; a
    body past `server.max_body_bytes`) with the key masked, even when split across chunks.

    A chunk's end that could begin the key waits for the next chunk; nothing else is held, so
    an event ending in its blank line goes out at once (a key holds no line break).
    """
    keys = _keys_of(authorization)
    held = b""
    async for chunk in chunks:
        if not keys:
            yield chunk
            continue
        data = held + chunk
        for key in keys:
            data = data.replace(key, b"*" * len(key))
        keep = max(_key_start_at_end(data, key) for key in keys)
        held = data[len(data) - keep :] if keep else b""
        if len(data) > keep:
            yield data[: len(data) - keep]
    if held:
        yield held


def key_of(authorization: str | None) -> str:
    """The key an `Authorization` value carries: its bearer token, or the value itself (as
    litellm routes send it)."""
    return bearer_token(authorization) or (authorization or "").strip()


def _keys_of(authorization: str | None) -> list[bytes]:
    """What of an `Authorization` value a provider could quote, longest first, each long
    enough to mask: its key (`key_of`) and, for Basic auth, the token, the `user:password`
    it encodes and the password, or the user when there is no password: then it is the key
    (a gateway may quote any of them)."""
    keys = [key_of(authorization)]
    scheme, _, token = (authorization or "").strip().partition(" ")
    if scheme.lower() == "basic" and token.strip():
        try:
            pair = base64.b64decode(token.strip(), validate=True).decode()
        except ValueError:  # not base64, or not UTF-8: only the token is known
            pair = ""
        user, _, password = pair.partition(":")
        keys += [token.strip(), pair, password or user]
    found = {key.encode() for key in keys if len(key) >= _SHORTEST_KEY}
    return sorted(found, key=len, reverse=True)


def _key_start_at_end(data: bytes, key: bytes) -> int:
    """The length of the longest end of `data` that is the start of `key` (0: none)."""
    at = data.find(key[:1], max(0, len(data) - len(key) + 1))
    while at != -1:
        if key.startswith(data[at:]):
            return len(data) - at
        at = data.find(key[:1], at + 1)
    return 0


_SHORTEST_KEY = 8


def upstream_error(message: str, code: str) -> bytes:
    """An OpenAI-shaped error body for a provider moim could not talk to."""
    return json.dumps(
        {"error": {"message": message, "type": "upstream_error", "param": None, "code": code}}
    ).encode()


def failure(exc: Exception, litellm: Any, authorization: str | None = None) -> UpstreamError:
    """litellm's exception as an OpenAI error for the client.

    The provider's status and error object when it answered; a 502 or 504 as on the byte path
    when it could not be reached; otherwise litellm's status and one clean line. litellm's
    messages may carry a traceback, file paths and a bug-report notice: never the client's;
    nor the provider key moim sent (`authorization`'s), should the provider's words quote it
    (masked as in a body, `without_key`).
    """
    if _missing_key(exc):
        return _logged(exc, 401, _error_object(_summary(exc), "authentication_error", None, "401"))
    transport = next((e for e in _causes(exc) if isinstance(e, httpx.TransportError)), None)
    if isinstance(exc, litellm.Timeout) and not isinstance(transport, httpx.TimeoutException):
        transport = httpx.TimeoutException("litellm timed out")
    if transport is not None:
        logger.warning("litellm call failed: %s", type(transport).__name__)
        return unreachable(transport)
    status = getattr(exc, "status_code", None)
    if isinstance(status, int) and 300 <= status < 400:  # `follow_no_redirects`
        return _logged(exc, 502, _error_object(redirect_refused(status), None, None, "redirect"))
    status = status if isinstance(status, int) and 400 <= status < 600 else 502
    said = None  # the provider's status, unless no status came back
    if isinstance(exc, litellm.APIConnectionError):  # litellm itself failed: no answer
        status = 502
        under = next((type(e).__name__ for e in _causes(exc) if e is not exc), type(exc).__name__)
        said = f"litellm could not complete the call ({under})"
    provider = getattr(exc, "body", None)  # the OpenAI SDK's copy of the provider's "error"
    if isinstance(provider, dict) and isinstance(provider.get("message"), str):
        message = _CLASS_PREFIX.sub("", provider["message"]).strip() or provider["message"]
        error = _error_object(
            message, provider.get("type"), provider.get("param"), provider.get("code")
        )
    else:
        error = _error_object(_summary(exc), _ERROR_TYPES.get(status), None, str(status))
    error["message"] = without_key((error["message"] or "").encode(), authorization).decode()
    if isinstance(exc, litellm.ContextWindowExceededError) and error["code"] in (None, str(status)):
        # litellm reads every provider's words for it: say it in OpenAI's code (overflow.py)
        error["code"] = "context_length_exceeded"
    return _logged(exc, status, error, said)


def _logged(
    exc: Exception, status: int, error: dict[str, str | None], said: str | None = None
) -> UpstreamError:
    """Logged without its message: the provider's words may quote the request and its key."""
    kind, code = error["type"], error["code"]
    logger.warning("litellm call failed: %s %s (%s, %s)", status, type(exc).__name__, kind, code)
    return UpstreamError(status, json.dumps({"error": error}).encode(), message=said)


# The OpenAI error type for a status, when the provider's own is not known.
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
}
# "litellm.BadRequestError: OpenAIException - …": the class names litellm puts first.
# litellm's class names before a message: "litellm.BadRequestError: ContextWindowExceededError:
# OpenAIException - This model's maximum context length is …".
_CLASS_PREFIX = re.compile(r"^(?:(?:litellm\.)?\w+(?:Error|Exception)(?::| -) )+")
# An absolute path to a file ("/srv/app/x.py"), not one after a host name or "//".
_FILE_PATH = re.compile(r"(?<![\w:/.])/(?:[\w.\-]+/)+[\w\-]+\.\w+")
_MAX_MESSAGE = 500


def _summary(exc: Exception) -> str:
    """litellm's message cut to its first line, without class names or file paths."""
    text = str(getattr(exc, "message", None) or exc).strip()
    line = _CLASS_PREFIX.sub("", text.split("\n", 1)[0]).strip()
    line = _FILE_PATH.sub("…", line)[:_MAX_MESSAGE]
    return line or f"the provider call failed ({type(exc).__name__})"


def _error_object(message: str, kind: Any, param: Any, code: Any) -> dict[str, str | None]:
    """OpenAI's error object; a provider's type, param and code are kept when they are text."""
    return {
        "message": message,
        "type": kind if isinstance(kind, str) and kind else "upstream_error",
        "param": param if isinstance(param, str) else None,
        "code": str(code) if isinstance(code, (str, int)) else None,
    }


def _missing_key(exc: BaseException) -> bool:
    """True when the error is the OpenAI SDK refusing to start without an API key.

    litellm reports that as a 500 (other providers' missing keys are already 401s): its
    cause is the SDK's bare `OpenAIError`, raised before anything was sent.
    """
    for seen in _causes(exc):
        kind = type(seen)
        if kind.__module__ == "openai" and kind.__name__ == "OpenAIError":
            return "api_key" in str(seen)
    return False


def _causes(exc: BaseException) -> Iterator[BaseException]:
    """The exception, then its causes (explicit or implicit), at most eight.

    Bounded: a chain of causes may loop back on itself.
    """
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None:
            return
        yield seen
        seen = seen.__cause__ or seen.__context__
