"""Summaries for people looking at the store: its users, and one user's sessions.

For the inspector (and the CLI): what is stored, for whom, and how recently. `users` is the
one read that spans users, which is its purpose; `only` scopes it to the users a caller may
see, in the SQL like every other query. Times are Unix seconds as stored.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memory.store.backend import StoreBackend as Store

# Characters of a session's first user message shown as its title.
OPENING_CHARS = 120


@dataclass(frozen=True, slots=True)
class UserSummary:
    """One user's counts: messages, sessions, active facts, and their newest write."""

    user_id: str
    messages: int
    sessions: int
    facts: int
    last_active: float | None


@dataclass(frozen=True, slots=True)
class SessionSummary:
    """One session: how many messages, when it started and last moved, how it opened."""

    session_id: str
    messages: int
    started_at: float
    last_at: float
    opening: str


def users(store: Store, only: Sequence[str] | None = None, limit: int = 1000) -> list[UserSummary]:
    """Users with messages or facts, the most recently active first.

    `only` restricts the list to those user ids (None: every user); at most `limit` rows.
    """
    where, params = "", []
    if only is not None:
        if not only:
            return []
        where = f"WHERE user_id IN ({','.join('?' * len(only))})"
        params = list(only)
    rows = store.read(
        f"WITH m AS (SELECT user_id, count(*) AS messages, count(DISTINCT session_id) AS "
        f"sessions, max(created_at) AS last_at FROM messages {where} GROUP BY user_id), "
        f"f AS (SELECT user_id, count(*) FILTER (WHERE status = 'active') AS facts, "
        f"max(updated_at) AS last_at FROM facts {where} GROUP BY user_id), "
        "u AS (SELECT user_id FROM m UNION SELECT user_id FROM f), "
        # SQL both stores speak: no sum of booleans, no two-argument max() (PostgreSQL's is
        # greatest()).
        "t AS (SELECT u.user_id, coalesce(m.messages, 0) AS messages, "
        "coalesce(m.sessions, 0) AS sessions, coalesce(f.facts, 0) AS facts, "
        "coalesce(m.last_at, 0) AS m_last, coalesce(f.last_at, 0) AS f_last "
        "FROM u LEFT JOIN m ON m.user_id = u.user_id LEFT JOIN f ON f.user_id = u.user_id) "
        "SELECT user_id, messages, sessions, facts, "
        "CASE WHEN m_last > f_last THEN m_last ELSE f_last END AS last_at "
        "FROM t ORDER BY last_at DESC, user_id LIMIT ?",
        [*params, *params, limit],
    )
    return [_user(row) for row in rows]


def _user(row: Sequence[Any]) -> UserSummary:
    last = float(row[4]) if row[4] else None
    return UserSummary(str(row[0]), int(row[1]), int(row[2]), int(row[3]), last)


def sessions(store: Store, user_id: str, limit: int = 500) -> list[SessionSummary]:
    """The user's sessions, the most recently active first, at most `limit`."""
    rows = store.read(
        "SELECT session_id, count(*), min(created_at), max(created_at), "
        "(SELECT substr(o.content, 1, ?) FROM messages o WHERE o.user_id = m.user_id "
        "AND o.session_id = m.session_id AND o.role = 'user' ORDER BY o.id LIMIT 1) "
        "FROM messages m WHERE user_id = ? GROUP BY user_id, session_id "  # Postgres: both
        "ORDER BY max(created_at) DESC, session_id LIMIT ?",
        (OPENING_CHARS, user_id, limit),
    )
    return [
        SessionSummary(str(r[0]), int(r[1]), float(r[2]), float(r[3]), str(r[4] or ""))
        for r in rows
    ]


def user_ids(store: Store) -> list[str]:
    """Every user with a message or a fact, sorted, however many (a whole-store copy)."""
    rows = store.read("SELECT user_id FROM messages UNION SELECT user_id FROM facts")
    return sorted(str(row[0]) for row in rows)
