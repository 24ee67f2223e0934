"""Forgetting one conversation of a user (`DELETE /v1/memory/sessions/{id}`): its rows.

The session's messages go, with their chunks (their FTS5 rows by trigger, the vocabulary
words they brought by cascade), their vectors (SQLite deletes those itself: sqlite-vec has no
cascade; Postgres's cascade) and the Responses API replies linked to the session. Facts stay:
they are the user's, learned in a conversation but not of it. With `facts`, the fact rows
whose source is one of the session's messages (a row keeps the message it was extracted
from: `source_message_id`) go too; a row one of them had superseded stays superseded, as
history. Facts set through the API or imported have no source and always stay.

Written once, in SQLite's spelling, for both stores (`memory/store/pg_sql.py` translates it).
"""

from __future__ import annotations

from typing import Any, NamedTuple


class SessionForgotten(NamedTuple):
    """What forgetting a session removed: messages and fact rows (counts), and the chunks'
    ids, for the lexical index and the caches that mirror them."""

    messages: int
    facts: int
    chunk_ids: list[int]


def delete_session_rows(
    db: Any, user_id: str, session_id: str, facts: bool
) -> SessionForgotten | None:
    """Delete one session of one user inside the caller's write transaction (None, and
    nothing changed, when the user has no such session)."""
    where = "user_id = ? AND session_id = ?"
    found = db.execute(f"SELECT 1 FROM messages WHERE {where} LIMIT 1", (user_id, session_id))
    if found.fetchone() is None:
        return None
    rows = db.execute(f"SELECT id FROM chunks WHERE {where} ORDER BY id", (user_id, session_id))
    chunk_ids = [int(row[0]) for row in rows.fetchall()]
    removed_facts = 0
    if facts:
        sourced = (
            "SELECT id FROM facts WHERE user_id = ? AND source_message_id IN "
            f"(SELECT id FROM messages WHERE {where})"
        )
        params = (user_id, user_id, session_id)
        db.execute(
            f"UPDATE facts SET superseded_by = NULL WHERE user_id = ? AND superseded_by IN "
            f"({sourced})",
            (user_id, *params),
        )
        cur = db.execute(f"DELETE FROM facts WHERE id IN ({sourced})", params)
        removed_facts = int(cur.rowcount)
    db.execute(f"DELETE FROM chunks WHERE {where}", (user_id, session_id))
    db.execute(f"DELETE FROM response_links WHERE {where}", (user_id, session_id))
    cur = db.execute(f"DELETE FROM messages WHERE {where}", (user_id, session_id))
    return SessionForgotten(int(cur.rowcount), removed_facts, chunk_ids)
