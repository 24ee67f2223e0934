"""Header-size limit: oversized request headers get a 431 in OpenAI's error shape.

uvicorn's HTTP parser (h11) refuses a request head over its own limit with a bare-text 400.
moim checks first, at a lower limit (`server.max_header_bytes`, 16 KiB by default), and
answers like the rest of its errors; `moim serve` raises h11's limit to four times moim's so
that only absurd heads reach the plain refusal.
"""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Receive, Scope, Send

from proxy.errors import ProxyError


class HeadersTooLarge(ProxyError):
    status = 431
    type = "invalid_request_error"


def parser_limit(max_header_bytes: int) -> int:
    """The h11 limit to run uvicorn with, so moim's own check answers first."""
    return 4 * max_header_bytes


class HeaderLimit:
    """Pure ASGI middleware: refuse HTTP requests whose headers total more than `max_bytes`."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            size = sum(len(name) + len(value) + 4 for name, value in scope["headers"])
            if size > self.max_bytes:
                error = HeadersTooLarge(
                    f"request headers are {size} bytes, over the limit of {self.max_bytes}",
                    code="headers_too_large",
                )
                await _answer(send, error)
                return
        await self.app(scope, receive, send)


async def _answer(send: Send, error: ProxyError) -> None:
    body = json.dumps(error.body()).encode()
    await send(
        {
            "type": "http.response.start",
            "status": error.status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
