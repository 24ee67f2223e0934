"""Numbered schema migrations, each applied in one transaction together with its record.

A shipped migration is never edited; a fix is a new, higher-numbered migration. Applied
names are recorded in `_moim_migrations`. `messages` is the source of truth and only ever
gains columns; `chunks`, `chunks_fts` and the vector table are derived and may be dropped
and rebuilt by `moim reindex`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import sqlean

from memory.errors import MigrationFailed
from memory.store.fts import fts_document, owner_token, turn_tail
from memory.store.newer_schema import refuse_newer

logger = logging.getLogger(__name__)

Connection = Any  # a sqlean / sqlite3 connection

Migration = Callable[[Connection], None]
# Told (done, total, name of the migration about to run; "" once all are done) on an upgrade.
MigrationProgress = Callable[[int, int, str], None]


def m001_initial(db: Connection) -> None:
    db.executescript(
        """
        CREATE TABLE messages (
            id INTEGER PRIMARY KEY,
            user_id TEXT NOT NULL,
            session_id TEXT NOT NULL,
            -- identity of the message inside its session (see memory.ingest.identity.message_keys)
            message_key TEXT NOT NULL,
            -- hash of role + text alone: "is this message present in a request?"
            content_hash TEXT NOT NULL,
            role TEXT NOT NULL,
            name TEXT,
            content TEXT NOT NULL,
            payload TEXT NOT NULL,
            model TEXT,
            tokens INTEGER NOT NULL DEFAULT 0,
            partial INTEGER NOT NULL DEFAULT 0,
            created_at REAL NOT NULL,
            indexed INTEGER NOT NULL DEFAULT 0,
            UNIQUE (user_id, session_id, message_key)
        );
        CREATE INDEX messages_by_user ON messages (user_id, session_id, id);
        CREATE INDEX messages_unindexed ON messages (indexed) WHERE indexed = 0;

        CREATE TABLE chunks (
            id INTEGER PRIMARY KEY,
            message_id INTEGER NOT NULL REFERENCES messages (id) ON DELETE CASCADE,
            user_id TEXT NOT NULL,
            session_id TEXT NOT NULL,
            role TEXT NOT NULL,
            name TEXT,
            position INTEGER NOT NULL,
            text TEXT NOT NULL,
            created_at REAL NOT NULL
        );
        CREATE INDEX chunks_by_user ON chunks (user_id, id);
        CREATE INDEX chunks_by_message ON chunks (message_id);

        CREATE VIRTUAL TABLE chunks_fts USING fts5 (
            text, content = 'chunks', content_rowid = 'id', tokenize = 'porter unicode61'
        );
        CREATE TRIGGER chunks_fts_insert AFTER INSERT ON chunks BEGIN
            INSERT INTO chunks_fts (rowid, text) VALUES (new.id, new.text);
        END;
        CREATE TRIGGER chunks_fts_delete AFTER DELETE ON chunks BEGIN
            INSERT INTO chunks_fts (chunks_fts, rowid, text) VALUES ('delete', old.id, old.text);
        END;

        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        """
    )


def m002_facts(db: Connection) -> None:
    db.executescript(
        """
        CREATE TABLE facts (
            id INTEGER PRIMARY KEY,
            user_id TEXT NOT NULL,
            key TEXT NOT NULL,
            value TEXT NOT NULL,
            category TEXT NOT NULL DEFAULT 'profile',
            policy TEXT NOT NULL DEFAULT 'speak',
            pinned INTEGER NOT NULL DEFAULT 0,
            status TEXT NOT NULL DEFAULT 'active',
            confidence REAL NOT NULL DEFAULT 1.0,
            source TEXT NOT NULL DEFAULT 'api',
            source_message_id INTEGER,
            rule TEXT,
            expires_at REAL,
            superseded_by INTEGER REFERENCES facts (id),
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            last_injected_at REAL
        );
        -- at most one active fact per key and user; superseded values stay as history
        CREATE UNIQUE INDEX facts_active_key ON facts (user_id, key) WHERE status = 'active';
        CREATE INDEX facts_by_user ON facts (user_id, key, id);
        """
    )


def m003_messages_by_hash(db: Connection) -> None:
    # Finds the stored conversation a request continues when the client sends no session id.
    db.executescript("CREATE INDEX messages_by_hash ON messages (user_id, content_hash);")


def m004_fts_owner(db: Connection) -> None:
    # Lexical search filtered by user inside the MATCH: with the user as a join filter, FTS5
    # ranked every user's matches before discarding them, so others' data slowed recall.
    db.executescript(
        """
        ALTER TABLE chunks ADD COLUMN owner TEXT NOT NULL DEFAULT '';
        DROP TRIGGER chunks_fts_insert;
        DROP TRIGGER chunks_fts_delete;
        DROP TABLE chunks_fts;
        CREATE VIRTUAL TABLE chunks_fts USING fts5 (
            text, owner, content = 'chunks', content_rowid = 'id', tokenize = 'porter unicode61'
        );
        CREATE TRIGGER chunks_fts_insert AFTER INSERT ON chunks BEGIN
            INSERT INTO chunks_fts (rowid, text, owner) VALUES (new.id, new.text, new.owner);
        END;
        CREATE TRIGGER chunks_fts_delete AFTER DELETE ON chunks BEGIN
            INSERT INTO chunks_fts (chunks_fts, rowid, text, owner)
            VALUES ('delete', old.id, old.text, old.owner);
        END;
        """
    )
    users = [row[0] for row in db.execute("SELECT DISTINCT user_id FROM chunks").fetchall()]
    for user_id in users:
        db.execute("UPDATE chunks SET owner = ? WHERE user_id = ?", (owner_token(user_id), user_id))
    db.execute("INSERT INTO chunks_fts (chunks_fts) VALUES ('rebuild')")


def m005_consolidation_marks(db: Connection) -> None:
    # Per user, the newest message an LLM consolidation has read (memory/store/marks.py).
    # A table of its own, not `meta` rows: it is keyed and deleted by user like every other
    # per-user table, and `meta` stays the small process-wide map `ensure_vectors` reads whole.
    db.executescript(
        """
        CREATE TABLE consolidation_marks (
            user_id TEXT PRIMARY KEY,
            message_id INTEGER NOT NULL,
            marked_at REAL NOT NULL
        );
        """
    )


def m006_turn_numbers(db: Connection) -> None:
    # A user or assistant message's place among those of its session (1, 2, …), so recall can
    # tell which hits are neighbouring turns without another query. A trigger numbers every
    # new one after the session's previous turn (one index step back from its id); rows here
    # already are, in id order.
    db.executescript(
        """
        ALTER TABLE messages ADD COLUMN turn INTEGER;
        UPDATE messages SET turn = numbered.n FROM (
            SELECT id, ROW_NUMBER() OVER (PARTITION BY user_id, session_id ORDER BY id) AS n
            FROM messages WHERE role IN ('user', 'assistant')
        ) AS numbered WHERE messages.id = numbered.id;
        CREATE TRIGGER messages_turn AFTER INSERT ON messages
        WHEN new.role IN ('user', 'assistant') BEGIN
            UPDATE messages SET turn = 1 + coalesce((
                SELECT turn FROM messages
                WHERE user_id = new.user_id AND session_id = new.session_id AND id < new.id
                AND turn IS NOT NULL ORDER BY id DESC LIMIT 1
            ), 0) WHERE id = new.id;
        END;
        """
    )


def m007_fts_terms_per_user(db: Connection) -> None:
    # The lexical index holds each user's own stemmed terms, written by the store
    # (memory/store/fts.py), instead of the chunk text with an owner token ANDed into every MATCH:
    # FTS5 counted all of the owner's chunks for BM25 on each query, and BM25 weighed terms by
    # every user's counts. Contentless: the text is in `chunks`; the index keeps only terms.
    db.executescript(
        """
        DROP TRIGGER chunks_fts_insert;
        DROP TRIGGER chunks_fts_delete;
        DROP TABLE chunks_fts;
        ALTER TABLE chunks DROP COLUMN owner;
        CREATE VIRTUAL TABLE chunks_fts USING fts5 (
            terms, content = '', contentless_delete = 1, tokenize = "unicode61 tokenchars '_'"
        );
        CREATE TRIGGER chunks_fts_delete AFTER DELETE ON chunks BEGIN
            DELETE FROM chunks_fts WHERE rowid = old.id;
        END;
        DELETE FROM meta WHERE key LIKE 'fts_merged_at_chunk%';
        """
    )
    rows = db.execute("SELECT id, user_id, text FROM chunks ORDER BY id")
    while batch := rows.fetchmany(1000):
        for chunk_id, user_id, text in batch:
            db.execute(
                "INSERT INTO chunks_fts (rowid, terms) VALUES (?, ?)",
                (chunk_id, fts_document(user_id, text)),
            )


def m008_fts_context(db: Connection) -> None:
    # A chunk's FTS row gains a second column, the end of the turn before it (the first chunk
    # of a message only), as its vector already has: "Yes, last May!" then also matches a
    # question about camping (memory/ingest/turns.py, Store.lexical_search). 200 characters, as
    # Settings.embedding_context_chars had when this was written.
    db.executescript(
        """
        DROP TRIGGER chunks_fts_delete;
        DROP TABLE chunks_fts;
        CREATE VIRTUAL TABLE chunks_fts USING fts5 (
            terms, context, content = '', contentless_delete = 1,
            tokenize = "unicode61 tokenchars '_'"
        );
        CREATE TRIGGER chunks_fts_delete AFTER DELETE ON chunks BEGIN
            DELETE FROM chunks_fts WHERE rowid = old.id;
        END;
        DELETE FROM meta WHERE key LIKE 'fts_merged_at_chunk%';
        """
    )
    rows = db.execute(
        "SELECT c.id, c.user_id, c.text, CASE WHEN c.position = 0 THEN t.before END "
        "FROM chunks c LEFT JOIN (SELECT id, lag(content) OVER ("
        "PARTITION BY user_id, session_id ORDER BY id) AS before FROM messages "
        "WHERE role IN ('user', 'assistant')) t ON t.id = c.message_id ORDER BY c.id"
    )
    while batch := rows.fetchmany(1000):
        for chunk_id, user_id, text, before in batch:
            db.execute(
                "INSERT INTO chunks_fts (rowid, terms, context) VALUES (?, ?, ?)",
                (
                    chunk_id,
                    fts_document(user_id, text),
                    fts_document(user_id, turn_tail(before or "", 200)),
                ),
            )


def m009_response_links(db: Connection) -> None:
    # Which session a Responses API reply belongs to (memory/store/response_links.py), so a request
    # that continues it with `previous_response_id` is stored and recalled in that session.
    # `tokens`: what the provider's context holds after the reply (its usage.total_tokens).
    db.executescript(
        """
        CREATE TABLE response_links (
            user_id TEXT NOT NULL,
            response_id TEXT NOT NULL,
            session_id TEXT NOT NULL,
            tokens INTEGER NOT NULL,
            created_at REAL NOT NULL,
            PRIMARY KEY (user_id, response_id)
        ) WITHOUT ROWID;
        """
    )


def m010_vocabulary(db: Connection) -> None:
    # Each user's vocabulary: a stem of their chunks' text, the word as first written, and its
    # contextual vector there (int8, memory/recall/vocabulary.py). Recall expands a question's
    # word the user never said with the user's nearest words. A row lives as long as the chunk
    # it was first seen in (forgetting a turn forgets the words it brought); a stem is stored
    # once per user. Derived: `moim reindex` rebuilds it with the chunks.
    db.executescript(
        """
        CREATE TABLE vocabulary (
            id INTEGER PRIMARY KEY,
            user_id TEXT NOT NULL,
            stem TEXT NOT NULL,
            word TEXT NOT NULL,
            chunk_id INTEGER NOT NULL REFERENCES chunks (id) ON DELETE CASCADE,
            vector BLOB NOT NULL,
            UNIQUE (user_id, stem)
        );
        CREATE INDEX vocabulary_by_user ON vocabulary (user_id, id);
        CREATE INDEX vocabulary_by_chunk ON vocabulary (chunk_id);
        """
    )


def m011_index_failed(db: Connection) -> None:
    # Messages no indexing pass could index are set aside with `indexed = 2`
    # (memory/index_failures.py); this small partial index counts them, per user or in all,
    # for stats, flush and /metrics without reading the table.
    db.executescript("CREATE INDEX messages_index_failed ON messages (user_id) WHERE indexed = 2;")


def m012_left_messages(db: Connection) -> None:
    # Messages a conversation left behind (an edited message, a regenerated reply) keep
    # `indexed = 3` (memory/store/left_messages.py); every stored turn asks whether its session
    # has any, from this small partial index rather than the session's rows.
    db.executescript(
        "CREATE INDEX messages_left ON messages (user_id, session_id) WHERE indexed = 3;"
    )


MIGRATIONS: tuple[Migration, ...] = (
    m001_initial,
    m002_facts,
    m003_messages_by_hash,
    m004_fts_owner,
    m005_consolidation_marks,
    m006_turn_numbers,
    m007_fts_terms_per_user,
    m008_fts_context,
    m009_response_links,
    m010_vocabulary,
    m011_index_failed,
    m012_left_messages,
)


def applied(db: Connection) -> list[str]:
    """Names of the migrations already applied (never writes)."""
    exists = db.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '_moim_migrations'"
    ).fetchone()
    if not exists:
        return []
    return [row[0] for row in db.execute("SELECT name FROM _moim_migrations ORDER BY name")]


def migrate(
    db: Connection, progress: MigrationProgress | None = None, shown: str = "the database"
) -> list[str]:
    """Apply every pending migration in order; return the names applied now.

    Each migration and its `_moim_migrations` row commit together or not at all. On an
    upgrade (not a new database, which is quick), `progress` is told before each one. A
    database a newer moim migrated is refused (MigrationFailed naming it as `shown`).
    """
    names = [m.__name__ for m in MIGRATIONS]
    if len(set(names)) != len(names):
        raise MigrationFailed("duplicate migration names")
    db.execute(
        "CREATE TABLE IF NOT EXISTS _moim_migrations (name TEXT PRIMARY KEY, applied_at REAL)"
    )
    done = set(applied(db))
    refuse_newer(done, names, shown)
    pending = [m for m in MIGRATIONS if m.__name__ not in done]
    ran: list[str] = []
    for migration in pending:
        name = migration.__name__
        if done:  # an upgrade (a new database is quick and quiet); m007: 6.6 s per 100k chunks
            logger.info("applying migration %s", name)
            if progress is not None:
                progress(len(ran), len(pending), name)
        try:
            db.execute("BEGIN IMMEDIATE")
            # executescript would COMMIT first; run statements one by one inside our txn.
            _run_in_transaction(db, migration)
            db.execute(
                "INSERT INTO _moim_migrations (name, applied_at) VALUES (?, ?)", (name, time.time())
            )
            db.execute("COMMIT")
        except Exception as exc:
            db.execute("ROLLBACK")
            raise MigrationFailed(f"{name}: {exc}") from exc
        ran.append(name)
    if done and ran and progress is not None:
        progress(len(ran), len(pending), "")
    return ran


class _ScriptInTransaction:
    """Adapter giving a migration an `executescript` that does not commit."""

    def __init__(self, db: Connection) -> None:
        self._db = db

    def executescript(self, script: str) -> None:
        for statement in _split_sql(script):
            self._db.execute(statement)

    def execute(self, sql: str, params: tuple[Any, ...] = ()) -> Any:
        return self._db.execute(sql, params)


def _run_in_transaction(db: Connection, migration: Migration) -> None:
    migration(_ScriptInTransaction(db))


def _split_sql(script: str) -> list[str]:
    """Split a script into whole statements (trigger bodies included), via SQLite's parser."""
    statements: list[str] = []
    current = ""
    for line in script.splitlines(keepends=True):
        if not current and (not line.strip() or line.strip().startswith("--")):
            continue
        current += line
        if sqlean.complete_statement(current):
            statements.append(current.strip())
            current = ""
    if current.strip():
        statements.append(current.strip())
    return statements
