"""memory/database.py: one writer at a time, and no write waits past `busy_timeout`.

`busy_timeout` is how long a write may wait for the store: for SQLite's lock (held by
another process) and for this process's own other writer alike, from one deadline. The
writer's retries held the process lock while SQLite made them wait, so a memory API write
queued behind one waited twice: 20 s answered 503 where the setting said 10.
"""

import threading
from contextlib import closing

import pytest
import sqlean

from memory import StoreUnavailable
from memory.store.database import Database

BUSY_TIMEOUT = 0.2


@pytest.fixture
def database(tmp_path):
    db = Database(tmp_path / "moim.db", busy_timeout=BUSY_TIMEOUT)
    with db.write() as conn:
        conn.execute("CREATE TABLE notes (text TEXT)")
    return db


def test_a_write_waits_for_the_process_s_other_writer_no_longer_than_busy_timeout(database):
    holding, release = threading.Event(), threading.Event()

    def hold():
        with database.write():
            holding.set()
            release.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        holding.wait(30)
        with pytest.raises(StoreUnavailable, match="locked"), database.write() as conn:
            conn.execute("INSERT INTO notes VALUES ('too late')")  # pragma: no cover
        assert not release.is_set()  # refused while the other writer still held the lock
    finally:
        release.set()
        holder.join()
    with database.write() as conn:  # and the lock is free again once it is released
        conn.execute("INSERT INTO notes VALUES ('later')")
    assert database.read("SELECT text FROM notes") == [("later",)]


def test_a_write_another_process_blocks_is_refused_then_succeeds(database):
    with closing(sqlean.connect(database.path, isolation_level=None, timeout=0)) as other:
        other.execute("BEGIN EXCLUSIVE")
        with pytest.raises(StoreUnavailable, match="locked"), database.write() as conn:
            conn.execute("INSERT INTO notes VALUES ('too late')")  # pragma: no cover
        other.execute("ROLLBACK")
    with database.write() as conn:
        conn.execute("INSERT INTO notes VALUES ('later')")
    assert database.read("SELECT text FROM notes") == [("later",)]
    # the connection waits the whole busy_timeout again for the next lock
    assert database.read("PRAGMA busy_timeout") == [(round(BUSY_TIMEOUT * 1000),)]


def test_every_threads_connection_has_a_small_page_cache(database):
    # ~20 threads each hold a connection; at SQLite's default 2,000 KiB their caches, filled
    # by random reads of a big user's rows, held up to 40 MB of the server's RSS.
    sizes = [database.connection().execute("PRAGMA cache_size").fetchone()[0]]
    other = threading.Thread(
        target=lambda: sizes.append(
            database.connection().execute("PRAGMA cache_size").fetchone()[0]
        )
    )
    other.start()
    other.join()
    assert sizes == [-256, -256]


def test_a_thread_connecting_after_the_file_was_removed_creates_no_file(database, tmp_path):
    """`rm moim.db` under a running moim: a thread that connects afterwards (a worker thread
    new to the pool) made an empty file, 0644, at the path, into which the next start then
    stored every user's turns; it now fails, and the path stays empty."""
    database.read("SELECT 1")  # this thread's connection, to the file as opened
    (tmp_path / "moim.db").unlink()
    failed: list[Exception] = []

    def connect():
        try:
            database.read("SELECT count(*) FROM notes")
        except StoreUnavailable as exc:
            failed.append(exc)

    later = threading.Thread(target=connect)
    later.start()
    later.join(30)
    assert failed and "moim.db" in str(failed[0])
    assert not (tmp_path / "moim.db").exists()
    assert database.read("SELECT count(*) FROM notes") == [(0,)]  # the open file still answers


@pytest.mark.parametrize("name", ["moim.db", "we ird?#%.db"])
def test_a_path_is_opened_as_written_even_with_two_leading_slashes(tmp_path, name):
    """`sqlite:////srv/moim.db` gives the path `//srv/moim.db`, which POSIX reads as
    `/srv/moim.db`; opened as a URI, `file://srv/…` named a host, refused."""
    path = "/" + str(tmp_path / name)
    with Database(path).write() as conn:
        conn.execute("CREATE TABLE notes (text TEXT)")
    assert (tmp_path / name).exists()
    assert Database(str(tmp_path / name)).read("SELECT count(*) FROM notes") == [(0,)]


def test_a_path_through_a_linked_directory_and_up_opens_the_file_it_names(tmp_path, monkeypatch):
    """`data/../moim.db` with `data` a link to another disk's directory: the system resolves
    `..` from where the link leads, and the file is made there (`create_private`). Opened by
    its path tidied first (`os.path.abspath`), it was looked for beside the link, and the
    store could not open (or opened another file than the one made)."""
    (tmp_path / "disk" / "data").mkdir(parents=True)
    (tmp_path / "cwd").mkdir()
    (tmp_path / "cwd" / "data").symlink_to(tmp_path / "disk" / "data")
    monkeypatch.chdir(tmp_path / "cwd")
    with Database("data/../moim.db").write() as conn:
        conn.execute("CREATE TABLE notes (text TEXT)")
        conn.execute("INSERT INTO notes VALUES ('kept')")
    assert not (tmp_path / "cwd" / "moim.db").exists()
    made = Database(str(tmp_path / "disk" / "moim.db"))
    assert made.read("SELECT text FROM notes") == [("kept",)]


def test_a_link_to_a_file_not_made_yet_is_made_private_and_opened(tmp_path):
    """`moim.db` a link to a volume's file that does not exist yet: SQLite made the file at
    the link's end (0644). With connections that never create (`mode=rw`) and the private
    file made with O_EXCL, which refuses any link, the store could not be opened at all."""
    (tmp_path / "volume").mkdir()
    (tmp_path / "moim.db").symlink_to(tmp_path / "volume" / "moim.db")
    with Database(str(tmp_path / "moim.db")).write() as conn:
        conn.execute("CREATE TABLE notes (text TEXT)")
    made = tmp_path / "volume" / "moim.db"
    assert made.stat().st_mode & 0o777 == 0o600
    assert Database(str(made)).read("SELECT count(*) FROM notes") == [(0,)]
