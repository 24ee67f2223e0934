"""The SQLite store: verbatim messages, their chunks, FTS5 and sqlite-vec indexes.

One database file holds everything. Every function that reads or writes a user's data takes
`user_id` and filters on it in the SQL itself: isolation lives in the query. Writes are
serialised by one lock (SQLite has one writer); reads run on per-thread connections in WAL
mode, so they never wait for the writer. Facts have their own SQL in `memory/store/fact_rows.py`,
the vector table in `memory/store/vector_table.py`, export and import in
`memory/store/transfer.py`; they use this module's connections (`memory/store/database.py`).
Recall's reads are in `memory/store/sqlite_reads.py`, the queries Postgres shares word for
word in `memory/store/portable_queries.py`; this module holds the writes and the lexical
index's mirroring.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import sqlean

from memory.records import Message, Term
from memory.store import lexical_sync, scrub, vector_rebuild, vector_table
from memory.store.backend import ChunkSlice
from memory.store.chunk_heads import ChunkHeads, Head
from memory.store.chunk_rows import DEFAULT_ROWS, ChunkRows
from memory.store.chunk_writes import write_slice
from memory.store.database import connect
from memory.store.fts import owner_token
from memory.store.left_messages import LEFT, leave_rows
from memory.store.lexical_index import LexicalIndex
from memory.store.message_rows import NewMessage, Stats, message_values
from memory.store.migrations import MigrationProgress, migrate
from memory.store.portable_queries import PortableQueries
from memory.store.session_forget import SessionForgotten, delete_session_rows
from memory.store.sqlite_reads import SqliteReads

# `NewMessage` and `Stats` were defined here before memory/store/message_rows.py: the ingest
# step and the tests still import them from this module.
__all__ = ["NewMessage", "Stats", "Store"]

logger = logging.getLogger(__name__)

# Writer passes whose lexical writes may wait for one commit while a backlog lasts (~0.4 s
# of one core a pass): the dense side has them at once, the lexical side a few passes later.
HELD_PASSES = 4


class Store(PortableQueries, SqliteReads):
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
        # Large users' chunks but their text (memory/store/chunk_heads.py), told likewise.
        self.heads = ChunkHeads(self._read_heads)
        self.dim: int | None = None
        self.context_chars = context_chars
        self.lexical: LexicalIndex | None = None
        self.mirrored_generation = 0  # the generation the lexical index holds in this process
        self._stale = False  # another process changed chunks: rebuild at the next commit
        self._foreign = False  # …and the layer's RAM mirrors have yet to hear of it
        self.rebuilding: threading.Thread | None = None  # the lexical index's, if under way
        self._held_passes = 0  # writer passes mirrored to the lexical index, not committed
        self.lexical_problem: str | None = None  # its files failed under moim (lexical_sync)
        self.lexical_tried = float("-inf")  # time.monotonic() it was last reopened
        with self._errors():
            self.migrations_applied = migrate(self.connection(), on_migration, self.path)
        if lexical_index and self.path != ":memory:":
            try:
                self.lexical = LexicalIndex(Path(self.target + "-lexical"))
            except ValueError:  # another process holds its writer (tantivy's lock)
                # As expected for a `moim` command beside the server: INFO, so its stderr
                # starts with the database's name, not tantivy's lock error.
                logger.info(
                    "lexical index held by another process (a running moim?): "
                    "this one searches with FTS5"
                )
            else:
                self.rebuilding = lexical_sync.check(self)

    def claim_consolidation(self, user_id: str) -> Callable[[], None] | None:
        """Granted: one `moim serve` uses a SQLite file (it holds the journal's lock)."""
        return _nothing

    def close(self) -> None:
        """Let go of the lexical index (its writer's lock): uncommitted changes are dropped,
        so the next process rebuilds or verifies it. SQLite's connections close with their
        threads."""
        self.lexical_tried = float("inf")  # closed: a failed index is not reopened now
        if self.lexical is not None:
            if self._held_passes:  # a backlog's passes held back: committed, not rebuilt
                self.commit_lexical()
            self.lexical.close()
            self.lexical = None

    def wait_for_lexical_index(self, timeout: float | None = None) -> bool:
        """Wait for a rebuild of the lexical index under way; True when it is ready."""
        if self.rebuilding is not None:
            self.rebuilding.join(timeout)
        return self.lexical is not None and self.lexical.ready

    def take_foreign_change(self) -> bool:
        """True, once, when another process (a `moim` command beside the server) changed
        chunks since this one last heard: the caller drops what it mirrors of them in RAM.

        Seen here on a read (one read of the generation), confirmed under the write lock so
        that a change of this process's own, committed but not yet mirrored, is not taken for
        one; the lexical index is then rebuilt (FTS5 answers meanwhile). Seen by this
        process's next write first, it is reported here all the same.
        """
        with self._errors():
            moved = lexical_sync.generation(self.connection()) != self.mirrored_generation
        if not (moved or self._foreign) or not self._write_lock.acquire(blocking=False):
            return False  # nothing new, or this process is writing: ask again next time
        try:
            with self._errors():
                current = lexical_sync.generation(self.connection())
            if current != self.mirrored_generation:
                self.mirrored_generation, self._stale, self._foreign = current, True, True
                if self.lexical is not None and not self.lexical.building:
                    self.lexical.ready, self._stale = False, False
                    self.rebuilding = lexical_sync.start_rebuild(self)
            taken, self._foreign = self._foreign, False
            return taken
        finally:
            self._write_lock.release()

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
        heads: Sequence[Head] = (),
    ) -> None:
        """Apply a committed change of `chunks` to the lexical index and the cached rows (the
        write lock held): `deleted` ids and `added` documents (and `heads`) of `user_id`'s,
        all of that user's chunks (`forgotten`), or every chunk (`clear`).

        `generation` is the one the change's transaction set; a gap means another process
        changed chunks too, and the index is rebuilt at the next commit.
        """
        self.rows.changed(generation, user_id, deleted, forgotten, clear)
        self.heads.changed(generation, user_id, deleted, heads, forgotten, clear)
        if generation != self.mirrored_generation + 1:
            self._stale = self._foreign = True
        self.mirrored_generation = generation
        if self.lexical is None:
            return
        try:
            if clear:
                self.lexical.clear()
            if forgotten and user_id is not None:
                self.lexical.delete_owner(owner_token(user_id))
            self.lexical.delete_ids(deleted)
            self.lexical.put(added)
        except (ValueError, OSError) as exc:  # its files failed: FTS5 answers, rebuilt
            lexical_sync.failed(self, exc)
            return
        if commit:
            self.commit_lexical()

    def commit_lexical(self, backlog: bool = False) -> None:
        """Make chunks added since the last call searchable in the lexical index (one
        tantivy commit: the writer calls it once per batch of turns).

        `backlog`: more passes follow at once (the writer's pass left work pending); the
        commit then waits for up to `HELD_PASSES` passes. Each commit makes a segment, and
        tantivy's merge policy (not settable from Python) rewrites its small segments
        together every eighth: a commit every few passes under a backlog rewrites a few
        times fewer of them (docs/performance.md, "Load, eighth pass"). The pass that
        empties the backlog commits, so an idle writer leaves nothing held back.
        """
        if self.lexical_health() is not None or self.lexical is None:
            return  # being rebuilt after its files failed (or not used)
        if backlog and self._held_passes < HELD_PASSES - 1:
            self._held_passes += 1
            return
        self._held_passes = 0
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
        try:
            self.lexical.commit(generation)
        except (ValueError, OSError) as exc:  # its files failed: FTS5 answers, rebuilt
            with self.held():
                lexical_sync.failed(self, exc)

    def lexical_health(self) -> str | None:
        """What is wrong with the lexical index (`lexical_sync.health`)."""
        return lexical_sync.health(self)

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
        wanted = vector_rebuild.tags(model, dim)
        current = dict(self.read("SELECT key, value FROM meta"))
        same = all(current.get(k) == v for k, v in wanted.items())
        rebuild = same and vector_rebuild.KEY in current
        table = self.read("SELECT 1 FROM sqlite_master WHERE name = ?", (vector_table.TABLE,))
        if same and table:  # nothing to change: no write lock, which `moim serve` may hold
            self.dim = dim
            return rebuild
        with self.held():
            with self.write() as db:
                generation = None
                if not same:
                    vector_table.drop(db)
                    rebuild, reindex = vector_rebuild.switch(db, current, model, dim)
                    if reindex:
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
        """Store a message's chunks from position `start` on (memory/store/chunk_writes.py
        says how); their ids, or [] when this slice is not the one that comes next."""
        part = ChunkSlice(message, texts, vectors, context, start, last, words)
        return self.add_slices([part])[0]

    def add_slices(self, slices: Sequence[ChunkSlice]) -> list[list[int]]:
        """`add_chunks` of each slice, in one transaction (an indexing pass); the lexical
        index and the row caches hear of them once it has committed, in order."""
        with self.held():
            with self.write() as db:
                written = [write_slice(db, part) for part in slices]
            for done in written:
                if done is not None:
                    self._mirror(
                        done.generation,
                        done.deleted,
                        done.documents,
                        done.user_id,
                        commit=False,
                        heads=done.heads,
                    )
        return [done.ids if done is not None else [] for done in written]

    def reset_index(self) -> int:
        """Drop every derived row (chunks, FTS, vectors); return messages to re-index."""
        with self.held():
            with self.write() as db:
                db.execute("DELETE FROM vocabulary")
                db.execute("DELETE FROM chunks")
                db.execute("DELETE FROM chunk_vectors")
                db.execute(f"UPDATE messages SET indexed = 0 WHERE indexed != {LEFT}")
                vector_rebuild.clear(db)
                generation = lexical_sync.bump(db)
            self._mirror(generation, clear=True)
        return self.count_unindexed()

    # -- per-user housekeeping -------------------------------------------------------------

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
                scrub.mark_due(db)  # their words are still in the files: `scrub` erases them
                generation = lexical_sync.bump(db)
            self._mirror(generation, user_id=user_id, forgotten=True)
            return int(cur.rowcount)

    def delete_session(
        self, user_id: str, session_id: str, facts: bool = False
    ) -> SessionForgotten | None:
        """Forget one session of one user (memory/store/session_forget.py); None: no such."""
        with self.held():
            with self.write() as db:
                done = delete_session_rows(db, user_id, session_id, facts)
                if done is None:
                    return None
                generation = self._chunks_deleted(db, done.chunk_ids)
            self._mirror(generation, done.chunk_ids, user_id=user_id)
            return done

    def leave_messages(self, user_id: str, message_ids: Sequence[int]) -> int:
        """Set aside messages a conversation left behind (memory/store/left_messages.py);
        return how many chunks of theirs went."""
        with self.held():
            with self.write() as db:
                chunk_ids = leave_rows(db, user_id, message_ids)
                generation = self._chunks_deleted(db, chunk_ids)
            self._mirror(generation, chunk_ids, user_id=user_id)
            return len(chunk_ids)

    def _chunks_deleted(self, db: Any, chunk_ids: Sequence[int]) -> int:
        """In a write transaction that deleted these chunks: their vectors go too (sqlite-vec
        has no cascade); return the chunks' new generation, for the lexical index."""
        vector_table.delete(db, chunk_ids)
        scrub.mark_due(db)  # their words are still in the files: `scrub` erases them
        return lexical_sync.bump(db)

    def forgotten_since(self, user_id: str, at: float) -> bool:
        """False: one server serves a SQLite file, and its writer knows its own forgets
        (`proxy/writer_forgotten.py`); replicas share PostgreSQL (`PgStore.forgotten_since`)."""
        return False

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
def _nothing() -> None:
    """The release of a claim that holds nothing."""
