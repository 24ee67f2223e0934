"""Every request counted by route and status, chat requests by status, and chat's time to
first byte (`moim_http_requests_total`, `moim_chat_requests_total`, `moim_ttfb_seconds`).

A pure ASGI middleware around the whole app, so every request counts however it ends: a
reply (a stream counts when its head is sent), a refusal before any route runs (a 431 from
`HeaderLimit`), one the handler answers (400, 408, 413, 499 …) or the app's error handler
renders, and a crash: Starlette turns an unhandled exception into its 500 outside every
middleware, so it is counted here as it passes. Counting in the handler missed the last two.
A response whose provider broke off mid-body (`BrokeOff`, `proxy/break_off.py`) went out with
a 200 head but never ended: its status label is `broke_off`, not the head's status.

The route label is the matched route's template (`/u/{user_id}/v1/chat/completions`), so a
label never holds a user id or a client's path; `(none)` when no route handled the request.
"""

from __future__ import annotations

import re
import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from proxy.metrics import Metrics
from proxy.streaming import BrokeOff

# CONTRACT.md's chat endpoints: /v1/chat/completions, /chat/completions, and the /u/{user}
# forms of both; the Responses API's likewise.
CHAT_PATH = re.compile(r"(/u/[^/]+)?(/v1)?/(chat/completions|responses)")
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
BROKE_OFF = "broke_off"  # the status label of a response cut off with its provider's


def endpoint_of(path: str) -> str:
    """`chat` or `responses` for a path with memory, the label of its histograms."""
    match = CHAT_PATH.fullmatch(path)
    return "responses" if match is not None and match.group(3) == "responses" else "chat"


class RequestMetrics:
    """Count every HTTP request into `metrics`; chat POSTs also by status, and their TTFB."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        chat = _is_chat(scope)
        started = time.perf_counter()
        status: int | str | None = None
        first_byte = False

        async def noting(message: Message) -> None:
            nonlocal status, first_byte
            if message["type"] == "http.response.start":
                status = message["status"]
            elif chat and not first_byte and message.get("body"):
                first_byte = True
                if isinstance(status, int) and status < 400:
                    elapsed = time.perf_counter() - started
                    await send(message)  # the byte first, then the histogram
                    self.metrics.ttfb.labels(endpoint_of(scope["path"])).observe(elapsed)
                    return
            await send(message)

        try:
            await self.app(scope, receive, noting)
        except BrokeOff:
            status = BROKE_OFF  # the head said 200, the body never ended
            raise
        except Exception:
            status = status or 500  # what the client is answered, unless a head went out
            raise
        finally:
            if status is not None:
                self._count(scope, status, chat)

    def _count(self, scope: Scope, status: int | str, chat: bool) -> None:
        route = scope.get("route")
        template = getattr(route, "path", None) or "(none)"
        method = scope["method"] if scope["method"] in METHODS else "other"
        self.metrics.requests.labels(template, method, str(status)).inc()
        if chat:
            self.metrics.chat_requests.labels(str(status)).inc()


def _is_chat(scope: Scope) -> bool:
    return scope["method"] == "POST" and CHAT_PATH.fullmatch(scope["path"]) is not None
