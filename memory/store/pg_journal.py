"""The journal of finished turns, for replicas sharing one Postgres: a row per turn.

`PgJournal.append` makes a turn durable in the `pending_turns` table in one round trip (an
INSERT on a connection of its own), before the client gets the last byte of its response.
That connection commits without waiting for the WAL flush (`synchronous_commit = off`): the
row is safe from the replica's death at once (the reason the journal exists) and from the
database server's within a fraction of a second, as the SQLite journal's un-synced write is
safe from the process's death and not from the machine's. Waiting for the flush took 2.5 ms
p50 (8.6 p95) of the event loop per finished turn; this takes 0.07.
The writer then stores it as messages and `clear` deletes the row. Each replica holds a
session-level advisory lock on its `owner` key for as long as it lives: when a replica dies
(`kill -9`, a lost machine), Postgres drops its connection and the lock, and any survivor's
`adopt` stores the dead replica's rows and deletes them (storing is idempotent, so a turn the
dead replica had already stored is not stored twice).

With Postgres unreachable, a turn goes to the local journal file instead (the base class), and
`turns` yields it from there once the database is back; appends stop trying the database for
`RETRY_AFTER` seconds after a failure, so the event loop does not wait on a dead server
turn after turn.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any

import psycopg

from memory.ingest.turns import Turn
from memory.store.journal import Journal, _turn, turn_line
from memory.store.postgres import PgStore

logger = logging.getLogger(__name__)

RETRY_AFTER = 2.0
_CONNECT_TIMEOUT = 2  # psycopg's smallest


class PgJournal(Journal):
    """Turns in `pending_turns` (this replica's rows), or in the local file while the
    database is unreachable."""

    def __init__(self, store: PgStore, path: Path | str) -> None:
        super().__init__(path)
        self._store = store
        self.owner = secrets.randbits(62) + 1  # this replica's liveness key
        self._lock = threading.Lock()
        self._conn: Any = None
        self._down_until = 0.0
        # What was appended since the last clear, in order: (row id or None for the file, bytes)
        self._entries: list[tuple[int | None, int]] = []
        try:
            with self._lock:
                self._connection()
        except (psycopg.Error, OSError):
            logger.warning("journal: database unreachable; turns go to %s meanwhile", self.path)

    def _connection(self) -> Any:
        """The journal's own connection, holding this replica's liveness lock (under _lock)."""
        if self._conn is not None and not self._conn.closed and not self._conn.broken:
            return self._conn
        if time.monotonic() < self._down_until:
            raise OSError("database unreachable")
        try:
            conn = psycopg.connect(
                self._store.url, autocommit=True, connect_timeout=_CONNECT_TIMEOUT
            )
            conn.execute("SET synchronous_commit = off")
            conn.execute("SELECT pg_advisory_lock(%s)", [self.owner])
        except psycopg.Error:
            self._down_until = time.monotonic() + RETRY_AFTER
            raise
        self._conn = conn
        return conn

    def append(self, turn: Turn) -> None:
        line = turn_line(turn)
        try:
            with self._lock:
                row = (
                    self._connection()
                    .execute(
                        "INSERT INTO pending_turns (owner, record, received_at) "
                        "VALUES (%s, %s, %s) RETURNING id",
                        [self.owner, line, time.time()],
                    )
                    .fetchone()
                )
                self._entries.append((int(row[0]), len(line)))
                return
        except (psycopg.Error, OSError) as exc:
            self._lost(exc)
        super().append(turn)  # the database is down: the local file keeps it
        self._entries.append((None, len(line)))

    def _lost(self, exc: BaseException) -> None:
        logger.warning(
            "journal: database unreachable (%s); using %s", type(exc).__name__, self.path
        )
        with self._lock:
            self._down_until = time.monotonic() + RETRY_AFTER
            if self._conn is not None:
                self._conn.close()
            self._conn = None

    def turns(self) -> Generator[Turn, None, None]:
        """The local file's turns, then this replica's rows (raises if the database is down)."""
        yield from super().turns()
        rows = self._store._rows(
            "SELECT record FROM pending_turns WHERE owner = %s ORDER BY id", [self.owner]
        )
        for (record,) in rows:
            turn = _turn(record)
            if turn is not None:
                yield turn

    def clear(self) -> None:
        """Every turn appended is stored: delete this replica's rows, empty the file."""
        self._forget([i for i, _ in self._entries if i is not None])
        self._entries = []
        super().clear()

    def keep_last(self, count: int) -> None:
        """Keep the newest `count` turns (rows or file lines); the older ones are stored."""
        kept = self._entries[-count:] if count > 0 else []
        older = self._entries[: len(self._entries) - len(kept)]
        self._forget([i for i, _ in older if i is not None])
        self._entries = kept
        super().keep_last(sum(1 for i, _ in kept if i is None))

    def drop_user(self, user_id: str, session_id: str | None = None) -> None:
        """Remove a forgotten user's turns (of one session, when named) from the file and from
        every replica's rows (a replica adopting a dead one's rows must not store them again).
        Raises OSError when the database cannot be reached."""
        super().drop_user(user_id, session_id)
        sql, params = "DELETE FROM pending_turns WHERE record::jsonb ->> 'user_id' = %s", [user_id]
        if session_id is not None:
            sql, params = sql + " AND record::jsonb ->> 'session_id' = %s", [user_id, session_id]
        try:
            with self._lock:
                self._connection().execute(sql, params)
        except psycopg.Error as exc:
            self._lost(exc)
            raise OSError(f"journal: {type(exc).__name__}") from exc

    def _forget(self, ids: list[int]) -> None:
        """Delete these rows; on failure they stay, and are stored again later (idempotent)."""
        if not ids:
            return
        try:
            with self._lock:
                self._connection().execute("DELETE FROM pending_turns WHERE id = ANY(%s)", [ids])
        except (psycopg.Error, OSError) as exc:
            self._lost(exc)

    def size(self) -> int:
        return super().size() + sum(n for i, n in self._entries if i is not None)

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()  # releases the liveness lock
            self._conn = None

    def adopt(self, store_turn: Callable[[Turn], Any], limit: int = 100) -> int:
        """Store the turns of replicas that died before storing them; return how many.

        An owner whose advisory lock can be taken holds none: its replica is gone. The lock,
        taken for this transaction, also keeps two survivors from adopting the same rows.
        """
        adopted = 0
        with self._store._conn() as conn, conn.transaction():
            owners = conn.execute(
                "SELECT DISTINCT owner FROM pending_turns WHERE owner <> %s", [self.owner]
            ).fetchall()
            for (owner,) in owners:
                if not conn.execute("SELECT pg_try_advisory_xact_lock(%s)", [owner]).fetchone()[0]:
                    continue  # alive
                rows = conn.execute(
                    "SELECT id, record FROM pending_turns WHERE owner = %s ORDER BY id "
                    "LIMIT %s FOR UPDATE SKIP LOCKED",
                    [owner, limit - adopted],
                ).fetchall()
                for row_id, record in rows:
                    turn = _turn(record)
                    if turn is not None:
                        store_turn(turn)
                    conn.execute("DELETE FROM pending_turns WHERE id = %s", [row_id])
                    adopted += 1
                if adopted >= limit:
                    break
        return adopted
