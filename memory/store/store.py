"""The SQLite store: verbatim messages, their chunks, FTS5 and sqlite-vec indexes.

One database file holds everything. Every function that reads or writes a user's data takes
`user_id` and filters on it in the SQL itself: isolation lives in the query. Writes are
serialised by one lock (SQLite has one writer); reads run on per-thread connections in WAL
mode, so they never wait for the writer. Facts have their own SQL in `memory/store/fact_rows.py`,
the vector table in `memory/store/vector_table.py`, export and import in
`memory/store/transfer.py`; they use this module's connections (`memory/store/database.py`).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import sqlean

from memory.records import Chunk, Message, Term
from memory.store import lexical_sync, vector_rebuild, vector_table
from memory.store.chunk_rows import DEFAULT_ROWS, ChunkRows
from memory.store.database import Database, connect
from memory.store.fts import fts_document, fts_match, fts_stems, owner_token
from memory.store.lexical_index import LexicalIndex
from memory.store.migrations import MigrationProgress, migrate

logger = logging.getLogger(__name__)

# Bump when the vector table's definition, or what is embedded for a chunk, changes: vectors
# are then rebuilt from messages. 3: a message's first chunk is embedded after the previous
# turn's tail (memory/ingest/turns.py). 4: the same run fills the user's vocabulary
# (memory/recall/vocabulary.py), so a store from before gets one.
_VECTOR_LAYOUT = "4"


# A word for the user's vocabulary (memory/recall/vocabulary.py): the first chunk to bring a
# stem keeps it. Both backends' statement (`%s` marks; SQLite takes `?`).
ADD_TERM = (
    "INSERT INTO vocabulary (user_id, stem, word, chunk_id, vector) VALUES (%s, %s, %s, %s, %s) "
    "ON CONFLICT (user_id, stem) DO NOTHING"
)


@dataclass(frozen=True, slots=True)
class NewMessage:
    """A message about to be stored (see `memory.ingest.turns` for how keys are computed)."""

    message_key: str
    content_hash: str
    role: str
    name: str | None
    content: str
    payload: str
    model: str | None
    tokens: int
    partial: bool
    created_at: float


@dataclass(frozen=True, slots=True)
class Stats:
    user_id: str
    messages: int
    chunks: int
    facts: int
    sessions: int


class Store(Database):
    """moim's migrated SQLite database, opened once per process.

    With `lexical_index` on, a tantivy index beside the file (`<db>-lexical/`) answers
    `lexical_search` once verified against SQLite (memory/store/lexical_sync.py); FTS5 does
    until then, and in any process that cannot take that index's write lock.
    `context_chars` is `Settings.embedding_context_chars`, for rebuilding it.
    """

    def __init__(
        self,
        path: Path | str,
        busy_timeout: float = 10.0,
        on_migration: MigrationProgress | None = None,
        lexical_index: bool = False,
        context_chars: int = 200,
        chunk_rows: int = DEFAULT_ROWS,
    ) -> None:
        super().__init__(path, busy_timeout)
        # Rows recall read lately (memory/store/chunk_rows.py), told of every change below.
        self.rows = ChunkRows(chunk_rows)
        self.dim: int | None = None
        self.context_chars = context_chars
        self.lexical: LexicalIndex | None = None
        self.mirrored_generation = 0  # the generation the lexical index holds in this process
        self._stale = False  # another process changed chunks: rebuild at the next commit
        self.rebuilding: threading.Thread | None = None  # the lexical index's, if under way
        with self._errors():
            migrate(self.connection(), on_migration)
        if lexical_index and self.path != ":memory:":
            try:
                self.lexical = LexicalIndex(Path(self.target + "-lexical"))
            except ValueError as exc:  # another process holds its writer (tantivy's lock)
                logger.warning("lexical index not used in this process: %s", exc)
            else:
                self.rebuilding = lexical_sync.check(self)

    def close(self) -> None:
        """Let go of the lexical index (its writer's lock): uncommitted changes are dropped,
        so the next process rebuilds or verifies it. SQLite's connections close with their
        threads."""
        if self.lexical is not None:
            self.lexical.close()
            self.lexical = None

    def wait_for_lexical_index(self, timeout: float | None = None) -> bool:
        """Wait for a rebuild of the lexical index under way; True when it is ready."""
        if self.rebuilding is not None:
            self.rebuilding.join(timeout)
        return self.lexical is not None and self.lexical.ready

    def write_lock(self) -> threading.RLock:
        """The lock every write transaction takes; held across a change and its mirroring."""
        return self._write_lock

    def _mirror(
        self,
        generation: int,
        deleted: Sequence[int] = (),
        added: Sequence[tuple[int, str, str, str]] = (),
        user_id: str | None = None,
        forgotten: bool = False,
        clear: bool = False,
        commit: bool = True,
    ) -> None:
        """Apply a committed change of `chunks` to the lexical index and the cached rows (the
        write lock held): `deleted` ids and `added` documents of `user_id`'s, all of that
        user's chunks (`forgotten`), or every chunk (`clear`).

        `generation` is the one the change's transaction set; a gap means another process
        changed chunks too, and the index is rebuilt at the next commit.
        """
        self.rows.changed(generation, user_id, deleted, forgotten, clear)
        if generation != self.mirrored_generation + 1:
            self._stale = True
        self.mirrored_generation = generation
        if self.lexical is None:
            return
        if clear:
            self.lexical.clear()
        if forgotten and user_id is not None:
            self.lexical.delete_owner(owner_token(user_id))
        self.lexical.delete_ids(deleted)
        self.lexical.put(added)
        if commit:
            self.commit_lexical()

    def commit_lexical(self) -> None:
        """Make chunks added since the last call searchable in the lexical index (one
        tantivy commit: the writer calls it once per batch of turns)."""
        if self.lexical is None:
            return
        with self.held():
            if self._stale and not self.lexical.building:
                self._stale = False
                self.rebuilding = lexical_sync.start_rebuild(self)
                return
            generation = self.mirrored_generation
        # Outside the store's lock: a tantivy commit syncs files (milliseconds), and other
        # writers (a recall marking facts injected) must not wait for it. Changes mirrored
        # meanwhile are committed too, under an older generation: after a crash that only
        # asks for a rebuild, never the reverse.
        self.lexical.commit(generation)

    # -- vectors table ---------------------------------------------------------------------

    def ensure_vectors(self, model: str, dim: int) -> bool:
        """Create the vector table for this model; return True when work is needed: every
        chunk re-embedded (another model) or every message re-indexed (another layout).

        Vectors are derived data, tagged in `meta` with the model and width that made them.
        For another model the table is made again at its width and a background rebuild
        re-embeds the chunks (memory/store/vector_rebuild.py); chunks and their lexical
        rows stay. When the table's layout (what is embedded for a chunk) changed, chunks
        are dropped too and every message is marked for re-indexing.
        """
        wanted = {
            "embedding_model": model,
            "embedding_dim": str(dim),
            "vector_layout": _VECTOR_LAYOUT,
        }
        current = dict(self.read("SELECT key, value FROM meta"))
        same = all(current.get(k) == v for k, v in wanted.items())
        rebuild = same and vector_rebuild.KEY in current
        with self.held():
            with self.write() as db:
                generation = None
                if not same:
                    vector_table.drop(db)
                    db.execute("DELETE FROM vocabulary")  # word vectors of the old model
                    if reembed_only(current):
                        old = f"{current['embedding_model']} ({current['embedding_dim']})"
                        rebuild = vector_rebuild.start(db, old, f"{model} ({dim})") is not None
                    else:
                        db.execute("DELETE FROM chunks")
                        db.execute("UPDATE messages SET indexed = 0 WHERE indexed = 1")
                        vector_rebuild.clear(db)
                        generation = lexical_sync.bump(db)
                    db.executemany(
                        "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
                        list(wanted.items()),
                    )
                vector_table.create(db, dim)
            if generation is not None:
                self._mirror(generation, clear=True)
        self.dim = dim
        if rebuild:
            return True
        return not same and bool(self.read("SELECT 1 FROM messages LIMIT 1"))

    def write_vectors(self, db: Any, rows: Sequence[tuple[int, str]], vectors: np.ndarray) -> None:
        """Store (or replace) the vectors of chunks (id, user id), in `write()`'s transaction."""
        for (chunk_id, user_id), vector in zip(rows, vectors, strict=True):
            vector_table.put(db, chunk_id, user_id, vector)

    # -- messages --------------------------------------------------------------------------

    def add_messages(self, user_id: str, session_id: str, rows: Sequence[NewMessage]) -> int:
        """Store messages not yet stored in this session (by `message_key`); count new ones."""
        return sum(1 for new_id in self.insert_messages(user_id, session_id, rows) if new_id)

    def insert_messages(
        self, user_id: str, session_id: str, rows: Sequence[NewMessage]
    ) -> list[int]:
        """Like `add_messages`, but per row the id it was stored under, or 0 if it already was."""
        ids: list[int] = []
        with self.write() as db:
            for m in rows:
                cur = db.execute(
                    "INSERT OR IGNORE INTO messages (user_id, session_id, message_key, "
                    "content_hash, role, name, content, payload, model, tokens, partial, "
                    "created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    message_values(user_id, session_id, m),
                )
                ids.append(int(cur.lastrowid) if cur.rowcount else 0)
        return ids

    def stored_keys(self, user_id: str, session_id: str) -> set[str]:
        """The message keys a session already holds (to skip re-encoding resent history)."""
        packed = self.read_one(
            "SELECT json_group_array(message_key) FROM messages "
            "WHERE user_id = ? AND session_id = ?",
            (user_id, session_id),
        )
        return set(json.loads(packed))

    def has_session(self, user_id: str, session_id: str) -> bool:
        rows = self.read(
            "SELECT 1 FROM messages WHERE user_id = ? AND session_id = ? LIMIT 1",
            (user_id, session_id),
        )
        return bool(rows)

    def session_with(self, user_id: str, hashes: Sequence[str]) -> str | None:
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

    def unindexed_messages(self, limit: int = 256) -> list[Message]:
        """Messages of any user not yet chunked and embedded, oldest first."""
        packed = self.read_one(
            f"SELECT json_group_array({_MESSAGE_JSON}) FROM ("
            "SELECT * FROM messages WHERE indexed = 0 ORDER BY id LIMIT ?)",
            (limit,),
        )
        rows = sorted(json.loads(packed))  # by id: json_group_array keeps no order of its own
        return [message_from_row([*row[:6], float(row[6]), row[7]]) for row in rows]

    def count_unindexed(self) -> int:
        return int(self.read("SELECT count(*) FROM messages WHERE indexed = 0")[0][0])

    def index_frontier(self) -> tuple[int, int | None]:
        """(the newest message id, the oldest unindexed one or None): indexing progress."""
        row = self.read(
            "SELECT (SELECT coalesce(max(id), 0) FROM messages), "
            "(SELECT min(id) FROM messages WHERE indexed = 0)"
        )[0]
        return int(row[0]), row[1]

    def messages(self, user_id: str, session_id: str | None = None) -> list[Message]:
        """A user's messages in storage order, optionally of one session."""
        sql = (
            "SELECT id, user_id, session_id, role, name, content, created_at, partial "
            "FROM messages WHERE user_id = ?"
        )
        params: list[Any] = [user_id]
        if session_id is not None:
            sql += " AND session_id = ?"
            params.append(session_id)
        rows = self.read(sql + " ORDER BY id", params)
        return [message_from_row(row) for row in rows]

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
        """Store a message's chunks from position `start` on, their FTS rows and vectors
        (`vectors[i]` is `texts[i]`'s); with `last`, mark the message indexed. `words[i]` are
        `texts[i]`'s words for the user's vocabulary (a stem the user has is kept as it is).

        A large message is indexed in slices (memory/ingest.py); a slice is stored only if
        the message holds exactly the `start` chunks before it, so none is stored twice.
        `context` (the end of the turn before) goes into the first chunk's FTS row.
        """
        ids: list[int] = []
        documents: list[tuple[int, str, str, str]] = []
        with self.held():
            with self.write() as db:
                row = db.execute(
                    "SELECT indexed FROM messages WHERE id = ?", (message.id,)
                ).fetchone()
                if row is None or row[0]:
                    return []  # indexed meanwhile (or deleted): nothing to do
                found = db.execute("SELECT id FROM chunks WHERE message_id = ?", (message.id,))
                old = [r[0] for r in found.fetchall()]
                if start == 0:
                    vector_table.delete(db, old)
                    db.execute("DELETE FROM chunks WHERE message_id = ?", (message.id,))
                elif len(old) != start:
                    return []  # not the slice that comes next
                for offset, text in enumerate(texts):
                    position = start + offset
                    cur = db.execute(
                        "INSERT INTO chunks (message_id, user_id, session_id, role, name, "
                        "position, text, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                        (
                            message.id,
                            message.user_id,
                            message.session_id,
                            message.role,
                            message.name,
                            position,
                            text,
                            message.created_at,
                        ),
                    )
                    chunk_id = int(cur.lastrowid)
                    before = fts_document(message.user_id, context) if position == 0 else ""
                    terms = fts_document(message.user_id, text)
                    db.execute(
                        "INSERT INTO chunks_fts (rowid, terms, context) VALUES (?, ?, ?)",
                        (chunk_id, terms, before),
                    )
                    ids.append(chunk_id)
                    documents.append((chunk_id, owner_token(message.user_id), terms, before))
                    if vectors is not None:
                        vector_table.put(db, chunk_id, message.user_id, vectors[offset])
                    if offset < len(words):
                        rows = [
                            (message.user_id, t.stem, t.word, chunk_id, t.vector)
                            for t in words[offset]
                        ]
                        db.executemany(ADD_TERM.replace("%s", "?"), rows)
                if last:
                    db.execute("UPDATE messages SET indexed = 1 WHERE id = ?", (message.id,))
                generation = lexical_sync.bump(db)
            deleted = old if start == 0 else []
            self._mirror(generation, deleted, documents, message.user_id, commit=False)
        return ids

    def vocabulary_mark(self, user_id: str) -> tuple[int, int]:
        """How many words the user's vocabulary holds and its newest row's id (0 when none):
        a cache of it is fresh while both are unchanged."""
        row = self.read(
            "SELECT count(*), coalesce(max(id), 0) FROM vocabulary WHERE user_id = ?", (user_id,)
        )[0]
        return int(row[0]), int(row[1])

    def vocabulary(self, user_id: str, after: int = 0) -> list[Term]:
        """The user's vocabulary rows with an id above `after`, oldest first (one packed row
        read: see `read_one`)."""
        packed = self.read_one(
            "SELECT group_concat(id || ' ' || stem || ' ' || hex(vector) || ' ' || word, "
            "char(10)) FROM (SELECT * FROM vocabulary WHERE user_id = ? AND id > ? ORDER BY id)",
            (user_id, after),
        )
        rows = (line.split(" ", 3) for line in packed.split("\n")) if packed else ()
        return [Term(stem, word, bytes.fromhex(vector), int(i)) for i, stem, vector, word in rows]

    def chunk_counts(self, message_ids: Sequence[int]) -> dict[int, int]:
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

    def chunks(self, user_id: str, ids: Sequence[int]) -> dict[int, Chunk]:
        """The user's chunks with these ids (ids of other users are silently absent), in
        ascending id order; rows read lately come from RAM (`ChunkRows`)."""
        if not ids:
            return {}
        with self._errors():
            generation = lexical_sync.generation(self.connection())
        found, missing, ticket = self.rows.get(user_id, ids, generation)
        if missing:
            read = self._read_chunks(user_id, missing)
            self.rows.put(user_id, read, ticket)
            found.update(read)
        return {i: found[i] for i in sorted(found)}

    def _read_chunks(self, user_id: str, ids: Sequence[int]) -> dict[int, Chunk]:
        # One JSON row, not a row per chunk (see `read_one`). The time goes as text with all
        # 17 digits (`%!.17g`): JSON would round it to 15, SQLite's plain %g to 16.
        marks = ",".join("?" * len(ids))
        packed = self.read_one(
            "SELECT json_group_array(json_array(c.id, c.message_id, c.user_id, c.session_id, "
            "c.role, c.name, c.text, printf('%!.17g', c.created_at), m.content_hash, m.turn)) "
            "FROM chunks c JOIN messages m ON m.id = c.message_id "
            f"WHERE c.user_id = ? AND c.id IN ({marks})",
            [user_id, *ids],
        )
        found = {}
        for row in json.loads(packed) if packed else []:
            row[7] = float(row[7])
            found[row[0]] = Chunk(*row)
        return found

    def neighbours(
        self,
        user_id: str,
        message_ids: Sequence[int],
        around: int,
        exclude_hashes: Collection[str] = (),
    ) -> dict[int, list[Message]]:
        """For each of these messages (by id): up to `around` user/assistant turns on each
        side of it in its session, and itself, oldest first; one statement for them all.

        Turns whose content hash is in `exclude_hashes` (present in the request) are left out.
        """
        found: dict[int, list[Message]] = {}
        for start in range(0, len(message_ids), _ANCHORS_PER_READ):
            found.update(
                self._neighbours(
                    user_id, message_ids[start : start + _ANCHORS_PER_READ], around, exclude_hashes
                )
            )
        return found

    def _neighbours(
        self,
        user_id: str,
        message_ids: Sequence[int],
        around: int,
        exclude_hashes: Collection[str],
    ) -> dict[int, list[Message]]:
        same_session = (
            "SELECT ? AS anchor, id, user_id, session_id, role, name, content, created_at, "
            "partial, content_hash FROM messages WHERE user_id = ? AND session_id = "
            "(SELECT session_id FROM messages WHERE id = ? AND user_id = ?) "
            "AND role IN ('user', 'assistant')"
        )
        parts: list[str] = []
        params: list[Any] = []
        for mid in message_ids:
            parts.append(f"SELECT * FROM ({same_session} AND id < ? ORDER BY id DESC LIMIT ?)")
            parts.append(f"SELECT * FROM ({same_session} AND id >= ? ORDER BY id LIMIT ?)")
            params += [mid, user_id, mid, user_id, mid, around]
            params += [mid, user_id, mid, user_id, mid, around + 1]
        # A few rows a passage: read as rows (packing them as JSON, as `chunks` does for ~80,
        # cost 20% more here).
        rows = self.read(" UNION ALL ".join(parts), params)
        found: dict[int, list[Message]] = {mid: [] for mid in message_ids}
        for row in sorted(rows, key=lambda row: (row[0], row[1])):  # by anchor, then id
            anchor, mid, content_hash = row[0], row[1], row[9]
            if content_hash not in exclude_hashes or mid == anchor:
                found[anchor].append(message_from_row(row[1:9]))
        return {mid: messages for mid, messages in found.items() if messages}

    def lexical_search(
        self, user_id: str, terms: Sequence[str], limit: int, context_weight: float
    ) -> list[tuple[int, float]]:
        """(chunk id, BM25) of the user's best `limit` chunks holding any of `terms` (from
        `memory.store.fts`), best first; higher is better.

        The tantivy index answers once verified (memory/store/lexical_index.py: a context
        term counts as much as the chunk's own there); else FTS5, where a term in a chunk's
        context (the end of the turn before it) counts `context_weight` times as much as one
        in its own text.
        """
        match = fts_match(user_id, terms)
        if match is None:
            return []
        index = self.lexical
        if index is not None and index.ready:
            return index.search(fts_stems(user_id, terms), limit)  # context weighs 1 there
        # The terms are the user's own (see memory/store/fts.py); the join re-checks the user id.
        # It runs on the top `limit` only (a materialised CTE): joining every match before
        # sorting cost 22 ms instead of 15 for a 100k-chunk user (5k matches).
        # The hits come back as one "id score,…" string, one row (see `read_one`), and are
        # sorted here: group_concat keeps no order of its own.
        packed = self.read_one(
            "WITH found AS MATERIALIZED ("
            "SELECT rowid AS id, bm25(chunks_fts, 1.0, ?) AS score FROM chunks_fts "
            "WHERE chunks_fts MATCH ? ORDER BY score LIMIT ?) "
            "SELECT group_concat(id || ' ' || printf('%!.17g', score)) FROM ("
            "SELECT c.id, found.score FROM found JOIN chunks c ON c.id = found.id "
            "WHERE c.user_id = ? ORDER BY found.score)",
            (float(context_weight), match, limit, user_id),
        )
        if not packed:
            return []
        hits = [(float(score), int(i)) for i, score in (h.split(" ") for h in packed.split(","))]
        return [(i, -score) for score, i in sorted(hits)]

    def dense_search(self, user_id: str, vector: np.ndarray, limit: int) -> list[tuple[int, float]]:
        """(chunk id, cosine similarity) of the user's nearest chunks, via sqlite-vec."""
        with self._errors():
            return vector_table.nearest(self.connection(), user_id, vector, limit)

    def user_vectors(
        self, user_id: str, half_from: int | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """All of a user's chunk ids (ascending) and vectors; the matrix may have spare rows.
        Its rows are float16 when the user has at least `half_from` vectors, else float32."""
        with self._errors():
            return vector_table.partition(self.connection(), user_id, self.dim or 0, half_from)

    def vectors(self, user_id: str, ids: Sequence[int]) -> dict[int, np.ndarray]:
        """The stored vectors of some of the user's chunks."""
        with self._errors():
            return vector_table.some(self.connection(), user_id, ids)

    def reset_index(self) -> int:
        """Drop every derived row (chunks, FTS, vectors); return messages to re-index."""
        with self.held():
            with self.write() as db:
                db.execute("DELETE FROM vocabulary")
                db.execute("DELETE FROM chunks")
                db.execute("DELETE FROM chunk_vectors")
                db.execute("UPDATE messages SET indexed = 0")
                vector_rebuild.clear(db)
                generation = lexical_sync.bump(db)
            self._mirror(generation, clear=True)
        return self.count_unindexed()

    # -- per-user housekeeping -------------------------------------------------------------

    def stats(self, user_id: str) -> Stats:
        row = self.read(
            "SELECT (SELECT count(*) FROM messages WHERE user_id = ?), "
            "(SELECT count(*) FROM chunks WHERE user_id = ?), "
            "(SELECT count(*) FROM facts WHERE user_id = ? AND status = 'active'), "
            "(SELECT count(DISTINCT session_id) FROM messages WHERE user_id = ?)",
            (user_id, user_id, user_id, user_id),
        )[0]
        return Stats(user_id, *row)

    def delete_user(self, user_id: str) -> int:
        """Forget everything of one user; return the number of messages removed."""
        with self.held():
            with self.write() as db:
                db.execute("DELETE FROM chunk_vectors WHERE user_id = ?", (user_id,))
                db.execute("DELETE FROM vocabulary WHERE user_id = ?", (user_id,))
                db.execute("DELETE FROM chunks WHERE user_id = ?", (user_id,))
                db.execute("DELETE FROM facts WHERE user_id = ?", (user_id,))
                db.execute("DELETE FROM consolidation_marks WHERE user_id = ?", (user_id,))
                db.execute("DELETE FROM response_links WHERE user_id = ?", (user_id,))
                cur = db.execute("DELETE FROM messages WHERE user_id = ?", (user_id,))
                generation = lexical_sync.bump(db)
            self._mirror(generation, user_id=user_id, forgotten=True)
            return int(cur.rowcount)

    def integrity_ok(self) -> bool:
        """PRAGMA integrity_check plus FTS5's own check, on a fresh connection.

        A long-lived connection's cached FTS5 structure can be older than the writer's and
        then reports a healthy index as malformed.
        """
        conn = connect(self.target, self.busy_timeout)
        try:
            ok = conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
            conn.execute("INSERT INTO chunks_fts (chunks_fts) VALUES ('integrity-check')")
            return bool(ok)
        except sqlean.Error:
            return False
        finally:
            conn.close()


# A message row as a JSON array for packed reads (`Store.read_one`); the time as exact text.
# Messages whose neighbours one statement reads (two SELECTs each; SQLite allows 500 in a
# compound SELECT).
_ANCHORS_PER_READ = 100

_MESSAGE_JSON = (
    "json_array(id, user_id, session_id, role, name, content, "
    "printf('%!.17g', created_at), partial)"
)


def reembed_only(current: dict[str, str]) -> bool:
    """True when the vectors were made by another model with today's layout: re-embedding
    the chunks is enough (a store with no vectors yet, or another layout, re-indexes)."""
    return (
        current.get("vector_layout") == _VECTOR_LAYOUT
        and "embedding_model" in current
        and "embedding_dim" in current
    )


def message_from_row(row: Sequence[Any]) -> Message:
    """A Message from the first eight columns (id … created_at, partial) of a row."""
    return Message(
        id=row[0],
        user_id=row[1],
        session_id=row[2],
        role=row[3],
        name=row[4],
        content=row[5],
        created_at=row[6],
        partial=bool(row[7]),
    )


def message_values(user_id: str, session_id: str, m: Any) -> tuple[Any, ...]:
    """One message's `messages` columns, in the order both backends' INSERTs name them."""
    return (
        user_id,
        session_id,
        m.message_key,
        m.content_hash,
        m.role,
        m.name,
        m.content,
        m.payload,
        m.model,
        m.tokens,
        int(m.partial),
        m.created_at,
    )
