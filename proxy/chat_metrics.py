"""Chat requests counted by the status they were answered with (`moim_chat_requests_total`).

A pure ASGI middleware around the whole app, so every chat request counts however it ends:
a reply (a stream counts when its head is sent), a refusal before any route runs (a 431
from `HeaderLimit`), one the handler answers (400, 408, 413, 499 …) or the app's error
handler renders, and a crash: Starlette turns an unhandled exception into its 500 outside
every middleware, so it is counted here as it passes. Counting in the handler missed the
last two.
"""

from __future__ import annotations

import re

from starlette.types import ASGIApp, Message, Receive, Scope, Send

# CONTRACT.md's chat endpoints: /v1/chat/completions, /chat/completions, and the /u/{user}
# forms of both.
CHAT_PATH = re.compile(r"(/u/[^/]+)?(/v1)?/(chat/completions|responses)")


class ChatRequests:
    """Count POSTs to the chat endpoints into `counts` (status -> requests)."""

    def __init__(self, app: ASGIApp, counts: dict[int, int]) -> None:
        self.app = app
        self.counts = counts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not _is_chat(scope):
            await self.app(scope, receive, send)
            return
        status: int | None = None

        async def noting_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, noting_status)
        except Exception:
            status = status or 500  # what the client is answered, unless a head went out
            raise
        finally:
            if status is not None:
                self.counts[status] = self.counts.get(status, 0) + 1


def _is_chat(scope: Scope) -> bool:
    return (
        scope["type"] == "http"
        and scope["method"] == "POST"
        and CHAT_PATH.fullmatch(scope["path"]) is not None
    )
