"""The SQL of messages set aside by indexing (memory/index_failures.py says when and why).

A message no indexing pass can index gets `indexed = 2` (0: waiting, 1: indexed): stored and
exported as ever, skipped by every pass, counted from a partial index of them (migrations
m011 / Postgres m006), retried after `moim reindex` (which sets every message to 0). Written
once, in SQLite's spelling, for both stores (`memory/store/pg_sql.py` translates it).
"""

from __future__ import annotations

from typing import Any

# The value of `messages.indexed` for a message set aside.
FAILED = 2


def mark_failed(store: Any, message_id: int) -> None:
    """Set one unindexed message aside. On Postgres the failed pass's claim still locks the
    message: it is let go first."""
    release = getattr(store, "release_claim", None)
    if release is not None:
        release()
    with store.write() as db:
        db.execute(
            "UPDATE messages SET indexed = ? WHERE id = ? AND indexed = 0", (FAILED, message_id)
        )


def count_failed(store: Any, user_id: str | None = None) -> int:
    """Messages set aside: of one user, or of every user (None); read from the partial index
    of them, not the table."""
    failed = f"indexed = {FAILED}"  # a literal, not a parameter: the partial index's term
    if user_id is None:
        rows = store.read(f"SELECT count(*) FROM messages WHERE {failed}")
    else:
        rows = store.read(
            f"SELECT count(*) FROM messages WHERE user_id = ? AND {failed}", (user_id,)
        )
    return int(rows[0][0])


def oldest_unindexed(store: Any, limit: int) -> set[int]:
    """The ids of the `limit` oldest unindexed messages: those a failed pass took (read only,
    not claimed as a pass claims them on Postgres)."""
    rows = store.read("SELECT id FROM messages WHERE indexed = 0 ORDER BY id LIMIT ?", (limit,))
    return {int(row[0]) for row in rows}
