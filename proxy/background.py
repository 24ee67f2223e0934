"""Responses API replies written in the background (`background: true`), awaited by id.

The provider answers such a request at once, `queued` (or `in_progress`) and with no output,
and writes the reply later; the client polls `GET /v1/responses/{id}` until it is `completed`.
The request's messages are stored when it is answered, as for any request, but its reply only
ever reaches the client through a poll, a pass-through (a streamed one too, when its stream
ends before the reply does: the provider writes on, and the client resumes the events with
`?stream=true`). So the relay notes each such reply here, with where it belongs (`Awaited`),
and the pass-through reads a poll of a noted reply on the side while its bytes go to the
client unchanged (`proxy.responses.watch_poll`): the first poll that finds the reply
completed hands it, whole, to the writer, and its note goes.
"""

from __future__ import annotations

from dataclasses import dataclass

from proxy.recent_responses import NewestKept

# Replies awaited at once; past this the oldest note goes (its reply is then not stored).
AWAITED_REPLIES = 10_000


@dataclass(frozen=True, slots=True)
class Awaited:
    """Where a reply being written in the background is stored once it is done."""

    user_id: str
    session_id: str
    model: str
    arrived_at: float | None = None  # the request's (`Turn.arrived_at`)


class BackgroundReplies:
    """A bounded map response id → `Awaited`, newest kept."""

    def __init__(self, size: int = AWAITED_REPLIES) -> None:
        self._awaited: NewestKept[str, Awaited] = NewestKept(size)

    def note(self, response_id: str, awaited: Awaited) -> None:
        self._awaited.note(response_id, awaited)

    def get(self, response_id: str) -> Awaited | None:
        return self._awaited.get(response_id)

    def done(self, response_id: str) -> Awaited | None:
        """Take the note of a reply about to be stored (a later poll then stores nothing)."""
        return self._awaited.pop(response_id)

    def drop(self, user_id: str, session_id: str | None = None) -> None:
        """Let a forgotten user's awaited replies go (of one session, when named): a later
        poll must not store them."""
        self._awaited.drop(
            lambda _, awaited: (
                awaited.user_id == user_id and session_id in (None, awaited.session_id)
            )
        )
