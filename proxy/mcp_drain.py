"""`moim mcp`'s streams, so that every request read from stdin is answered before it exits.

The MCP SDK's dispatcher cancels the requests still being handled as soon as its read stream
ends: a client that writes `initialize` and a `tools/call`, then closes stdin (a script's
`printf … | moim mcp`), got the first answer and not the second. Here the end of stdin is held
back from the SDK until every request read has had its response written (or was cancelled by
the client's `notifications/cancelled`, which the spec leaves unanswered).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import anyio
import mcp_types as types
from mcp.shared.message import SessionMessage


class Unanswered:
    """The ids of the requests read and not yet answered; `drained` once there are none."""

    def __init__(self) -> None:
        self._ids: Counter[str] = Counter()  # "7" and 7 are one id to the SDK, as here
        self._none_left = anyio.Event()
        self._none_left.set()

    def read(self, message: Any) -> None:
        if isinstance(message, types.JSONRPCRequest):
            self._ids[str(message.id)] += 1
            self._none_left = anyio.Event()
        elif isinstance(message, types.JSONRPCNotification):
            if message.method == "notifications/cancelled":
                self._answer((message.params or {}).get("requestId"), every=True)

    def written(self, message: Any) -> None:
        if isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
            self._answer(message.id)

    async def drained(self) -> None:
        await self._none_left.wait()

    def _answer(self, request_id: Any, every: bool = False) -> None:
        key = str(request_id)
        if key in self._ids:
            self._ids[key] = 0 if every else self._ids[key] - 1
            if self._ids[key] <= 0:
                del self._ids[key]
        if not self._ids:
            self._none_left.set()


class DrainingReader:
    """The stdin stream as the SDK reads it, ending only once `unanswered` is drained."""

    def __init__(self, stream: Any, unanswered: Unanswered) -> None:
        self._stream = stream
        self._unanswered = unanswered

    @property
    def last_context(self) -> Any:  # the sender's contextvars, which the SDK looks for
        return getattr(self._stream, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        try:
            item = await self._stream.receive()
        except anyio.EndOfStream:
            await self._unanswered.drained()
            raise
        if isinstance(item, SessionMessage):
            self._unanswered.read(item.message)
        return item  # type: ignore[no-any-return]

    async def aclose(self) -> None:
        await self._stream.aclose()

    def __aiter__(self) -> DrainingReader:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> DrainingReader:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: Any
    ) -> None:
        await self.aclose()


class AnsweringWriter:
    """The stdout stream as the SDK writes it, telling `unanswered` of each response."""

    def __init__(self, stream: Any, unanswered: Unanswered) -> None:
        self._stream = stream
        self._unanswered = unanswered

    async def send(self, item: SessionMessage, /) -> None:
        await self._stream.send(item)
        self._unanswered.written(item.message)

    async def aclose(self) -> None:
        await self._stream.aclose()

    async def __aenter__(self) -> AnsweringWriter:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: Any
    ) -> None:
        await self.aclose()
