"""Opening a database an older moim left: the migrations applied are said in one line.

The progress bar is drawn only on a terminal, and `moim serve` configures logging after the
store is opened, so without a terminal (a script, systemd, `docker logs`) an upgrade applied
three migrations and said nothing, and `moim migrate` printed only "schema up to date".
"""

from memory.store import migrations
from memory.store.database import connect, create_private
from tests.proxy.test_cli_database import moim
from tests.proxy.test_cli_refusals import said_until_started, serve

UPGRADE = (
    "moim: migrated the schema: m008_fts_context, m009_response_links, m010_vocabulary, "
    "m011_index_failed, m012_left_messages\n"
)


def older_store(path, monkeypatch):
    """A database as the moim of m007 left it: its first seven migrations, by their own code."""
    with monkeypatch.context() as patched:
        patched.setattr(migrations, "MIGRATIONS", migrations.MIGRATIONS[:7])
        create_private(str(path))  # connect opens a file, never makes one
        conn = connect(str(path))
        migrations.migrate(conn)
        conn.close()
    return path


def test_moim_migrate_says_which_migrations_it_applied(tmp_path, monkeypatch):
    db = older_store(tmp_path / "moim.db", monkeypatch)

    upgraded = moim("migrate", cwd=tmp_path, db=db)
    again = moim("migrate", cwd=tmp_path, db=db)

    assert upgraded.exit_code == 0, upgraded.output
    assert upgraded.stderr.startswith(f"moim: using {db}\n{UPGRADE}")
    assert "migrated the schema" not in again.stderr  # nothing left to apply


def test_a_new_database_is_created_not_migrated(tmp_path):
    result = moim("migrate", cwd=tmp_path, db=tmp_path / "moim.db")

    assert result.exit_code == 0, result.output
    assert "migrated the schema" not in result.stderr


def test_serve_says_which_migrations_it_applied(tmp_path, monkeypatch):
    db = older_store(tmp_path / "moim.db", monkeypatch)

    with serve(tmp_path, db) as server:
        try:
            said = said_until_started(server)
        finally:
            server.kill()

    assert f"moim: using {db}\n{UPGRADE}" in said
