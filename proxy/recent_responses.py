"""Responses API replies that just finished, by id: their session, before the writer stores it.

An agent continues a reply (`previous_response_id`) milliseconds after it ends, often before
the background writer has stored the turn and its link (`memory/store/response_links.py`). The
relay notes each reply here when the provider says it is complete, before the client has its
last byte, so the next request finds its session in RAM; older ones are read from the store.
Bounded: the oldest entries go first, and by then the writer has stored them. `NewestKept` is
the bounded map, shared with the replies still being written (`proxy/background.py`).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from memory import ResponseLink

# Replies kept in RAM. The writer stores a turn within a batch's time (seconds), far sooner
# than this many replies finish, except when its queue is backed up past this size.
RECENT_REPLIES = 10_000

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class NewestKept(Generic[K, V]):
    """A map of at most `size` entries: past it, the one noted longest ago goes."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._entries: OrderedDict[K, V] = OrderedDict()

    def note(self, key: K, value: V) -> None:
        self._entries[key] = value
        self._entries.move_to_end(key)
        while len(self._entries) > self._size:
            self._entries.popitem(last=False)

    def get(self, key: K) -> V | None:
        return self._entries.get(key)

    def pop(self, key: K) -> V | None:
        return self._entries.pop(key, None)

    def drop(self, doomed: Callable[[K, V], bool]) -> None:
        """Let go of every entry `doomed` picks."""
        for key in [key for key, value in self._entries.items() if doomed(key, value)]:
            del self._entries[key]


class RecentResponses:
    """A bounded map (user id, response id) → `ResponseLink`, newest kept."""

    def __init__(self, size: int = RECENT_REPLIES) -> None:
        self._links: NewestKept[tuple[str, str], ResponseLink] = NewestKept(size)

    def note(self, user_id: str, response_id: str, link: ResponseLink) -> None:
        self._links.note((user_id, response_id), link)

    def get(self, user_id: str, response_id: str) -> ResponseLink | None:
        return self._links.get((user_id, response_id))

    def drop(self, user_id: str, session_id: str | None = None) -> None:
        """Let a forgotten user's replies go (of one session, when named): a continuation
        must not find their session."""
        self._links.drop(
            lambda key, link: key[0] == user_id and session_id in (None, link.session_id)
        )
