"""The Postgres schema as numbered migrations, applied once however many replicas start.

Like SQLite's (`memory/store/migrations.py`), a shipped migration is never edited; a fix is a
new, higher-numbered one. Each runs in one transaction with its row in `_moim_migrations`,
under a transaction-scoped advisory lock, so replicas starting together apply each migration
once: the others wait for the lock, then find it recorded. The vector table's width depends on
the embedding model and is created by `PgStore.ensure_vectors`, not here.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from memory.errors import MigrationFailed
from memory.store.newer_schema import refuse_newer

logger = logging.getLogger(__name__)

# Any constant shared by every replica: the key of the advisory lock migrations run under.
MIGRATION_LOCK = 0x6D6F696D  # "moim"

M001_INITIAL = """
CREATE EXTENSION IF NOT EXISTS vector;

CREATE TABLE messages (
    id BIGSERIAL PRIMARY KEY,
    user_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    message_key TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    role TEXT NOT NULL,
    name TEXT,
    content TEXT NOT NULL,
    payload TEXT NOT NULL,
    model TEXT,
    tokens INTEGER NOT NULL DEFAULT 0,
    partial INTEGER NOT NULL DEFAULT 0,
    created_at DOUBLE PRECISION NOT NULL,
    indexed INTEGER NOT NULL DEFAULT 0,
    turn INTEGER,
    UNIQUE (user_id, session_id, message_key)
);
CREATE INDEX messages_by_user ON messages (user_id, session_id, id);
CREATE INDEX messages_unindexed ON messages (id) WHERE indexed = 0;
CREATE INDEX messages_by_hash ON messages (user_id, content_hash);

CREATE TABLE chunks (
    id BIGSERIAL PRIMARY KEY,
    message_id BIGINT NOT NULL REFERENCES messages (id) ON DELETE CASCADE,
    user_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    role TEXT NOT NULL,
    name TEXT,
    position INTEGER NOT NULL,
    text TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    -- the chunk's stemmed terms (weight A) and the previous turn's tail (weight B)
    terms TSVECTOR NOT NULL
);
CREATE INDEX chunks_by_user ON chunks (user_id, id);
CREATE INDEX chunks_by_message ON chunks (message_id);
CREATE INDEX chunks_terms ON chunks USING gin (terms);

CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);

CREATE TABLE facts (
    id BIGSERIAL PRIMARY KEY,
    user_id TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    category TEXT NOT NULL DEFAULT 'profile',
    policy TEXT NOT NULL DEFAULT 'speak',
    pinned INTEGER NOT NULL DEFAULT 0,
    status TEXT NOT NULL DEFAULT 'active',
    confidence DOUBLE PRECISION NOT NULL DEFAULT 1.0,
    source TEXT NOT NULL DEFAULT 'api',
    source_message_id BIGINT,
    rule TEXT,
    expires_at DOUBLE PRECISION,
    superseded_by BIGINT REFERENCES facts (id),
    created_at DOUBLE PRECISION NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL,
    last_injected_at DOUBLE PRECISION
);
CREATE UNIQUE INDEX facts_active_key ON facts (user_id, key) WHERE status = 'active';
CREATE INDEX facts_by_user ON facts (user_id, key, id);

CREATE TABLE consolidation_marks (
    user_id TEXT PRIMARY KEY,
    message_id BIGINT NOT NULL,
    marked_at DOUBLE PRECISION NOT NULL
);

-- Finished turns not yet stored as messages: the replicas' shared journal. `owner` is the
-- advisory-lock key the receiving replica holds while it lives (memory/store/pg_journal.py).
CREATE TABLE pending_turns (
    id BIGSERIAL PRIMARY KEY,
    owner BIGINT NOT NULL,
    record TEXT NOT NULL,
    received_at DOUBLE PRECISION NOT NULL
);
CREATE INDEX pending_turns_by_owner ON pending_turns (owner, id);

-- A user or assistant message's place among those of its session (as SQLite's m006).
CREATE FUNCTION moim_number_turn() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.turn := 1 + coalesce((
        SELECT turn FROM messages
        WHERE user_id = NEW.user_id AND session_id = NEW.session_id AND id < NEW.id
        AND turn IS NOT NULL ORDER BY id DESC LIMIT 1
    ), 0);
    RETURN NEW;
END $$;
CREATE TRIGGER messages_turn BEFORE INSERT ON messages
FOR EACH ROW WHEN (NEW.role IN ('user', 'assistant')) EXECUTE FUNCTION moim_number_turn();
"""

Migration = tuple[str, Callable[[Any], None]]


def _script(sql: str) -> Callable[[Any], None]:
    def run(conn: Any) -> None:
        conn.execute(sql)

    return run


# Which session a Responses API reply belongs to (as SQLite's m009).
M002_RESPONSE_LINKS = """
CREATE TABLE response_links (
    user_id TEXT NOT NULL,
    response_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    tokens INTEGER NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (user_id, response_id)
);
"""

# BM25 over the user's own chunks (`PgStore.lexical_search`): a postings table holding, per
# chunk and term, how often the term occurs in the chunk's text (weight A of `terms`) and in
# its context (weight B), and the chunk's length in terms. A trigger fills it from `terms` as
# chunks are inserted; rows go with their chunk. The GIN index is no longer read.
M003_BM25_POSTINGS = """
CREATE FUNCTION moim_term_count(tsvector) RETURNS integer LANGUAGE sql IMMUTABLE STRICT
PARALLEL SAFE AS $$
    SELECT coalesce(sum(array_length(positions, 1)), 0)::integer FROM unnest($1)
