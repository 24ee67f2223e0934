"""The PostgreSQL + pgvector store: the same tables and queries as SQLite's, shared by replicas.

`PgStore` implements `memory.store.backend.StoreBackend`. Every query filters on `user_id`,
as in SQLite. What differs:

- Connections come from a small pool (psycopg 3); a failed connection or statement is
  `StoreUnavailable`, as a locked SQLite file is, so chat fails open and the memory API says
  503. The URL is only ever shown with its password masked. Statements are never prepared:
  each is planned for its own user, as users' sizes differ by orders of magnitude.
- Dense search is exact cosine over the user's rows of `chunk_vectors` (pgvector's `<=>`,
  ordered, limited; the user's rows found by index). Lexical search is BM25 over the same
  stemmed terms SQLite indexes (`memory.store.fts`): each chunk's `terms` tsvector holds its
  own terms at weight A and the previous turn's tail at weight B, and a trigger copies them
  into the user's postings (`chunk_terms`), which the search sums in SQL.
- There is no per-replica cache: every search reads the database, so a turn stored through one
  replica is recalled through any other as soon as it is indexed.
- Indexing is claimed: `unindexed_messages` locks the batch it returns (`FOR UPDATE SKIP
  LOCKED`) in a transaction held open on a connection of its own until `add_chunks` has
  indexed every message of it. Another replica skips those rows; a replica killed mid-batch
  drops its connection, the locks go with it, and a survivor indexes the batch.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import psycopg
import psycopg_pool

from memory.errors import StoreUnavailable
from memory.records import Chunk, Message, Term
from memory.store import vector_rebuild
from memory.store.backend import redact_url
from memory.store.fts import fts_document
from memory.store.pg_schema import migrate
from memory.store.pg_sql import PgConnection
from memory.store.store import ADD_TERM, NewMessage, Stats, message_from_row, message_values
from memory.store.store import reembed_only as _reembed_only
from memory.store.vector_table import row_dtype

_VECTOR_LAYOUT = "4"  # as memory/store/store.py's: what is embedded for a chunk
_MESSAGE_COLUMNS = "id, user_id, session_id, role, name, content, created_at, partial"
# Seconds to wait for a connection (at start, from the pool) before the store is unavailable.
CONNECT_TIMEOUT = 5
# BM25's term-frequency saturation and length normalisation, as FTS5's and tantivy's.
_K1 = 1.2
_B = 0.75
# Errors of one statement while the server is there: a lost deadlock or serialization (two
# replicas indexing at once), a cancelled statement. psycopg derives them from
# OperationalError, as it does a lost connection, but they must not stop the next calls.
_LOST_STATEMENT = (
    psycopg.errors.TransactionRollback,
    psycopg.errors.SerializationFailure,
    psycopg.errors.DeadlockDetected,
    psycopg.errors.QueryCanceled,
)
# After a lost connection, calls fail at once for this long instead of each waiting out
# CONNECT_TIMEOUT: a recall makes several reads, and chat must fail open promptly.
DOWN_FOR = 2.0


def _vector_text(vector: np.ndarray) -> str:
    """pgvector's text form of a vector ("[0.1,0.2,…]"), with float32's full precision."""
    return "[" + ",".join(repr(float(x)) for x in np.asarray(vector, dtype=np.float32)) + "]"


def _parse_vector(data: bytes) -> np.ndarray:
    """A vector from pgvector's binary form (`vector_send`): two uint16 (the dimension, then
    a reserved word), then big-endian float4s. Read as bytes, not as text: parsing the text
    form of the 80 vectors a recall fetches took 15-25 ms; this takes about one."""
    return np.frombuffer(data, dtype=">f4", offset=4).astype(np.float32)


class PgStore:
    """moim's migrated Postgres database, opened once per process (one pool)."""

    def __init__(self, url: str, max_connections: int = 8) -> None:
        self.url = url
        self.dim: int | None = None
        self._claim_lock = threading.Lock()
        self._claim: Any = None  # the indexing claim's connection, while a batch is open
        self._claimed: set[int] = set()
        self._down_until = 0.0
        try:
            with psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT) as conn:
                migrate(conn)
        except psycopg.Error as exc:
            raise StoreUnavailable(f"cannot open {redact_url(url)}: {_reason(exc)}") from exc
        self._pool = psycopg_pool.ConnectionPool(
            url,
            min_size=1,
            max_size=max_connections,
            # No prepared statements: Postgres would plan a statement run a few times once,
            # for an average user (a generic plan), and a heavy user's search then re-counts
            # its chunks for each one that matches (100k chunks: 25 minutes, not 2 s).
            kwargs={
                "autocommit": True,
                "connect_timeout": CONNECT_TIMEOUT,
                "prepare_threshold": None,
            },
            check=psycopg_pool.ConnectionPool.check_connection,
            timeout=CONNECT_TIMEOUT,
            open=True,
            name="moim",
        )

    def close(self) -> None:
        self._pool.close()

    def commit_lexical(self) -> None:
        """Nothing to commit: Postgres's full-text index is part of its transactions."""

    # -- connections -----------------------------------------------------------------------

    @contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            yield
        except _LOST_STATEMENT as exc:
            # A lost deadlock (replicas indexing at once), a cancelled statement: the server
            # is there, so this call fails and the next ones are not refused.
            raise StoreUnavailable(f"{redact_url(self.url)}: {_reason(exc)}") from exc
        except (psycopg.OperationalError, psycopg_pool.PoolTimeout) as exc:
            self._down_until = time.monotonic() + DOWN_FOR
            raise StoreUnavailable(f"{redact_url(self.url)}: {_reason(exc)}") from exc
        except psycopg.Error as exc:
            raise StoreUnavailable(f"{redact_url(self.url)}: {_reason(exc)}") from exc

    @contextmanager
    def _conn(self) -> Iterator[Any]:
        if time.monotonic() < self._down_until:
            raise StoreUnavailable(f"{redact_url(self.url)}: unreachable, retrying shortly")
        with self._errors(), self._pool.connection(timeout=DOWN_FOR) as conn:
            yield conn

    @contextmanager
    def write(self) -> Iterator[PgConnection]:
        """One write transaction, on a pooled connection, taking the shared modules' SQL."""
        with self._conn() as conn, conn.transaction():
            yield PgConnection(conn)

    def read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """Rows of a statement written as the shared modules write it (SQLite's `?`)."""
        with self._conn() as conn:
            return PgConnection(conn).execute(sql, params).fetchall()

    def _rows(self, sql: str, params: Sequence[Any] = (), binary: bool = False) -> list[Any]:
        """Rows of a native Postgres statement (`%s` parameters); `binary` asks for the
        columns in binary form (a `bytea` then comes back without its hex encoding)."""
        with self._conn() as conn:
            return list(conn.execute(sql, list(params), binary=binary).fetchall())

    # -- vectors table ---------------------------------------------------------------------

    def ensure_vectors(self, model: str, dim: int) -> bool:
        """Create the vector table for this model's width; True when chunks must be
        re-embedded (another model) or messages re-indexed (another layout), as SQLite's
        `Store.ensure_vectors`. The column's width is the model's: another width drops the
        table and creates it again, under the lock replicas take for it."""
        wanted = {
            "embedding_model": model,
            "embedding_dim": str(dim),
            "vector_layout": _VECTOR_LAYOUT,
        }
        with self._conn() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", [0x6D6F696E])
            current = dict(conn.execute("SELECT key, value FROM meta").fetchall())
            same = all(current.get(k) == v for k, v in wanted.items())
            rebuild = same and vector_rebuild.KEY in current
            if not same:
                conn.execute("DROP TABLE IF EXISTS chunk_vectors")
                shared = PgConnection(conn)
                conn.execute("DELETE FROM vocabulary")  # word vectors of the old model
                if _reembed_only(current):
                    old = f"{current['embedding_model']} ({current['embedding_dim']})"
                    rebuild = vector_rebuild.start(shared, old, f"{model} ({dim})") is not None
                else:
                    conn.execute("DELETE FROM chunks")
                    conn.execute("UPDATE messages SET indexed = 0 WHERE indexed = 1")
                    vector_rebuild.clear(shared)
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
                [chunk_id, user_id, _vector_text(vector)],
            )

    # -- messages --------------------------------------------------------------------------

    def add_messages(self, user_id: str, session_id: str, rows: Sequence[NewMessage]) -> int:
        return sum(1 for new_id in self.insert_messages(user_id, session_id, rows) if new_id)

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

    def stored_keys(self, user_id: str, session_id: str) -> set[str]:
        rows = self._rows(
            "SELECT message_key FROM messages WHERE user_id = %s AND session_id = %s",
            [user_id, session_id],
        )
        return {row[0] for row in rows}

    def has_session(self, user_id: str, session_id: str) -> bool:
        return bool(
            self._rows(
                "SELECT 1 FROM messages WHERE user_id = %s AND session_id = %s LIMIT 1",
                [user_id, session_id],
            )
        )

    def session_with(self, user_id: str, hashes: Sequence[str]) -> str | None:
        if not hashes:
            return None
        rows = self._rows(
            "SELECT session_id FROM messages WHERE user_id = %s AND content_hash = ANY(%s) "
            "ORDER BY id DESC LIMIT 1",
            [user_id, list(hashes)],
        )
        return str(rows[0][0]) if rows else None

    def unindexed_messages(self, limit: int = 256) -> list[Message]:
        """Claim up to `limit` unindexed messages no other replica holds, oldest first.

        The claim (row locks) lasts until `add_chunks` has indexed each of them, or the next
        call here, which ends whatever is left of the previous one.
        """
        with self._claim_lock, self._errors():
            self._end_claim()
            conn = psycopg.connect(self.url, connect_timeout=CONNECT_TIMEOUT)
            rows = conn.execute(
                f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE indexed = 0 "
                "ORDER BY id LIMIT %s FOR UPDATE SKIP LOCKED",
                [limit],
            ).fetchall()
            if not rows:
                conn.rollback()
                conn.close()
                return []
            self._claim, self._claimed = conn, {int(row[0]) for row in rows}
        return [message_from_row(row) for row in rows]

    def _end_claim(self) -> None:
        """Commit what the open claim indexed and release the rest (under `_claim_lock`)."""
        conn, self._claim, self._claimed = self._claim, None, set()
        if conn is not None:
            try:
                conn.commit()
            finally:
                conn.close()

    def count_unindexed(self) -> int:
        return int(self._rows("SELECT count(*) FROM messages WHERE indexed = 0")[0][0])

    def index_frontier(self) -> tuple[int, int | None]:
        row = self._rows(
            "SELECT (SELECT coalesce(max(id), 0) FROM messages), "
            "(SELECT min(id) FROM messages WHERE indexed = 0)"
        )[0]
        return int(row[0]), None if row[1] is None else int(row[1])

    def messages(self, user_id: str, session_id: str | None = None) -> list[Message]:
        sql = f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE user_id = %s"
        params: list[Any] = [user_id]
        if session_id is not None:
            sql += " AND session_id = %s"
            params.append(session_id)
        return [message_from_row(row) for row in self._rows(sql + " ORDER BY id", params)]

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
                    ids = _add_chunks(
                        self._claim, message, texts, vectors, context, start, last, words
                    )
                    if last:
                        self._claimed.discard(message.id)
                        if not self._claimed:
                            self._end_claim()
                return ids
        with self._conn() as conn, conn.transaction():
            return _add_chunks(conn, message, texts, vectors, context, start, last, words)

    def vocabulary_mark(self, user_id: str) -> tuple[int, int]:
        """As SQLite's: the user's vocabulary size and newest row id."""
        row = self._rows(
            "SELECT count(*), coalesce(max(id), 0) FROM vocabulary WHERE user_id = %s", [user_id]
        )[0]
        return int(row[0]), int(row[1])

    def vocabulary(self, user_id: str, after: int = 0) -> list[Term]:
        """As SQLite's: the user's vocabulary rows past `after`, oldest first."""
        rows = self._rows(
            "SELECT id, stem, word, vector FROM vocabulary WHERE user_id = %s AND id > %s "
            "ORDER BY id",
            [user_id, after],
        )
        return [Term(stem, word, bytes(vector), int(i)) for i, stem, word, vector in rows]

    def chunk_counts(self, message_ids: Sequence[int]) -> dict[int, int]:
        """How many chunks each of these messages has (those with none are absent)."""
        if not message_ids:
            return {}
        rows = self._rows(
            "SELECT message_id, count(*) FROM chunks WHERE message_id = ANY(%s) "
            "GROUP BY message_id",
            [list(message_ids)],
        )
        return {int(m): int(n) for m, n in rows}

    def chunks(self, user_id: str, ids: Sequence[int]) -> dict[int, Chunk]:
        if not ids:
            return {}
        rows = self._rows(
            "SELECT c.id, c.message_id, c.user_id, c.session_id, c.role, c.name, c.text, "
            "c.created_at, m.content_hash, m.turn FROM chunks c "
            "JOIN messages m ON m.id = c.message_id WHERE c.user_id = %s AND c.id = ANY(%s)",
            [user_id, list(ids)],
        )
        return {int(row[0]): Chunk(*row) for row in rows}

    def neighbours(
        self,
        user_id: str,
        message_ids: Sequence[int],
        around: int,
        exclude_hashes: Collection[str] = (),
    ) -> dict[int, list[Message]]:
        """For each of these messages (by id): up to `around` user/assistant turns each side
        of it in its session, and itself, oldest first."""
        found = {mid: self._neighbours(user_id, mid, around, exclude_hashes) for mid in message_ids}
        return {mid: messages for mid, messages in found.items() if messages}

    def _neighbours(
        self, user_id: str, message_id: int, around: int, exclude_hashes: Collection[str]
    ) -> list[Message]:
        same_session = (
            f"SELECT {_MESSAGE_COLUMNS}, content_hash FROM messages WHERE user_id = %s "
            "AND session_id = (SELECT session_id FROM messages WHERE id = %s AND user_id = %s) "
            "AND role IN ('user', 'assistant')"
        )
        rows = self._rows(
            f"(SELECT * FROM ({same_session} AND id < %s ORDER BY id DESC LIMIT %s) a) UNION ALL "
            f"(SELECT * FROM ({same_session} AND id >= %s ORDER BY id LIMIT %s) b) ORDER BY id",
            [user_id, message_id, user_id, message_id, around]
            + [user_id, message_id, user_id, message_id, around + 1],
        )
        found = [(row[0], message_from_row(row), row[8] not in exclude_hashes) for row in rows]
        return [message for mid, message, keep in found if keep or mid == message_id]

    def lexical_search(
        self, user_id: str, terms: Sequence[str], limit: int, context_weight: float
    ) -> list[tuple[int, float]]:
        """(chunk id, BM25) of the user's best `limit` chunks holding any of `terms`, best first.

        Okapi BM25 as SQLite's engines compute it (k1 1.2, b 0.75, IDF ln(1 + (N - n + 0.5)
        / (n + 0.5))), over the user's postings (`chunk_terms`, migration m003): a term's
        count in a chunk is its count in the chunk's text plus `context_weight` times its
        count in the context (FTS5's column weights), a chunk's length is both, and N, n and
        the mean length are the user's own. Ties go to the lower id, as in tantivy and FTS5.
        (An IDF-weighted `ts_rank_cd` had no saturation or length term: LoCoMo 0.837 / 0.703
        against SQLite's 0.860 / 0.727; this is within 0.3 of it.)
        """
        stems = [t.split("_", 1)[1] for t in fts_document(user_id, " ".join(terms)).split()]
        stems = list(dict.fromkeys(stems))
        if not stems:
            return []
        rows = self._rows(
            "WITH docs AS (SELECT count(*)::float8 AS n, "
            "  greatest(avg(length)::float8, 1e-9) AS mean FROM chunks WHERE user_id = %s), "
            "postings AS MATERIALIZED (SELECT term, chunk_id, own + %s * context AS tf, "
            "  chunk_length::float8 AS length FROM chunk_terms WHERE user_id = %s "
            "  AND term = ANY(tsvector_to_array(to_tsvector('simple', %s)))), "
            "idf AS (SELECT term, ln(1 + (docs.n - count(*) + 0.5) / (count(*) + 0.5)) AS w "
            "  FROM postings, docs GROUP BY term, docs.n) "
            "SELECT p.chunk_id, sum(idf.w * p.tf * %s / (p.tf + %s * p.length / docs.mean + %s)) "
            "AS score FROM postings p JOIN idf USING (term), docs WHERE p.tf > 0 "
            "GROUP BY p.chunk_id ORDER BY score DESC, p.chunk_id LIMIT %s",
            [
                user_id,
                float(context_weight),
                user_id,
                " ".join(stems),
                _K1 + 1,
                _K1 * _B,
                _K1 * (1 - _B),
                limit,
            ],
        )
        return [(int(i), float(score)) for i, score in rows]

    def dense_search(self, user_id: str, vector: np.ndarray, limit: int) -> list[tuple[int, float]]:
        """(chunk id, cosine similarity) of the user's nearest chunks: an exact scan."""
        rows = self._rows(
            "SELECT chunk_id, 1 - (embedding <=> %s::vector) AS cosine FROM chunk_vectors "
            "WHERE user_id = %s ORDER BY embedding <=> %s::vector, chunk_id LIMIT %s",
            [_vector_text(vector), user_id, _vector_text(vector), limit],
        )
        return [(int(i), float(c)) for i, c in rows]

    def user_vectors(
        self, user_id: str, half_from: int | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        rows = self._rows(
            "SELECT chunk_id, vector_send(embedding) FROM chunk_vectors WHERE user_id = %s "
            "ORDER BY chunk_id",
            [user_id],
            binary=True,
        )
        ids = np.asarray([int(r[0]) for r in rows], dtype=np.int64)
        dtype = row_dtype(len(rows), half_from)
        matrix = np.zeros((len(rows), self.dim or 0), dtype=dtype)
        for n, row in enumerate(rows):
            matrix[n] = _parse_vector(row[1])
        return ids, matrix

    def vectors(self, user_id: str, ids: Sequence[int]) -> dict[int, np.ndarray]:
        if not ids:
            return {}
        rows = self._rows(
            "SELECT chunk_id, vector_send(embedding) FROM chunk_vectors "
            "WHERE user_id = %s AND chunk_id = ANY(%s)",
            [user_id, list(ids)],
            binary=True,
        )
        return {int(i): _parse_vector(v) for i, v in rows}

    def reset_index(self) -> int:
        with self._conn() as conn, conn.transaction():
            conn.execute("DELETE FROM chunks")  # cascades to chunk_vectors
            conn.execute("UPDATE messages SET indexed = 0")
            vector_rebuild.clear(PgConnection(conn))
        return self.count_unindexed()

    # -- per-user housekeeping -------------------------------------------------------------

    def stats(self, user_id: str) -> Stats:
        row = self._rows(
            "SELECT (SELECT count(*) FROM messages WHERE user_id = %s), "
            "(SELECT count(*) FROM chunks WHERE user_id = %s), "
            "(SELECT count(*) FROM facts WHERE user_id = %s AND status = 'active'), "
            "(SELECT count(DISTINCT session_id) FROM messages WHERE user_id = %s)",
            [user_id] * 4,
        )[0]
        return Stats(user_id, *(int(n) for n in row))

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
            return int(cur.rowcount)

    def integrity_ok(self) -> bool:
        try:
            return bool(self._rows("SELECT count(*) FROM messages") is not None)
        except StoreUnavailable:
            return False

    def users(self) -> list[str]:
        """Every user with a message or a fact (for copying a whole store)."""
        rows = self._rows("SELECT user_id FROM messages UNION SELECT user_id FROM facts")
        return sorted(str(row[0]) for row in rows)


def _add_chunks(
    conn: Any,
    message: Message,
    texts: Sequence[str],
    vectors: np.ndarray | None,
    context: str,
    start: int,
    last: bool,
    words: Sequence[Sequence[Term]] = (),
) -> list[int]:
    """`PgStore.add_chunks` on a connection already in a transaction."""
    row = conn.execute(
        "SELECT indexed FROM messages WHERE id = %s FOR UPDATE", [message.id]
    ).fetchone()
    if row is None or row[0]:
        return []  # indexed meanwhile (or deleted)
    if start == 0:
        conn.execute("DELETE FROM chunks WHERE message_id = %s", [message.id])
    else:
        held = conn.execute(
            "SELECT count(*) FROM chunks WHERE message_id = %s", [message.id]
        ).fetchone()[0]
        if held != start:
            return []  # not the slice that comes next
    ids: list[int] = []
    for offset, text in enumerate(texts):
        position = start + offset
        own = " ".join(w.split("_", 1)[1] for w in fts_document(message.user_id, text).split())
        before = ""
        if position == 0 and context:
            before = " ".join(
                w.split("_", 1)[1] for w in fts_document(message.user_id, context).split()
            )
        chunk_id = conn.execute(
            "INSERT INTO chunks (message_id, user_id, session_id, role, name, position, text, "
            "created_at, terms) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, "
            "setweight(to_tsvector('simple', %s), 'A') || setweight(to_tsvector('simple', %s), 'B')"
            ") RETURNING id",
            [
                message.id,
                message.user_id,
                message.session_id,
                message.role,
                message.name,
                position,
                text,
                message.created_at,
                own,
                before,
            ],
        ).fetchone()[0]
        ids.append(int(chunk_id))
        if vectors is not None:
            conn.execute(
                "INSERT INTO chunk_vectors (chunk_id, user_id, embedding) "
                "VALUES (%s, %s, %s::vector)",
                [chunk_id, message.user_id, _vector_text(vectors[offset])],
            )
        if offset < len(words) and words[offset]:
            rows = [(message.user_id, t.stem, t.word, chunk_id, t.vector) for t in words[offset]]
            with conn.cursor() as cursor:
                cursor.executemany(ADD_TERM, rows)
    if last:
        conn.execute("UPDATE messages SET indexed = 1 WHERE id = %s", [message.id])
    return ids


def _reason(exc: BaseException) -> str:
    """One line saying why, without the connection string psycopg may quote."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return redact_url(text)
