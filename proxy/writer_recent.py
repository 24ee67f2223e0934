"""Which of a user's finished turns recall cannot find yet, for a request to wait on.

A turn becomes searchable once the writer (proxy/writer.py) has stored and indexed it, from
tens of milliseconds to a few seconds after its answer ended. A person typing the next
message never meets the gap; a script does: it ends one conversation and asks about it in
a new one at once, and recall would answer from a memory without it. So every submitted
turn is noted here, with its place in the writer's order (`Progress.submitted`), until it
is indexed, and a request that reads memory waits (`memory.recall_wait` seconds at most,
proxy/pipeline.py) for the user's turns it does not carry itself. A turn of the request's
own conversation needs no recall when the request resends what it said (a client may reword
the reply it resends), or when the provider holds it (a Responses API request continuing that
reply): an agent's tool loop, whose every round follows the last within milliseconds, never
waits. One whose messages the client dropped in part (a sliding window, a summary in their
place, a cut middle, a long history sent at once and then only its end) is waited for: recall
is what brings them back. A turn of another conversation counts as carried only when its
reply is resent too: one alike line ("OK", "Thanks!") says little when a stand-in or a person
says it every time. Only the user's and the assistant's messages count, those recall shows.
A turn's messages are hashed as it is noted, and only their hashes kept: under a writer backlog
every turn waits here until indexed, past the queue that lets its turns go once stored (or
spilled to the journal), and holding the turns themselves held every one's history (an agent's:
hundreds of kB, its JSON text beside it). The request's own messages were hashed by its recall
a moment before (remembered: `memory/ingest/identity.py`), so it costs ~0.05 ms for a
40-message history; 100 messages of 10 kB never seen before, ~5 ms.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memory import RECALLED_ROLES, Journal, Turn, content_hash

# At most this many turns a previous process left in the journal are noted at start (`add_left`).
_NOTED_LEFT = 1_000


@dataclass(frozen=True, slots=True)
class _Unsearchable:
    place: int  # the turn's number in the writer's order: indexed once `indexed` reaches it
    user_id: str
    session_id: str
    response_id: str | None
    said: frozenset[str]  # the hashes of its user and assistant messages (not its reply)
    reply: str | None  # its reply's hash (None: no reply, or text that is not valid Unicode)

    def carried(self, session_id: str, carried: set[str]) -> bool:
        """Whether a request in `session_id` carrying the messages hashed `carried` carries
        this turn: what it said, and its reply too when the request is of another session."""
        if not self.said <= carried:
            return False
        return self.session_id == session_id or self.reply is None or self.reply in carried


class RecentTurns:
    """The submitted turns not yet indexed, by user (read and changed on the event loop)."""

    def __init__(self) -> None:
        self._in_order: deque[_Unsearchable] = deque()
        self._by_user: dict[str, deque[_Unsearchable]] = {}

    def __len__(self) -> int:
        return len(self._in_order)

    def add(self, turn: Turn, place: int) -> None:
        shown = (m for m in turn.messages if m.get("role") in RECALLED_ROLES)
        said = frozenset(h for h in map(_hash, shown) if h is not None)
        reply = _hash(turn.reply) if turn.reply is not None else None
        entry = _Unsearchable(place, turn.user_id, turn.session_id, turn.response_id, said, reply)
        self._in_order.append(entry)
        self._by_user.setdefault(turn.user_id, deque()).append(entry)

    def add_left(self, journal: Journal, left: int) -> None:
        """Note the `left` turns a previous process left in the journal (a crash, `kill -9`):
        a question about one, asked as soon as the server is back, waits for its replay and
        indexing rather than go on without it. They are stored and indexed together, before
        any turn of this process: each is found at the last of their places. A large journal
        is not read twice: the wait would not wait behind its backlog anyway."""
        if not 0 < left <= _NOTED_LEFT:
            return
        try:
            for turn in journal.turns():
                self.add(turn, left)
        except OSError:  # its replay says why
            pass

    def indexed(self, count: int) -> None:
        """The first `count` turns submitted are indexed: forget them."""
        while self._in_order and self._in_order[0].place <= count:
            entry = self._in_order.popleft()
            mine = self._by_user.get(entry.user_id)
            if mine and mine[0] is entry:
                mine.popleft()
                if not mine:
                    del self._by_user[entry.user_id]

    def forget(self, user_id: str) -> None:
        """A forgotten user's turns are never stored: nothing of theirs to wait for."""
        self._by_user.pop(user_id, None)
        self._in_order = deque(e for e in self._in_order if e.user_id != user_id)

    def awaited(
        self,
        user_id: str,
        session_id: str,
        continues: str | None,
        messages: Sequence[Mapping[str, Any]],
    ) -> list[int]:
        """The places, in the writer's order, of `user_id`'s turns not yet indexed that a
        request in `session_id` (continuing the reply `continues`, carrying `messages`) does
        not carry: the writer must reach the last before it can recall them all."""
        mine = self._by_user.get(user_id)
        if not mine:
            return []
        waited = [e for e in mine if e.response_id is None or e.response_id != continues]
        if not waited:
            return []
        # a turn's hashes are of its user and assistant messages (`add`): only those can carry
        # one (an agent's tool results, most of its history, are not hashed again here)
        shown = (m for m in messages if m.get("role") in RECALLED_ROLES)
        carried = {h for h in map(_hash, shown) if h is not None}
        return [e.place for e in waited if not e.carried(session_id, carried)]


def _hash(message: Mapping[str, Any]) -> str | None:
    """`content_hash` of `message`; None for text that is not valid Unicode (never stored,
    so never resent)."""
    try:
        return content_hash(message)
    except ValueError:
        return None
