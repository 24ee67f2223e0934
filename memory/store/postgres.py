"""The PostgreSQL + pgvector store: the same tables and queries as SQLite's, shared by replicas.

`PgStore` implements `memory.store.backend.StoreBackend`. Every query filters on `user_id`,
as in SQLite. What differs:

- Connections come from a small pool (psycopg 3), and a failed connection or statement is
  `StoreUnavailable` (memory/store/pg_connections.py).
- Recall's reads have no per-replica cache, and search is exact cosine and BM25 in SQL
  (memory/store/pg_reads.py); chunks are written with their terms and vectors by
  memory/store/pg_chunks.py. The queries both backends share word for word are in
  memory/store/portable_queries.py.
- Indexing is claimed: `unindexed_messages` locks the batch it returns (`FOR UPDATE SKIP
  LOCKED`) in a transaction held open on a connection of its own until `add_chunks` has
  indexed every message of it. Another replica skips those rows; a replica killed mid-batch
  drops its connection, the locks go with it, and a survivor indexes the batch.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import psycopg

from memory.errors import StoreUnavailable
from memory.records import Message, Term
from memory.store import pg_chunks, vector_rebuild
from memory.store.backend import ChunkSlice, redact_url
from memory.store.fts import owner_token
from memory.store.left_messages import LEFT, leave_rows
from memory.store.message_rows import MESSAGE_COLUMNS, NewMessage, message_from_row, message_values
from memory.store.pg_chunks import vector_text
from memory.store.pg_connections import CONNECT_TIMEOUT, failure_reason
from memory.store.pg_reads import PgReads
from memory.store.pg_schema import migrate
from memory.store.pg_sql import PgConnection
from memory.store.portable_queries import PortableQueries
from memory.store.session_forget import SessionForgotten, delete_session_rows

# The advisory-lock space of a user's consolidation (the second key is the user's hash).
CONSOLIDATION_LOCK = 0x6D6F6963  # "moic"
# How long a forget is kept (seconds): longer than any request is under way.
FORGETS_KEPT = 86_400


class PgStore(PortableQueries, PgReads):
    """moim's migrated Postgres database, opened once per process (one pool)."""

    def __init__(self, url: str, max_connections: int = 8, read_timeout: float = 10.0) -> None:
        self.dim: int | None = None
        self._claim_lock = threading.Lock()
        self._claim: Any = None  # the indexing claim's connection, while a batch is open
        self._claimed: set[int] = set()
        self._claim_terms: list[pg_chunks.TermRow] = []  # its words, written as it ends
        try:
            with psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT) as conn:
                self.migrations_applied = migrate(conn, redact_url(url))
        except psycopg.Error as exc:
            raise StoreUnavailable(f"cannot open {redact_url(url)}: {failure_reason(exc)}") from exc
        super().__init__(url, max_connections, read_timeout)

    def claim_consolidation(self, user_id: str) -> Callable[[], None] | None:
        """The user's consolidation, held against other replicas until the release is called;
        None while another holds it (two would send the model the same turns)."""
        return self.try_lock(CONSOLIDATION_LOCK, user_id)

    def commit_lexical(self, backlog: bool = False) -> None:
        """Nothing to commit: Postgres's full-text index is part of its transactions."""

    def take_foreign_change(self) -> bool:
        """Never: every replica reads Postgres itself, it mirrors no chunk."""
        return False

    # -- vectors table ---------------------------------------------------------------------

    def ensure_vectors(self, model: str, dim: int) -> bool:
        """Create the vector table for this model's width; True when chunks must be
        re-embedded (another model) or messages re-indexed (another layout), as SQLite's
        `Store.ensure_vectors`. The column's width is the model's: another width drops the
        table and creates it again, under the lock replicas take for it."""
        wanted = vector_rebuild.tags(model, dim)
        with self._conn() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", [0x6D6F696E])
            current = dict(conn.execute("SELECT key, value FROM meta").fetchall())
            same = all(current.get(k) == v for k, v in wanted.items())
            rebuild = same and vector_rebuild.KEY in current
            if not same:
                conn.execute("DROP TABLE IF EXISTS chunk_vectors")
                rebuild, _ = vector_rebuild.switch(PgConnection(conn), current, model, dim)
                for key, value in wanted.items():
                    conn.execute(
                        "INSERT INTO meta (key, value) VALUES (%s, %s) "
                        "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                        [key, value],
                    )
            conn.execute(
                "CREATE TABLE IF NOT EXISTS chunk_vectors ("
                "chunk_id BIGINT PRIMARY KEY REFERENCES chunks (id) ON DELETE CASCADE, "
                f"user_id TEXT NOT NULL, embedding vector({int(dim)}) NOT NULL)"
            )
            conn.execute(
                "CREATE INDEX IF NOT EXISTS chunk_vectors_by_user ON chunk_vectors (user_id)"
            )
            anything = conn.execute("SELECT 1 FROM messages LIMIT 1").fetchone()
        self.dim = dim
        return rebuild or (not same and anything is not None)

    def write_vectors(
        self, db: PgConnection, rows: Sequence[tuple[int, str]], vectors: np.ndarray
    ) -> None:
        """Store (or replace) the vectors of chunks (id, user id), in `write()`'s transaction."""
        for (chunk_id, user_id), vector in zip(rows, vectors, strict=True):
            db.raw.execute(
                "INSERT INTO chunk_vectors (chunk_id, user_id, embedding) "
                "VALUES (%s, %s, %s::vector) "
                "ON CONFLICT (chunk_id) DO UPDATE SET embedding = excluded.embedding",
                [chunk_id, user_id, vector_text(vector)],
            )

    # -- messages --------------------------------------------------------------------------

    def insert_messages(
        self, user_id: str, session_id: str, rows: Sequence[NewMessage]
    ) -> list[int]:
        """Per row the id it was stored under, or 0 if the session already held it."""
        ids: list[int] = []
        with self._conn() as conn, conn.transaction():
            for m in rows:
                found = conn.execute(
                    "INSERT INTO messages (user_id, session_id, message_key, content_hash, role, "
                    "name, content, payload, model, tokens, partial, created_at) VALUES "
                    "(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
                    "ON CONFLICT DO NOTHING RETURNING id",
                    message_values(user_id, session_id, m),
                ).fetchone()
                ids.append(int(found[0]) if found else 0)
        return ids

    def stored_keys(self, user_id: str, session_id: str) -> list[str]:
        rows = self._rows(
            "SELECT message_key FROM messages WHERE user_id = %s AND session_id = %s ORDER BY id",
            [user_id, session_id],
        )
        return [row[0] for row in rows]

    def unindexed_messages(self, limit: int = 256) -> list[Message]:
        """Claim up to `limit` unindexed messages no other replica holds, oldest first.

        The claim (row locks) lasts until `add_chunks` has indexed each of them, or the next
        call here, which ends whatever is left of the previous one.
        """
        with self._claim_lock, self._errors():
            self._end_claim()
            conn = psycopg.connect(self.url, connect_timeout=CONNECT_TIMEOUT)
            rows = conn.execute(
                f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE indexed = 0 "
                "ORDER BY id LIMIT %s FOR UPDATE SKIP LOCKED",
                [limit],
            ).fetchall()
            if not rows:
                conn.rollback()
                conn.close()
                return []
            self._claim, self._claimed = conn, {int(row[0]) for row in rows}
        return [message_from_row(row) for row in rows]

    def release_claim(self) -> None:
        """End the claim of the last `unindexed_messages` now (a failed pass's, whose
        messages are then written to by another connection: memory/index_failures.py)."""
        with self._claim_lock, self._errors():
            self._end_claim()

    def _end_claim(self) -> None:
        """Commit what the open claim indexed and release the rest (under `_claim_lock`)."""
        conn, self._claim, self._claimed = self._claim, None, set()
        terms, self._claim_terms = self._claim_terms, []
        if conn is not None:
            try:
                if conn.info.transaction_status != psycopg.pq.TransactionStatus.INERROR:
                    pg_chunks.add_terms(conn, terms)  # the claim's words, last, in one order
                conn.commit()
            finally:
                conn.close()

    # -- chunks ----------------------------------------------------------------------------

    def add_chunks(
        self,
        message: Message,
        texts: Sequence[str],
        vectors: np.ndarray | None,
        context: str = "",
        start: int = 0,
        last: bool = True,
        words: Sequence[Sequence[Term]] = (),
    ) -> list[int]:
        """Store a message's chunks from position `start` on, their terms and vectors; with
        `last`, mark it indexed (and end its part of the claim). As SQLite's `add_chunks`."""
        with self._claim_lock:
            if message.id in self._claimed:
                with self._errors():
                    ids = pg_chunks.add_chunks(
                        self._claim, message, texts, vectors, context, start, last
                    )
                    self._claim_terms += pg_chunks.term_rows(message, ids, words)
                    if last:
                        self._claimed.discard(message.id)
                        if not self._claimed:
                            self._end_claim()
                return ids
        with self._conn() as conn, conn.transaction():
            ids = pg_chunks.add_chunks(conn, message, texts, vectors, context, start, last)
            pg_chunks.add_terms(conn, pg_chunks.term_rows(message, ids, words))
            return ids

    def add_slices(self, slices: Sequence[ChunkSlice]) -> list[list[int]]:
        """`add_chunks` of each slice in turn (a claimed message's go into its claim's
        transaction, as they did one at a time)."""
        return [
            self.add_chunks(s.message, s.texts, s.vectors, s.context, s.start, s.last, s.words)
            for s in slices
        ]

    def reset_index(self) -> int:
        with self._conn() as conn, conn.transaction():
            conn.execute("DELETE FROM chunks")  # cascades to chunk_vectors
            conn.execute(f"UPDATE messages SET indexed = 0 WHERE indexed != {LEFT}")
            vector_rebuild.clear(PgConnection(conn))
        return self.count_unindexed()

    # -- per-user housekeeping -------------------------------------------------------------

    def delete_user(self, user_id: str) -> int:
        """Forget everything of one user; return the number of messages removed.

        The user's messages are locked first: a replica indexing one of them holds it (its
        claim) while it adds the chunk's words, and a word the user already has waits for this
        transaction's delete of it; taking the messages first makes the delete wait for that
        indexing to end instead (Postgres found a deadlock the other way round).
        """
        with self._conn() as conn, conn.transaction():
            conn.execute(
                "SELECT id FROM messages WHERE user_id = %s ORDER BY id FOR UPDATE", [user_id]
            )
            conn.execute("DELETE FROM chunks WHERE user_id = %s", [user_id])
            conn.execute("UPDATE facts SET superseded_by = NULL WHERE user_id = %s", [user_id])
            conn.execute("DELETE FROM facts WHERE user_id = %s", [user_id])
            conn.execute("DELETE FROM consolidation_marks WHERE user_id = %s", [user_id])
            conn.execute("DELETE FROM response_links WHERE user_id = %s", [user_id])
            cur = conn.execute("DELETE FROM messages WHERE user_id = %s", [user_id])
            now = time.time()
            conn.execute(
                "INSERT INTO forgets (owner, at) VALUES (%s, %s) "
                "ON CONFLICT (owner) DO UPDATE SET at = EXCLUDED.at",
                [owner_token(user_id), now],
            )
            conn.execute("DELETE FROM forgets WHERE at < %s", [now - FORGETS_KEPT])
            return int(cur.rowcount)

    def delete_session(
        self, user_id: str, session_id: str, facts: bool = False
    ) -> SessionForgotten | None:
        """Forget one session of one user (memory/store/session_forget.py); None: no such.
        Its messages are locked first, as `delete_user` locks a user's."""
        with self.write() as db:
            db.raw.execute(
                "SELECT id FROM messages WHERE user_id = %s AND session_id = %s "
                "ORDER BY id FOR UPDATE",
                [user_id, session_id],
            )
            return delete_session_rows(db, user_id, session_id, facts)

    def leave_messages(self, user_id: str, message_ids: Sequence[int]) -> int:
        """Set aside messages a conversation left behind (memory/store/left_messages.py);
        return how many chunks of theirs went. This process's indexing claim is let go first
        (it may hold one of them: `mark_failed` does the same), another replica's waited for."""
        self.release_claim()
        with self.write() as db:
            db.raw.execute(
                "SELECT id FROM messages WHERE user_id = %s AND id = ANY(%s) "
                "ORDER BY id FOR UPDATE",
                [user_id, list(message_ids)],
            )
            return len(leave_rows(db, user_id, message_ids))

    def forgotten_since(self, user_id: str, at: float) -> bool:
        """Whether the user was forgotten (through any replica) at or after `at`: a request
        that arrived before then brings back, when its turn is stored, the history it resent."""
        rows = self._rows(
            "SELECT 1 FROM forgets WHERE owner = %s AND at >= %s", [owner_token(user_id), at]
        )
        return bool(rows)

    def integrity_ok(self) -> bool:
        try:
            return bool(self._rows("SELECT count(*) FROM messages") is not None)
        except StoreUnavailable:
            return False

    def users(self) -> list[str]:
        """Every user with a message or a fact (for copying a whole store)."""
        rows = self._rows("SELECT user_id FROM messages UNION SELECT user_id FROM facts")
        return sorted(str(row[0]) for row in rows)
