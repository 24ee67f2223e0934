"""A response whose provider broke off mid-body breaks off at the client too.

Called directly, a provider that drops its connection (or goes quiet past the client's read
timeout) leaves the client's HTTP library with a body that never ends: httpx raises
`RemoteProtocolError` ("incomplete chunked read"), the openai SDK `APIConnectionError`. The
relay (`proxy/streaming.py`) keeps what was said and raises `BrokeOff`; this outermost
middleware catches it and returns without the response's last message, so uvicorn closes
the connection with no terminating chunk (both its h11 and httptools protocols, and moim's
own built on them: "ASGI callable returned without completing response", one line, no
traceback) and the client fails as it would have called directly. Letting the exception
reach uvicorn would do the same with a traceback for every dropped provider stream.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from proxy.streaming import BrokeOff


class BreakOff:
    """Pure ASGI middleware: end a response whose provider broke off without completing it."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self.app(scope, receive, send)
        except BrokeOff:
            return  # the relay logged it; uvicorn now closes the connection mid-body
