"""The store queries both backends run as they are: written once, in SQLite's spelling.

`Store` (SQLite) and `PgStore` (Postgres) each inherit `PortableQueries`; these methods go
through the backend's own `read`, which on Postgres translates the SQLite spellings
(`?` marks; memory/store/pg_sql.py). Queries whose best form differs by database (packed
reads on SQLite, `= ANY` arrays and claims on Postgres) stay in each backend's module.
Every query filters on `user_id` in the SQL: isolation lives in the query.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from memory.records import Message
from memory.store.message_rows import MESSAGE_COLUMNS, NewMessage, Stats, message_from_row

# A word for the user's vocabulary (memory/recall/vocabulary.py): the first chunk to bring a
# stem keeps it. Both backends' statement (`%s` marks; SQLite takes `?`).
ADD_TERM = (
    "INSERT INTO vocabulary (user_id, stem, word, chunk_id, vector) VALUES (%s, %s, %s, %s, %s) "
    "ON CONFLICT (user_id, stem) DO NOTHING"
)

# How many replies to one question `answers_of` reads: a client regenerates a few times.
_REPLIES_READ = 16


class _Backend(Protocol):
    """What these queries need of a backend: its reads (SQLite's `?`) and its inserts."""

    def read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]: ...

    def insert_messages(
        self, user_id: str, session_id: str, rows: Sequence[NewMessage]
    ) -> list[int]: ...


class PortableQueries:
    """Reads (and one write) that are the same SQL on SQLite and on Postgres."""

    def add_messages(
        self: _Backend, user_id: str, session_id: str, rows: Sequence[NewMessage]
    ) -> int:
        """Store messages not yet stored in this session (by `message_key`); count new ones."""
        return sum(1 for new_id in self.insert_messages(user_id, session_id, rows) if new_id)

    def has_session(self: _Backend, user_id: str, session_id: str) -> bool:
        rows = self.read(
            "SELECT 1 FROM messages WHERE user_id = ? AND session_id = ? LIMIT 1",
            (user_id, session_id),
        )
        return bool(rows)

    def session_with(self: _Backend, user_id: str, hashes: Sequence[str]) -> str | None:
        """The user's most recent session holding a message with one of these hashes."""
        if not hashes:
            return None
        marks = ",".join("?" * len(hashes))
        rows = self.read(
            f"SELECT session_id FROM messages WHERE user_id = ? AND content_hash IN ({marks}) "
            "ORDER BY id DESC LIMIT 1",
            [user_id, *hashes],
        )
        return str(rows[0][0]) if rows else None

    def count_unindexed(self: _Backend) -> int:
        return int(self.read("SELECT count(*) FROM messages WHERE indexed = 0")[0][0])

    def index_frontier(self: _Backend) -> tuple[int, int | None]:
        """(the newest message id, the oldest unindexed one or None): indexing progress."""
        row = self.read(
            "SELECT (SELECT coalesce(max(id), 0) FROM messages), "
            "(SELECT min(id) FROM messages WHERE indexed = 0)"
        )[0]
        return int(row[0]), None if row[1] is None else int(row[1])

    def messages(self: _Backend, user_id: str, session_id: str | None = None) -> list[Message]:
        """A user's messages in storage order, optionally of one session."""
        sql = f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE user_id = ?"
        params: list[Any] = [user_id]
        if session_id is not None:
            sql += " AND session_id = ?"
            params.append(session_id)
        rows = self.read(sql + " ORDER BY id", params)
        return [message_from_row(row) for row in rows]

    def last_user_text(self: _Backend, user_id: str, session_id: str, chars: int) -> str | None:
        """The first `chars` characters of the session's latest stored user message, or None:
        what an agent is working on once its client trimmed the task out of the request."""
        rows = self.read(
            f"SELECT substr(content, 1, {int(chars)}) FROM messages "
            "WHERE user_id = ? AND session_id = ? AND role = 'user' ORDER BY id DESC LIMIT 1",
            (user_id, session_id),
        )
        return str(rows[0][0]) if rows else None

    def answers_of(
        self: _Backend, user_id: str, session_id: str, reply_id: int
    ) -> tuple[list[tuple[str, str]], list[str]]:
        """Around an assistant message of the session: the role and content hash of its
        question (the message said before it and the replies to it) and of what the question
        followed, latest first (system prompts aside); and the hashes of the run of assistant
        messages stored right after that question (the replies to it, this one among them)."""
        before = self.read(
            "SELECT id, role, content_hash FROM messages WHERE user_id = ? AND session_id = ? "
            "AND id < ? AND role NOT IN ('system', 'developer') "
            f"ORDER BY id DESC LIMIT {_REPLIES_READ + 2}",
            (user_id, session_id, reply_id),
        )
        asked = next((at for at, row in enumerate(before) if row[1] != "assistant"), None)
        if asked is None:
            return [], []
        after = self.read(
            "SELECT role, content_hash FROM messages WHERE user_id = ? AND session_id = ? "
            f"AND id > ? ORDER BY id LIMIT {_REPLIES_READ}",
            (user_id, session_id, before[asked][0]),
        )
        replies = []
        for role, digest in after:
            if role != "assistant":
                break
            replies.append(str(digest))
        question = [(str(role), str(digest)) for _, role, digest in before[asked : asked + 2]]
        return question, replies

    def vocabulary_mark(self: _Backend, user_id: str) -> tuple[int, int]:
        """How many words the user's vocabulary holds and its newest row's id (0 when none):
        a cache of it is fresh while both are unchanged."""
        row = self.read(
            "SELECT count(*), coalesce(max(id), 0) FROM vocabulary WHERE user_id = ?", (user_id,)
        )[0]
        return int(row[0]), int(row[1])

    def chunk_counts(self: _Backend, message_ids: Sequence[int]) -> dict[int, int]:
        """How many chunks each of these messages has (those with none are absent): for an
        unindexed message, the slices of it indexed so far."""
        if not message_ids:
            return {}
        marks = ",".join("?" * len(message_ids))
        rows = self.read(
            f"SELECT message_id, count(*) FROM chunks WHERE message_id IN ({marks}) "
            "GROUP BY message_id",
            list(message_ids),
        )
        return {int(m): int(n) for m, n in rows}

    def stats(self: _Backend, user_id: str) -> Stats:
        """The user's counts: messages, chunks, active facts, sessions."""
        row = self.read(
            "SELECT (SELECT count(*) FROM messages WHERE user_id = ?), "
            "(SELECT count(*) FROM chunks WHERE user_id = ?), "
            "(SELECT count(*) FROM facts WHERE user_id = ? AND status = 'active'), "
            "(SELECT count(DISTINCT session_id) FROM messages WHERE user_id = ?)",
            (user_id, user_id, user_id, user_id),
        )[0]
        return Stats(user_id, *(int(n) for n in row))
