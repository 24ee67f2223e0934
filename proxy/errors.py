"""The proxy's exceptions, one tree, and their one renderer (`error_response`): OpenAI's shape.

ProxyError                 status, message, type, param, code
 ├── BadRequest            400  the request is malformed
 │    ├── PayloadTooLarge  413  the body is over the configured limit
 │    ├── RequestTimeout   408  the head or body did not arrive in time (the connection closes)
 │    ├── UnsupportedMediaType 415  a body compressed in a way moim cannot read
 │    └── ClientClosed     499  the client left while sending its body (nginx's code; no one
 │                              reads the answer, but it is logged and counted)
 ├── Unauthorized          401  a proxy key is required or wrong
 ├── Forbidden             403  the key may not act for that user
 ├── NotFound              404  no such memory item, route or upstream
 ├── MethodNotAllowed      405  the memory API has no such method on that path
 ├── ServiceUnavailable    503  the memory store is busy or down (memory API only), Retry-After
 └── UpstreamError         the provider's own status and body, passed through
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from starlette.responses import Response


class ProxyError(Exception):
    """An error moim answers itself, as `{"error": {"message", "type", "param", "code"}}`."""

    status = 500
    type = "server_error"

    def __init__(
        self,
        message: str,
        param: str | None = None,
        code: str | None = None,
        headers: Mapping[str, str] | None = None,
    ):
        super().__init__(message)
        self.message = message
        self.param = param
        self.code = code
        self.headers = dict(headers or {})

    def body(self) -> dict[str, dict[str, str | None]]:
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }


class BadRequest(ProxyError):
    status = 400
    type = "invalid_request_error"


class PayloadTooLarge(BadRequest):
    status = 413


class RequestTimeout(BadRequest):
    """The request's head or body was too slow; the connection is closed after the answer."""

    status = 408

    def __init__(self, message: str, code: str = "request_timeout"):
        super().__init__(message, code=code, headers={"connection": "close"})


class UnsupportedMediaType(BadRequest):
    status = 415


class ClientClosed(BadRequest):
    status = 499


class Unauthorized(ProxyError):
    status = 401
    type = "authentication_error"


class Forbidden(ProxyError):
    status = 403
    type = "permission_error"


class NotFound(ProxyError):
    status = 404
    type = "not_found_error"


class MethodNotAllowed(ProxyError):
    status = 405
    type = "invalid_request_error"


class ServiceUnavailable(ProxyError):
    """The memory store cannot answer now (locked, unreachable); the client may retry."""

    status = 503
    type = "server_error"

    def __init__(self, message: str, code: str, retry_after: int = 1):
        super().__init__(message, code=code, headers={"retry-after": str(retry_after)})


class UpstreamError(ProxyError):
    """The provider failed; carries its status and raw body to pass on unchanged. `message`
    says what happened for moim's own (unreachable, timed out, broken off, litellm failing with
    no status from the provider: `proxy.upstream_errors`), else it is the provider's status
    (`from_provider`)."""

    type = "upstream_error"

    def __init__(
        self,
        status: int,
        content: bytes,
        headers: dict[str, str] | None = None,
        message: str | None = None,
    ):
        super().__init__(message or f"upstream returned {status}", headers=headers)
        self.status = status
        self.content = content
        self.from_provider = message is None


def error_object(body: bytes) -> dict[str, object] | None:
    """The error object of a provider's error body, or None when it holds none.

    OpenAI's is under "error"; vLLM (before it nested its errors), TensorRT-LLM and FastChat
    send it alone, `{"object": "error", "message", "type", "param", "code": 400}`.
    """
    try:
        answer = json.loads(body)
    except ValueError:
        return None
    if not isinstance(answer, dict):
        return None
    error = answer if answer.get("object") == "error" else answer.get("error")
    return error if isinstance(error, dict) else None


def error_response(exc: ProxyError, headers: Mapping[str, str] | None = None) -> Response:
    """The response for `exc`: the provider's own status and body for an `UpstreamError`, else
    `{"error": {"message", "type", "param", "code"}}` with its status; `headers` are added."""
    merged = {**exc.headers, **(headers or {})}
    if isinstance(exc, UpstreamError):
        content = exc.content
    else:
        content = json.dumps(exc.body()).encode()
    return Response(content, status_code=exc.status, headers=merged, media_type="application/json")