$$;

CREATE FUNCTION moim_postings(tsvector) RETURNS TABLE (term text, own integer, context integer)
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT lexeme,
        coalesce(array_length(array_positions(weights, 'A'), 1), 0),
        coalesce(array_length(array_positions(weights, 'B'), 1), 0)
    FROM unnest($1)
$$;

ALTER TABLE chunks ADD COLUMN length INTEGER GENERATED ALWAYS AS (moim_term_count(terms)) STORED;
CREATE INDEX chunks_lengths ON chunks (user_id) INCLUDE (length);
DROP INDEX chunks_terms;

CREATE TABLE chunk_terms (
    user_id TEXT NOT NULL,
    term TEXT NOT NULL,
    chunk_id BIGINT NOT NULL REFERENCES chunks (id) ON DELETE CASCADE,
    own INTEGER NOT NULL,
    context INTEGER NOT NULL,
    chunk_length INTEGER NOT NULL,
    -- covering: a search reads the index alone (heap reads were 4/5 of it at 100k chunks)
    PRIMARY KEY (user_id, term, chunk_id) INCLUDE (own, context, chunk_length)
);
CREATE INDEX chunk_terms_by_chunk ON chunk_terms (chunk_id);

CREATE FUNCTION moim_chunk_terms() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO chunk_terms (user_id, term, chunk_id, own, context, chunk_length)
    SELECT NEW.user_id, p.term, NEW.id, p.own, p.context, NEW.length
    FROM moim_postings(NEW.terms) AS p;
    RETURN NULL;
END $$;
CREATE TRIGGER chunks_postings AFTER INSERT ON chunks
FOR EACH ROW EXECUTE FUNCTION moim_chunk_terms();

INSERT INTO chunk_terms (user_id, term, chunk_id, own, context, chunk_length)
SELECT c.user_id, p.term, c.id, p.own, p.context, c.length
FROM chunks AS c, moim_postings(c.terms) AS p;
"""

# Each user's vocabulary and its word vectors (as SQLite's m010).
M004_VOCABULARY = """
CREATE TABLE vocabulary (
    id BIGSERIAL PRIMARY KEY,
    user_id TEXT NOT NULL,
    stem TEXT NOT NULL,
    word TEXT NOT NULL,
    chunk_id BIGINT NOT NULL REFERENCES chunks (id) ON DELETE CASCADE,
    vector BYTEA NOT NULL,
    UNIQUE (user_id, stem)
);
CREATE INDEX vocabulary_by_user ON vocabulary (user_id, id);
CREATE INDEX vocabulary_by_chunk ON vocabulary (chunk_id);
"""

# When each user was last forgotten, by their owner token (a hash, not the id), for a day: a
# replica stores no turn of a request that arrived before its user was forgotten through
# another one (`PgStore.forgotten_since`).
M005_FORGETS = """
CREATE TABLE forgets (owner TEXT PRIMARY KEY, at DOUBLE PRECISION NOT NULL);
CREATE INDEX forgets_by_time ON forgets (at);
"""

# Messages set aside by indexing (`indexed = 2`, as SQLite's m011), counted without a scan.
M006_INDEX_FAILED = """
CREATE INDEX messages_index_failed ON messages (user_id) WHERE indexed = 2;
"""

# Messages a conversation left behind (`indexed = 3`, as SQLite's m012), found per session
# without a scan: every stored turn asks whether its session has any.
M007_LEFT_MESSAGES = """
CREATE INDEX messages_left ON messages (user_id, session_id) WHERE indexed = 3;
"""

MIGRATIONS: tuple[Migration, ...] = (
    ("m001_initial", _script(M001_INITIAL)),
    ("m002_response_links", _script(M002_RESPONSE_LINKS)),
    ("m003_bm25_postings", _script(M003_BM25_POSTINGS)),
    ("m004_vocabulary", _script(M004_VOCABULARY)),
    ("m005_forgets", _script(M005_FORGETS)),
    ("m006_index_failed", _script(M006_INDEX_FAILED)),
    ("m007_left_messages", _script(M007_LEFT_MESSAGES)),
)


def applied(conn: Any) -> list[str]:
    """Names of the migrations already applied (never writes)."""
    exists = conn.execute("SELECT to_regclass('_moim_migrations') IS NOT NULL").fetchone()[0]
    if not exists:
        return []
    return [row[0] for row in conn.execute("SELECT name FROM _moim_migrations ORDER BY name")]


def migrate(conn: Any, shown: str = "the database") -> list[str]:
    """Apply every pending migration in order on an autocommit connection; return those run.
    A database a newer moim migrated is refused (MigrationFailed naming it as `shown`)."""
    refuse_newer(applied(conn), [name for name, _ in MIGRATIONS], shown)
    ran: list[str] = []
    for name, migration in MIGRATIONS:
        try:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", [MIGRATION_LOCK])
                conn.execute(
                    "CREATE TABLE IF NOT EXISTS _moim_migrations "
                    "(name TEXT PRIMARY KEY, applied_at DOUBLE PRECISION)"
                )
                if name in applied(conn):
                    continue
                logger.info("applying migration %s", name)
                migration(conn)
                conn.execute(
                    "INSERT INTO _moim_migrations (name, applied_at) VALUES (%s, %s)",
                    [name, time.time()],
                )
        except Exception as exc:
            raise MigrationFailed(f"{name}: {exc}") from exc
        ran.append(name)
    return ran
