"""The SQL of messages a conversation left behind (memory/ingest/branches.py says which).

A message the user edited away, or a reply they regenerated, stays in the log (stored and
exported as ever) with `indexed = 3` (0: waiting, 1: indexed, 2: set aside): its chunks go,
so no search finds it, no indexing pass takes it again, `moim reindex` leaves it out, and its
neighbours' excerpts do not show it. A fact learned from it goes too, and the fact it had
replaced is current again: the user took the statement back. When a later request carries
the message again (the user went back to that branch), it is indexed again.

Written once, in SQLite's spelling, for both stores (`memory/store/pg_sql.py` translates it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

# The value of `messages.indexed` for a message left behind.
LEFT = 3


class StoredMessage(NamedTuple):
    """A stored message of a session, as the branch rule reads it."""

    id: int
    key: str
    role: str
    content: str
    created_at: float
    left: bool


def session_messages(
    store: Any, user_id: str, session_id: str, keys: Sequence[str]
) -> list[StoredMessage]:
    """The session's messages with these keys, in the order stored."""
    if not keys:
        return []
    marks = ",".join("?" * len(keys))
    rows = store.read(
        "SELECT id, message_key, role, content, created_at, indexed FROM messages "
        f"WHERE user_id = ? AND session_id = ? AND message_key IN ({marks}) ORDER BY id",
        (user_id, session_id, *keys),
    )
    return [StoredMessage(int(r[0]), r[1], r[2], r[3], float(r[4]), r[5] == LEFT) for r in rows]


def latest_messages(store: Any, user_id: str, session_id: str, n: int) -> list[StoredMessage]:
    """The session's `n` latest user and assistant messages not left behind, oldest first."""
    rows = store.read(
        "SELECT id, message_key, role, content, created_at, indexed FROM messages "
        "WHERE user_id = ? AND session_id = ? AND role IN ('user', 'assistant') "
        f"AND indexed != {LEFT} ORDER BY id DESC LIMIT ?",
        (user_id, session_id, n),
    )
    return [StoredMessage(int(r[0]), r[1], r[2], r[3], float(r[4]), False) for r in rows][::-1]


def opened_at(store: Any, user_id: str, session_id: str) -> float | None:
    """When the session's first message was stored (None: it has none)."""
    rows = store.read(
        "SELECT created_at FROM messages WHERE user_id = ? AND session_id = ? ORDER BY id LIMIT 1",
        (user_id, session_id),
    )
    return float(rows[0][0]) if rows else None


def left_keys(store: Any, user_id: str, session_id: str) -> set[str]:
    """Keys of the session's messages left behind (read from the partial index of them)."""
    rows = store.read(
        f"SELECT message_key FROM messages WHERE user_id = ? AND session_id = ? "
        f"AND indexed = {LEFT}",
        (user_id, session_id),
    )
    return {str(row[0]) for row in rows}


def take_back(
    store: Any, user_id: str, session_id: str, keys: Sequence[str]
) -> list[StoredMessage]:
    """Index these left messages of the session again (a request carries them once more);
    return the ones taken back, in the order stored (their facts are read again)."""
    if not keys:
        return []
    marks = ",".join("?" * len(keys))
    mine = f"user_id = ? AND session_id = ? AND indexed = {LEFT} AND message_key IN ({marks})"
    params = (user_id, session_id, *keys)
    with store.write() as db:
        rows = db.execute(
            f"SELECT id, message_key, role, content, created_at FROM messages WHERE {mine} "
            "ORDER BY id",
            params,
        ).fetchall()
        db.execute(f"UPDATE messages SET indexed = 0 WHERE {mine}", params)
    return [StoredMessage(int(r[0]), r[1], r[2], r[3], float(r[4]), False) for r in rows]


def leave_rows(db: Any, user_id: str, message_ids: Sequence[int]) -> list[int]:
    """Inside the caller's write transaction: mark the user's messages left, delete their
    chunks and the facts learned from them (bringing back the facts those had replaced);
    return the chunks' ids, for the vectors, the lexical index and the caches."""
    if not message_ids:
        return []
    marks = ",".join("?" * len(message_ids))
    mine = f"user_id = ? AND message_id IN ({marks})"
    params = (user_id, *message_ids)
    rows = db.execute(f"SELECT id FROM chunks WHERE {mine} ORDER BY id", params).fetchall()
    chunk_ids = [int(row[0]) for row in rows]
    sourced = f"SELECT id FROM facts WHERE user_id = ? AND source_message_id IN ({marks})"
    replaced = db.execute(
        f"SELECT id FROM facts WHERE user_id = ? AND status = 'superseded' "
        f"AND superseded_by IN ({sourced})",
        (user_id, *params),
    ).fetchall()
    db.execute(
        f"UPDATE facts SET superseded_by = NULL WHERE user_id = ? AND superseded_by IN ({sourced})",
        (user_id, *params),
    )
    db.execute(f"DELETE FROM facts WHERE id IN ({sourced})", params)
    for (fact_id,) in replaced:  # the one a left statement replaced is current again
        db.execute(
            "UPDATE facts SET status = 'active' WHERE id = ? AND user_id = ? AND NOT EXISTS "
            "(SELECT 1 FROM facts AS other WHERE other.user_id = facts.user_id "
            "AND other.key = facts.key AND other.status = 'active')",
            (fact_id, user_id),
        )
    db.execute(f"DELETE FROM chunks WHERE {mine}", params)
    db.execute(
        f"UPDATE messages SET indexed = {LEFT} WHERE user_id = ? AND id IN ({marks})", params
    )
    return chunk_ids
