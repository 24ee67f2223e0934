"""Postgres's reads on recall's path: chunks, their neighbours, both searches, vectors, words.

`PgReads` is the part of `PgStore` (memory/store/postgres.py) that recall reads through.
There is no per-replica cache: every search reads the database, so a turn stored through one
replica is recalled through any other as soon as it is indexed.

- Dense search is exact cosine over the user's rows of `chunk_vectors` (pgvector's `<=>`,
  ordered, limited; the user's rows found by index).
- Lexical search is BM25 over the same stemmed terms SQLite indexes (`memory.store.fts`),
  summed in SQL over the user's postings (`chunk_terms`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

import numpy as np

from memory.records import Chunk, Message, Term
from memory.store.fts import fts_document
from memory.store.left_messages import LEFT
from memory.store.message_rows import MESSAGE_COLUMNS, NOT_AN_EXAMPLE, message_from_row
from memory.store.pg_chunks import parse_vector, vector_text
from memory.store.pg_connections import PgConnections
from memory.store.vector_table import RowSink, collect

# Rows handed to a `RowSink` at a time (vectors as float32: 6 MB of 384 dimensions).
_SINK_ROWS = 4096

# BM25's term-frequency saturation and length normalisation, as FTS5's and tantivy's.
_K1 = 1.2

_B = 0.75


class PgReads(PgConnections):
    """The Postgres store's reads for recall (`dim` is set by `ensure_vectors`)."""

    dim: int | None

    def vocabulary(self, user_id: str, after: int = 0) -> list[Term]:
        """As SQLite's: the user's vocabulary rows past `after`, oldest first."""
        rows = self._rows(
            "SELECT id, stem, word, vector FROM vocabulary WHERE user_id = %s AND id > %s "
            "ORDER BY id",
            [user_id, after],
            recall=True,
        )
        return [Term(stem, word, bytes(vector), int(i)) for i, stem, word, vector in rows]

    def chunks(self, user_id: str, ids: Sequence[int]) -> dict[int, Chunk]:
        if not ids:
            return {}
        rows = self._rows(
            "SELECT c.id, c.message_id, c.user_id, c.session_id, c.role, c.name, c.text, "
            "c.created_at, m.content_hash, m.turn FROM chunks c "
            "JOIN messages m ON m.id = c.message_id WHERE c.user_id = %s AND c.id = ANY(%s)",
            [user_id, list(ids)],
            recall=True,
        )
        return {int(row[0]): Chunk(*row) for row in rows}

    def neighbours(
        self,
        user_id: str,
        message_ids: Sequence[int],
        around: int,
        exclude_hashes: Collection[str] = (),
        sessions: Mapping[int, str] | None = None,
    ) -> dict[int, list[Message]]:
        """For each of these messages (by id): up to `around` user/assistant turns each side
        of it in its session, and itself, oldest first (each message's session is looked up
        in its statement: `sessions` is SQLite's saving)."""
        found = {mid: self._neighbours(user_id, mid, around, exclude_hashes) for mid in message_ids}
        return {mid: messages for mid, messages in found.items() if messages}

    def _neighbours(
        self, user_id: str, message_id: int, around: int, exclude_hashes: Collection[str]
    ) -> list[Message]:
        same_session = (
            f"SELECT {MESSAGE_COLUMNS}, content_hash FROM messages WHERE user_id = %s "
            "AND session_id = (SELECT session_id FROM messages WHERE id = %s AND user_id = %s) "
            f"AND role IN ('user', 'assistant') AND indexed != {LEFT} AND {NOT_AN_EXAMPLE}"
        )
        rows = self._rows(
            f"(SELECT * FROM ({same_session} AND id < %s ORDER BY id DESC LIMIT %s) a) UNION ALL "
            f"(SELECT * FROM ({same_session} AND id >= %s ORDER BY id LIMIT %s) b) ORDER BY id",
            [user_id, message_id, user_id, message_id, around]
            + [user_id, message_id, user_id, message_id, around + 1],
            recall=True,
        )
        found = [(row[0], message_from_row(row), row[8] not in exclude_hashes) for row in rows]
        return [message for mid, message, keep in found if keep or mid == message_id]

    def chunk_heads(
        self, user_id: str, ids: Sequence[int], present: Collection[str], hold: bool
    ) -> tuple[dict[int, Chunk], set[int]]:
        """Whole rows: no user's heads are held apart from them here (memory/store/chunk_heads.py
        is SQLite's)."""
        return self.chunks(user_id, ids), set()

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
            recall=True,
        )
        return [(int(i), float(score)) for i, score in rows]

    def dense_search(self, user_id: str, vector: np.ndarray, limit: int) -> list[tuple[int, float]]:
        """(chunk id, cosine similarity) of the user's nearest chunks: an exact scan."""
        rows = self._rows(
            "SELECT chunk_id, 1 - (embedding <=> %s::vector) AS cosine FROM chunk_vectors "
            "WHERE user_id = %s ORDER BY embedding <=> %s::vector, chunk_id LIMIT %s",
            [vector_text(vector), user_id, vector_text(vector), limit],
            recall=True,
        )
        return [(int(i), float(c)) for i, c in rows]

    def user_vectors(
        self, user_id: str, half_from: int | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        return collect(lambda sink: self.read_user_vectors(user_id, sink), half_from)

    def read_user_vectors(self, user_id: str, sink: RowSink) -> None:
        """Hand all of a user's chunk ids and vectors to `sink`, `_SINK_ROWS` at a time."""
        rows = self._rows(
            "SELECT chunk_id, vector_send(embedding) FROM chunk_vectors WHERE user_id = %s "
            "ORDER BY chunk_id",
            [user_id],
            binary=True,
            recall=True,
        )
        sink.start(len(rows), self.dim or 0)
        for start in range(0, len(rows), _SINK_ROWS):
            part = rows[start : start + _SINK_ROWS]
            vectors = np.zeros((len(part), self.dim or 0), dtype=np.float32)
            for n, row in enumerate(part):
                vectors[n] = parse_vector(row[1])
            sink.add(np.asarray([int(r[0]) for r in part], dtype=np.int64), vectors)

    def vectors(self, user_id: str, ids: Sequence[int]) -> dict[int, np.ndarray]:
        if not ids:
            return {}
        rows = self._rows(
            "SELECT chunk_id, vector_send(embedding) FROM chunk_vectors "
            "WHERE user_id = %s AND chunk_id = ANY(%s)",
            [user_id, list(ids)],
            binary=True,
            recall=True,
        )
        return {int(i): parse_vector(v) for i, v in rows}
