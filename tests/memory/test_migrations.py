"""memory/migrations.py: numbered migrations on a real SQLite file, and the exact schema.

A change to the schema must change this file: that is the point of pinning the columns.
"""

import pytest
import sqlean

from memory.errors import MigrationFailed
from memory.migrations import applied, migrate


@pytest.fixture
def db(tmp_path):
    connection = sqlean.connect(str(tmp_path / "blank.db"), isolation_level=None)
    yield connection
    connection.close()


def columns(db, table):
    """(name, type, notnull, default, pk) of each column, in order."""
    return [tuple(row[1:]) for row in db.execute(f"PRAGMA table_info({table})")]


def tables(db):
    rows = db.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
    return [row[0] for row in rows]


def test_blank_database_applies_every_migration_in_order(db):
    assert migrate(db) == ["m001_initial", "m002_facts", "m003_messages_by_hash"]
    recorded = db.execute("SELECT name FROM _moim_migrations ORDER BY rowid").fetchall()
    assert [row[0] for row in recorded] == ["m001_initial", "m002_facts", "m003_messages_by_hash"]
    assert applied(db) == ["m001_initial", "m002_facts", "m003_messages_by_hash"]


def test_migrating_again_applies_nothing(db):
    migrate(db)
    assert migrate(db) == []
    assert db.execute("SELECT count(*) FROM _moim_migrations").fetchone()[0] == 3


def test_applied_on_a_blank_database_is_empty_and_writes_nothing(db):
    assert applied(db) == []
    assert tables(db) == []


def test_messages_columns(db):
    migrate(db)
    assert columns(db, "messages") == [
        ("id", "INTEGER", 0, None, 1),
        ("user_id", "TEXT", 1, None, 0),
        ("session_id", "TEXT", 1, None, 0),
        ("message_key", "TEXT", 1, None, 0),
        ("content_hash", "TEXT", 1, None, 0),
        ("role", "TEXT", 1, None, 0),
        ("name", "TEXT", 0, None, 0),
        ("content", "TEXT", 1, None, 0),
        ("payload", "TEXT", 1, None, 0),
        ("model", "TEXT", 0, None, 0),
        ("tokens", "INTEGER", 1, "0", 0),
        ("partial", "INTEGER", 1, "0", 0),
        ("created_at", "REAL", 1, None, 0),
        ("indexed", "INTEGER", 1, "0", 0),
    ]


def test_chunks_columns(db):
    migrate(db)
    assert columns(db, "chunks") == [
        ("id", "INTEGER", 0, None, 1),
        ("message_id", "INTEGER", 1, None, 0),
        ("user_id", "TEXT", 1, None, 0),
        ("session_id", "TEXT", 1, None, 0),
        ("role", "TEXT", 1, None, 0),
        ("name", "TEXT", 0, None, 0),
        ("position", "INTEGER", 1, None, 0),
        ("text", "TEXT", 1, None, 0),
        ("created_at", "REAL", 1, None, 0),
    ]


def test_facts_columns(db):
    migrate(db)
    assert columns(db, "facts") == [
        ("id", "INTEGER", 0, None, 1),
        ("user_id", "TEXT", 1, None, 0),
        ("key", "TEXT", 1, None, 0),
        ("value", "TEXT", 1, None, 0),
        ("category", "TEXT", 1, "'profile'", 0),
        ("policy", "TEXT", 1, "'speak'", 0),
        ("pinned", "INTEGER", 1, "0", 0),
        ("status", "TEXT", 1, "'active'", 0),
        ("confidence", "REAL", 1, "1.0", 0),
        ("source", "TEXT", 1, "'api'", 0),
        ("source_message_id", "INTEGER", 0, None, 0),
        ("rule", "TEXT", 0, None, 0),
        ("expires_at", "REAL", 0, None, 0),
        ("superseded_by", "INTEGER", 0, None, 0),
        ("created_at", "REAL", 1, None, 0),
        ("updated_at", "REAL", 1, None, 0),
        ("last_injected_at", "REAL", 0, None, 0),
    ]


def test_migrated_database_has_exactly_these_tables(db):
    migrate(db)
    names = [n for n in tables(db) if not n.startswith("chunks_fts_")]  # FTS5's shadow tables
    assert names == ["_moim_migrations", "chunks", "chunks_fts", "facts", "messages", "meta"]


def test_failing_migration_rolls_back_with_its_record(db):
    # `chunks` already exists, so m001 fails after it has created `messages`.
    db.execute("CREATE TABLE chunks (x)")
    with pytest.raises(MigrationFailed, match="m001_initial"):
        migrate(db)
    assert applied(db) == []
    assert tables(db) == ["_moim_migrations", "chunks"]
    assert columns(db, "chunks") == [("x", "", 0, None, 0)]


def test_later_failing_migration_keeps_the_earlier_ones(db):
    db.execute("CREATE TABLE facts (x)")
    with pytest.raises(MigrationFailed, match="m002_facts"):
        migrate(db)
    assert applied(db) == ["m001_initial"]
    assert "messages" in tables(db)
    assert columns(db, "facts") == [("x", "", 0, None, 0)]
