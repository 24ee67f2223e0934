"""Who is due for LLM consolidation: per user, the newest message a consolidation has read.

The optional schedule (`proxy/consolidate.py`) asks the model about a user only once enough
new turns have arrived, so a quiet user costs nothing and a busy one is not asked every cycle.
The mark is the id of the newest message the last consolidation covered, one row per user in
`consolidation_marks` (migration `m005_consolidation_marks`; a table of its own rather than
`meta` rows, so it is keyed, read and deleted by user like every other per-user table). A
user is due when at least `min_new_turns` user or assistant messages with text have ids above
their mark (no mark: above 0). Message ids only grow, so "above the mark" means "arrived
since"; a message imported under an older, free id is not counted.

This module holds SQL (as `memory/store/fact_rows.py` does) so that `store.py` stays under
STYLE.md's 400 lines; it uses the store's connections. `Store.delete_user` deletes the mark
with the rest of the user.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from memory.records import Message
from memory.store.backend import StoreBackend as Store
from memory.store.message_rows import message_from_row

# What counts as a turn, as `proxy/consolidate.py` reads them: user or assistant, with text.
_COUNTED = "m.role IN ('user', 'assistant') AND trim(m.content, char(32, 9, 10, 13)) != ''"


@dataclass(frozen=True, slots=True)
class DueUser:
    """A user with `new_turns` unconsolidated turns, the newest of them `newest_message_id`."""

    user_id: str
    new_turns: int
    newest_message_id: int


def users_due(store: Store, min_new_turns: int, user_id: str | None = None) -> list[DueUser]:
    """Users with at least `min_new_turns` turns above their mark, longest waiting first.

    With `user_id`, only that user is considered (a list of one, or empty). Without it this is
    one pass over the message table, grouped by user: run it in a worker thread, once a cycle.
    """
    if min_new_turns < 1:
        raise ValueError(f"min_new_turns must be at least 1, got {min_new_turns}")
    only = "AND m.user_id = ?" if user_id is not None else ""
    params: list[Any] = [] if user_id is None else [user_id]
    rows = store.read(
        "SELECT m.user_id, count(*), max(m.id) FROM messages m "
        "LEFT JOIN consolidation_marks c ON c.user_id = m.user_id "
        f"WHERE m.id > coalesce(c.message_id, 0) AND {_COUNTED} {only} "
        "GROUP BY m.user_id HAVING count(*) >= ? ORDER BY min(m.id)",
        [*params, min_new_turns],
    )
    return [DueUser(str(row[0]), int(row[1]), int(row[2])) for row in rows]


def mark_consolidated(
    store: Store, user_id: str, message_id: int, now: float | None = None
) -> bool:
    """Record that the user's turns up to `message_id` were consolidated; False if not stored.

    The mark never moves back (a slower, older run finishing last cannot undo a newer one),
    and is only written while the user still has that message: a run that ends after the user
    was deleted must not leave a mark behind for a later user of the same id.
    """
    with store.write() as db:
        cursor = db.execute(
            "INSERT INTO consolidation_marks (user_id, message_id, marked_at) "
            "SELECT ?, ?, ? WHERE EXISTS "
            "(SELECT 1 FROM messages WHERE user_id = ? AND id = ?) "
            "ON CONFLICT (user_id) DO UPDATE SET "
            # Qualified: Postgres finds a bare message_id ambiguous here (no mark was written).
            "message_id = max(consolidation_marks.message_id, excluded.message_id), "
            "marked_at = excluded.marked_at",
            (user_id, message_id, time.time() if now is None else now, user_id, message_id),
        )
        return bool(cursor.rowcount)


def unread_turns(store: Store, user_id: str, limit: int) -> list[Message]:
    """The user's oldest `limit` turns above their mark, oldest first: the next batch to read."""
    rows = store.read(
        "SELECT m.id, m.user_id, m.session_id, m.role, m.name, m.content, m.created_at, "
        "m.partial FROM messages m WHERE m.user_id = ? AND m.id > coalesce("
        "(SELECT message_id FROM consolidation_marks WHERE user_id = ?), 0) "
        f"AND {_COUNTED} ORDER BY m.id LIMIT ?",
        (user_id, user_id, limit),
    )
    return [message_from_row(row) for row in rows]


def consolidated_through(store: Store, user_id: str) -> int:
    """The user's mark: the newest message id consolidated, or 0 when never."""
    rows = store.read("SELECT message_id FROM consolidation_marks WHERE user_id = ?", (user_id,))
    return int(rows[0][0]) if rows else 0
