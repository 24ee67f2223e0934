"""The files that hold users' conversations are the owner's alone: the SQLite database, its
WAL and shared-memory files, and the lexical index's folder (the write-ahead journal is
tests/memory/store/test_journal.py's). SQLite would create the database with the umask's
mode, 0644 as a rule: readable by every account on the machine."""

import os
import stat
from pathlib import Path

import pytest

from tests.e2e.test_inspector import chat


def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def test_a_new_store_and_what_sqlite_makes_beside_it_are_the_owners_alone(proxy):
    if proxy.config.memory.db_url:
        pytest.skip("PostgreSQL keeps its own files")
    chat(proxy, "alice", "My locker code is 4417")
    proxy.flush()
    db = Path(proxy.config.memory.db_path)
    assert mode(db) == 0o600
    for beside in (Path(f"{db}-wal"), Path(f"{db}-shm")):
        if beside.exists():
            assert mode(beside) == 0o600, beside.name
    lexical = Path(f"{db}-lexical")
    assert lexical.is_dir() and mode(lexical) == 0o700


def test_an_existing_database_keeps_the_mode_its_owner_gave_it(make_proxy, tmp_path):
    db = tmp_path / "shared.db"
    db.touch()
    os.chmod(db, 0o640)
    proxy = make_proxy(settings={"db_path": db})
    if proxy.config.memory.db_url:
        pytest.skip("PostgreSQL keeps its own files")
    chat(proxy, "alice", "My locker code is 4417")
    proxy.flush()
    assert mode(db) == 0o640
