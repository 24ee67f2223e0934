"""The users (or sessions) forgotten while requests of theirs may be under way, so those
store nothing.

A request takes a mark as it arrives (`ForgottenUsers.mark`); when it ends, its turn is not
stored if its user was forgotten since (`forgotten_since`): a reply streaming while its user
was forgotten would otherwise bring back, when it ends, the whole history its request resent.

The map user → latest forget is bounded (`KEPT`, newest kept), or every `DELETE /v1/memory`
would stay in RAM for the process's life. A forget dropped from it is remembered by its mark
alone (`floor`): a request that arrived before that mark is taken as forgotten, its turn not
stored, rather than risk storing a forgotten user's words again. Only a request under way
across `KEPT` forgets of other users meets that.
"""

from __future__ import annotations

import logging
from collections import OrderedDict

logger = logging.getLogger(__name__)

KEPT = 10_000  # forgets kept by user: ~1 MB

# Who was forgotten: a user id, or (user id, session id) for one session of theirs.
Forgotten = str | tuple[str, str]


class ForgottenUsers:
    """Forgets by mark, the newest `kept` by user; the event loop's alone (not thread-safe)."""

    def __init__(self, kept: int = KEPT) -> None:
        self._kept = kept
        self._forgets = 0  # users forgotten so far: the marks
        self._latest: OrderedDict[Forgotten, int] = OrderedDict()  # user → their latest mark
        self.floor = 0  # the newest mark among the forgets no longer kept by user

    def __len__(self) -> int:
        return len(self._latest)

    def mark(self) -> int:
        """A mark of this moment, taken as a request arrives."""
        return self._forgets

    def add(self, user_id: Forgotten) -> None:
        """`user_id` (or one session of theirs: (user id, session id)) is forgotten now."""
        self._forgets += 1
        self._latest[user_id] = self._forgets
        self._latest.move_to_end(user_id)
        if len(self._latest) > self._kept:
            _, self.floor = self._latest.popitem(last=False)

    def forgotten_since(self, user_id: Forgotten, mark: int) -> bool:
        """Whether `user_id` was forgotten after `mark`, or may have been (a forget since
        `mark` is no longer kept by user)."""
        if self._latest.get(user_id, 0) > mark:
            return True
        if mark < self.floor:
            logger.warning(
                "a request under way across %d forgets: its turn is not stored", self._kept
            )
            return True
        return False
