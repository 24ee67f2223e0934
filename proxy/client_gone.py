"""A client that leaves while moim waits for the provider ends the provider's call.

A non-streamed reply (and the head of a stream) comes from the provider only once it is
ready: for a long completion, tens of seconds. A client that left meanwhile (its own timeout,
a closed tab, an SDK about to retry) left moim waiting on the provider up to `read_timeout`,
the model generating for no one on an upstream connection held for it; called directly, the
client's closed connection ends the call at the provider. `until_client_leaves` waits for the
provider while listening on the client's connection, and when that closes first, cancels the
wait (httpx closes the upstream connection) and raises `ClientLeft`: the byte path
(`proxy/pipeline.py`'s `forward_bytes`), chat's litellm path (`proxy/chat.py`) and each round
of the memory tool loop (`proxy/tool_loop.py`) then hand what the client said to the writer,
as when a client leaves a stream, and the request is logged with nginx's 499. The
pass-through, whose body may still be streaming upstream, does not listen.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

from starlette.types import Receive

T = TypeVar("T")

# nginx's status for a request whose client closed the connection first: no one reads it,
# but the log line and the metrics say what happened.
CLIENT_CLOSED = 499


class ClientLeft(Exception):
    """The client closed its connection before the provider answered."""


async def until_client_leaves(receive: Receive, waiting: Awaitable[T]) -> T:
    """What `waiting` comes to; `ClientLeft` (and `waiting` cancelled) if the client's
    connection closes first. The request's body must have been read: `receive` then says only
    that the connection closed.

    `waiting` runs in this task, and one more listens (~16 µs a request on a busy 2-core
    machine; a task for each, ~27): the listener cancels this task when the client leaves,
    and that cancel is told from one of the request's own by `uncancel`."""
    task = asyncio.current_task()
    assert task is not None
    listening, left = True, False

    def leave(gone: asyncio.Task[None]) -> None:
        nonlocal left
        if listening and not gone.cancelled() and gone.exception() is None:
            left = True
            task.cancel()

    gone = asyncio.ensure_future(_disconnect(receive))
    gone.add_done_callback(leave)
    try:
        return await waiting
    except asyncio.CancelledError:
        if left and task.uncancel() == 0:  # the listener's cancel, and no other
            raise ClientLeft from None
        raise
    finally:
        listening = False  # a callback already scheduled now does nothing
        gone.cancel()


async def _disconnect(receive: Receive) -> None:
    """Returns when the client's connection closes."""
    while (await receive())["type"] != "http.disconnect":
        pass
