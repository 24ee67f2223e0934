"""memory/store/migrations.py: numbered migrations on a real SQLite file, and the exact schema.

A change to the schema must change this file: that is the point of pinning the columns.
"""

import pytest
import sqlean

from memory.errors import MigrationFailed
from memory.store.migrations import applied, migrate


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


ALL = [
    "m001_initial",
    "m002_facts",
    "m003_messages_by_hash",
    "m004_fts_owner",
    "m005_consolidation_marks",
    "m006_turn_numbers",
    "m007_fts_terms_per_user",
    "m008_fts_context",
    "m009_response_links",
    "m010_vocabulary",
    "m011_index_failed",
    "m012_left_messages",
]


def test_blank_database_applies_every_migration_in_order(db):
    assert migrate(db) == ALL
    recorded = db.execute("SELECT name FROM _moim_migrations ORDER BY rowid").fetchall()
    assert [row[0] for row in recorded] == ALL
    assert applied(db) == ALL


def test_migrating_again_applies_nothing(db):
    migrate(db)
    assert migrate(db) == []
    assert db.execute("SELECT count(*) FROM _moim_migrations").fetchone()[0] == len(ALL)


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
        ("turn", "INTEGER", 0, None, 0),
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
    assert names == [
        "_moim_migrations",
        "chunks",
        "chunks_fts",
        "consolidation_marks",
        "facts",
        "messages",
        "meta",
        "response_links",
        "vocabulary",
    ]


def test_consolidation_marks_columns(db):
    migrate(db)
    assert columns(db, "consolidation_marks") == [
        ("user_id", "TEXT", 0, None, 1),
        ("message_id", "INTEGER", 1, None, 0),
        ("marked_at", "REAL", 1, None, 0),
    ]


def test_response_links_columns(db):
    migrate(db)
    assert columns(db, "response_links") == [
        ("user_id", "TEXT", 1, None, 1),
        ("response_id", "TEXT", 1, None, 2),
        ("session_id", "TEXT", 1, None, 0),
        ("tokens", "INTEGER", 1, None, 0),
        ("created_at", "REAL", 1, None, 0),
    ]


def test_vocabulary_columns(db):
    migrate(db)
    assert columns(db, "vocabulary") == [
        ("id", "INTEGER", 0, None, 1),
        ("user_id", "TEXT", 1, None, 0),
        ("stem", "TEXT", 1, None, 0),
        ("word", "TEXT", 1, None, 0),
        ("chunk_id", "INTEGER", 1, None, 0),
        ("vector", "BLOB", 1, None, 0),
    ]


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


@pytest.mark.parametrize("before", [3, 6, 7])  # as moim left a database before m004, m007, m008
def test_existing_chunks_move_into_the_per_user_index_with_their_context(tmp_path, before):
    import sqlean

    from memory.store.fts import fts_match
    from memory.store.migrations import MIGRATIONS, _run_in_transaction

    db = sqlean.connect(str(tmp_path / "old.db"), isolation_level=None)
    db.execute("CREATE TABLE _moim_migrations (name TEXT PRIMARY KEY, applied_at REAL)")
    for migration in MIGRATIONS[:before]:
        db.execute("BEGIN")
        _run_in_transaction(db, migration)
        db.execute("INSERT INTO _moim_migrations VALUES (?, 0)", (migration.__name__,))
        db.execute("COMMIT")
    for mid, role, text in [(1, "assistant", "What did you plant?"), (2, "user", "Tulips!")]:
        db.execute(
            "INSERT INTO messages (id, user_id, session_id, message_key, content_hash, role, "
            "content, payload, created_at) VALUES (?, 'ann', 's', ?, ?, ?, ?, '{}', 0)",
            (mid, f"k{mid}", f"h{mid}", role, text),
        )
        db.execute(
            "INSERT INTO chunks (id, message_id, user_id, session_id, role, position, text, "
            "created_at) VALUES (?, ?, 'ann', 's', ?, 0, ?, 0)",
            (mid, mid, role, text),
        )

    assert migrate(db) == [m.__name__ for m in MIGRATIONS[before:]]

    def found(user, *terms):
        match = "SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY rowid"
        return [row[0] for row in db.execute(match, (fts_match(user, terms),))]

    assert found("ann", "tulip") == [2]
    assert found("ann", "planting") == [1, 2]  # the reply, by the question before it
    assert found("bob", "tulips") == []
    db.execute("DELETE FROM chunks WHERE id = 2")
    assert found("ann", "tulips") == []


def test_progress_hears_each_migration_of_an_upgrade_but_not_of_a_new_database(tmp_path, db):
    from memory.store.migrations import MIGRATIONS, _run_in_transaction

    heard_new = []
    migrate(db, lambda *step: heard_new.append(step))
    old = sqlean.connect(str(tmp_path / "old.db"), isolation_level=None)
    old.execute("CREATE TABLE _moim_migrations (name TEXT PRIMARY KEY, applied_at REAL)")
    for migration in MIGRATIONS[:6]:
        old.execute("BEGIN")
        _run_in_transaction(old, migration)
        old.execute("INSERT INTO _moim_migrations VALUES (?, 0)", (migration.__name__,))
        old.execute("COMMIT")
    heard = []

    migrate(old, lambda *step: heard.append(step))

    rest = [m.__name__ for m in MIGRATIONS[6:]]
    assert heard_new == []
    assert heard == [
        *((i, len(rest), name) for i, name in enumerate(rest)),
        (len(rest), len(rest), ""),
    ]


def _message(db, mid, session, role, user="u"):
    db.execute(
        "INSERT INTO messages (id, user_id, session_id, message_key, content_hash, role, "
        "content, payload, created_at) VALUES (?, ?, ?, ?, ?, ?, 'x', '{}', 0)",
        (mid, user, session, f"k{mid}", f"h{mid}", role),
    )


def test_m006_numbers_existing_turns_per_session_in_id_order(db):
    from memory.store.migrations import MIGRATIONS, _run_in_transaction

    db.execute("CREATE TABLE _moim_migrations (name TEXT PRIMARY KEY, applied_at REAL)")
    for migration in MIGRATIONS[:5]:  # a database as moim left it before m006
        db.execute("BEGIN")
        _run_in_transaction(db, migration)
        db.execute("INSERT INTO _moim_migrations VALUES (?, 0)", (migration.__name__,))
        db.execute("COMMIT")
    for mid, session, role in [
        (1, "a", "system"),
        (2, "a", "user"),
        (3, "b", "user"),
        (4, "a", "tool"),
        (5, "a", "assistant"),
        (6, "b", "assistant"),
    ]:
        _message(db, mid, session, role)
    _message(db, 7, "a", "user", user="v")  # another user's session "a"
    assert migrate(db) == ALL[5:]
    turns = dict(db.execute("SELECT id, turn FROM messages").fetchall())
    assert turns == {1: None, 2: 1, 3: 1, 4: None, 5: 2, 6: 2, 7: 1}


def test_new_turns_are_numbered_after_the_sessions_last_turn(db):
    migrate(db)
    for mid, session, role in [
        (1, "a", "system"),
        (2, "a", "user"),
        (3, "b", "user"),
        (4, "a", "tool"),
        (5, "a", "assistant"),
        (6, "a", "user"),
    ]:
        _message(db, mid, session, role)
    _message(db, 7, "a", "user", user="v")
    turns = dict(db.execute("SELECT id, turn FROM messages").fetchall())
    assert turns == {1: None, 2: 1, 3: 1, 4: None, 5: 2, 6: 3, 7: 1}
