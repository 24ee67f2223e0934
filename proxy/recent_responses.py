"""Responses API replies that just finished, by id: their session, before the writer stores it.

An agent continues a reply (`previous_response_id`) milliseconds after it ends, often before
the background writer has stored the turn and its link (`memory/store/response_links.py`). The
relay notes each reply here when the provider says it is complete, before the client has its
last byte, so the next request finds its session in RAM; older ones are read from the store.
Bounded: the oldest entries go first, and by then the writer has stored them.
"""

from __future__ import annotations

from collections import OrderedDict

from memory import ResponseLink

# Replies kept in RAM. The writer stores a turn within a batch's time (seconds), far sooner
# than this many replies finish, except when its queue is backed up past this size.
RECENT_REPLIES = 10_000


class RecentResponses:
    """A bounded map (user id, response id) → `ResponseLink`, newest kept."""

    def __init__(self, size: int = RECENT_REPLIES) -> None:
        self._size = size
        self._links: OrderedDict[tuple[str, str], ResponseLink] = OrderedDict()

    def note(self, user_id: str, response_id: str, link: ResponseLink) -> None:
        self._links[(user_id, response_id)] = link
        self._links.move_to_end((user_id, response_id))
        while len(self._links) > self._size:
            self._links.popitem(last=False)

    def get(self, user_id: str, response_id: str) -> ResponseLink | None:
        return self._links.get((user_id, response_id))

    def drop(self, user_id: str) -> None:
        """Let a forgotten user's replies go: a continuation must not find their session."""
        for key in [key for key in self._links if key[0] == user_id]:
            del self._links[key]
