"""`moim serve` and the commands that open the store refuse what they must not run on, in one
line and exit status 1: a database a newer moim migrated (after a rollback), and a journal
another `moim serve` is using (two in one directory). Real subprocesses, as an operator runs
them.
"""

import os
import sqlite3
import subprocess
import sys

import pytest

from tests.proxy.test_cli_database import REPO, STORE_COMMANDS, free_port, moim

NEWER = (
    "was upgraded by a newer moim: its schema is at m999_from_the_future, this moim's at "
    "m012_left_messages; upgrade moim again, or restore the backup taken before `moim migrate`"
)


def serve(cwd, db=None, journal=None):
    """`moim serve` started in `cwd` (memory off: no model to load; the store and the journal
    are opened all the same), on `db` when given, else `./moim.db`; `journal`: MOIM_JOURNAL."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MOIM_")}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env["MOIM_MEMORY"] = "off"
    if db is not None:
        env["MOIM_DB"] = str(db)
    if journal is not None:
        env["MOIM_JOURNAL"] = str(journal)
    return subprocess.Popen(
        [sys.executable, "-m", "proxy.cli", "serve", "--port", str(free_port())],
        cwd=cwd,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )


def said_until_started(server):
    """What a `serve` said on stderr until uvicorn ran the app's startup, or it exited."""
    lines = []
    for line in server.stderr:
        lines.append(line)
        if "Application startup complete" in line:
            break
    return "".join(lines)


def first_line_of_serve(cwd, db):
    """What `moim serve` says first on `db`, and its exit status (None: it was serving)."""
    with serve(cwd, db) as server:
        try:
            said = said_until_started(server)
        finally:
            server.kill()
        status = None if "Application startup complete" in said else server.wait(timeout=60)
    return said.splitlines(keepends=True)[0], status


@pytest.mark.parametrize("args", [["migrate"], *STORE_COMMANDS], ids=" ".join)
def test_a_database_a_newer_moim_migrated_is_refused_naming_both_versions(tmp_path, args):
    """After a rollback, the older moim opened a schema it does not know without a word."""
    db = tmp_path / "moim.db"
    assert moim("migrate", cwd=tmp_path, db=db).exit_code == 0
    with sqlite3.connect(db) as conn:
        conn.execute("INSERT INTO _moim_migrations VALUES ('m999_from_the_future', 0)")
    conn.close()

    result = moim(*args, cwd=tmp_path, db=db, stdin="")

    assert result.exit_code == 1, result.output
    assert result.stderr == f"Error: {db} {NEWER}\n"


def test_serve_refuses_a_database_a_newer_moim_migrated(tmp_path):
    db = tmp_path / "moim.db"
    assert moim("migrate", cwd=tmp_path, db=db).exit_code == 0
    with sqlite3.connect(db) as conn:
        conn.execute("INSERT INTO _moim_migrations VALUES ('m999_from_the_future', 0)")
    conn.close()

    assert first_line_of_serve(tmp_path, db) == (f"Error: {db} {NEWER}\n", 1)


def test_a_second_serve_in_the_same_directory_refuses_to_share_the_journal(tmp_path):
    """Both appended to and replayed one `moim.db.journal`: a replay by one could store the
    other's turns twice, or drop them as it emptied the file. The lock is the OS's: it goes
    with the process, however that ends."""
    journal = tmp_path.resolve() / "moim.db.journal"
    with serve(tmp_path) as first:
        try:
            assert "Application startup complete" in said_until_started(first)
            with serve(tmp_path) as second:
                try:
                    refused = said_until_started(second)
                finally:
                    second.kill()
                    second.wait(timeout=60)
            assert refused == (
                f"Error: another moim is using {journal}: process {first.pid} holds its lock; "
                "stop it, or run each moim in a directory of its own\n"
            )
            assert second.returncode == 1
        finally:
            first.kill()  # SIGKILL: nothing of the first is left to let go of the lock
            first.wait(timeout=60)

    with serve(tmp_path) as after:
        try:
            assert "Application startup complete" in said_until_started(after)
        finally:
            after.terminate()
            after.wait(timeout=60)


def test_with_postgres_the_journal_is_where_moim_journal_names_it(tmp_path, pg_database):
    """It was `./moim.db.journal` whatever was set: in the Docker image, `/app`'s, lost with
    the container, the turns waiting there for an unreachable database with it. A second
    replica given the same journal refuses it, from any directory."""
    app, data, other = tmp_path / "app", tmp_path / "data", tmp_path / "other"
    for directory in (app, data, other):
        directory.mkdir()
    url, journal = pg_database(), data / "moim.db.journal"
    with serve(app, url, journal) as first:
        try:
            assert "Application startup complete" in said_until_started(first)
            assert journal.exists() and not (app / "moim.db.journal").exists()
            with serve(other, url, journal) as second:
                try:
                    refused = said_until_started(second)
                finally:
                    second.kill()
                    second.wait(timeout=60)
            assert refused == (  # another directory would not help: the path is named
                f"Error: another moim is using {journal}: process {first.pid} holds its lock; "
                "stop it, or give each moim a journal of its own\n"
            )
        finally:
            first.terminate()
            first.wait(timeout=60)
