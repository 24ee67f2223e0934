"""SQLite connections for moim: one per thread, WAL, sqlite-vec loaded, one writer at a time.

`Store` (memory/store/store.py) is a `Database` with moim's tables and queries.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlean
import sqlite_vec

from memory.errors import StoreUnavailable

Connection = Any
# Each connection's page cache, in KiB (SQLite's default is 2,000). Every thread that touches
# the store has a connection, ~20 in a busy server, and random reads of a big user's rows
# filled each cache: up to 40 MB. With 256 KiB, 80 random chunk rows of a 100k-chunk user
# and a chunk's insert (its vector into sqlite-vec's 1.5 MB blob) measured the same within
# noise (~1 ms and ~0.2 ms p50): the file's pages are in the OS's cache either way.
PAGE_CACHE_KIB = 256
# Less than this spent waiting for the process's write lock is not worth a shorter busy wait.
_WAITED = 0.001


class Database:
    """A SQLite file: per-thread connections for reads, one lock-serialised writer."""

    def __init__(self, path: Path | str, busy_timeout: float = 10.0) -> None:
        self.path = str(path)
        # Connections open the absolute path: a thread that connects later (the lexical
        # index's rebuild) must open this file even if the process changed directory since.
        self.target = self.path if self.path == ":memory:" else str(Path(path).absolute())
        if self.target != ":memory:":
            create_private(self.target)
        self.busy_timeout = busy_timeout
        self._local = threading.local()
        self._write_lock = threading.RLock()

    def connection(self) -> Connection:
        """This thread's connection (WAL, foreign keys, sqlite-vec loaded)."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = connect(self.target, self.busy_timeout)
            self._local.conn = conn
        return conn

    @contextmanager
    def held(self) -> Iterator[None]:
        """This process's write lock, for a transaction and what follows it under the same
        lock (`Store` mirrors chunks into its lexical index there); waited for at most
        `busy_timeout` seconds, as `write` waits, then StoreUnavailable."""
        if not self._write_lock.acquire(timeout=self.busy_timeout):
            raise StoreUnavailable(
                f"database is locked: another write of this process held it {self.busy_timeout} s"
            )
        try:
            yield
        finally:
            self._write_lock.release()

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """One write transaction, serialised with every other writer of this process.

        Waits `busy_timeout` seconds in all, from one deadline: for this process's other
        writer, then (what is left) for SQLite's lock. The writer retrying under another
        process's lock holds the first while SQLite makes it wait for the second, so a
        write queued behind it used to wait both in turn: twice the setting.
        """
        deadline = time.monotonic() + self.busy_timeout
        if not self._write_lock.acquire(timeout=self.busy_timeout):
            raise StoreUnavailable(
                f"database is locked: another write of this process held it {self.busy_timeout} s"
            )
        try:
            with self._errors():
                db = self.connection()
                self._begin(db, deadline - time.monotonic())
                try:
                    yield db
                except BaseException:
                    db.execute("ROLLBACK")
                    raise
                db.execute("COMMIT")
        finally:
            self._write_lock.release()

    def _begin(self, db: Connection, left: float) -> None:
        """BEGIN IMMEDIATE, waiting for SQLite's lock at most `left` seconds."""
        if left >= self.busy_timeout - _WAITED:  # the process lock was free: the usual path
            db.execute("BEGIN IMMEDIATE")
            return
        db.execute(f"PRAGMA busy_timeout = {max(0, round(left * 1000)):d}")
        try:
            db.execute("BEGIN IMMEDIATE")
        finally:
            db.execute(f"PRAGMA busy_timeout = {round(self.busy_timeout * 1000):d}")

    def read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        with self._errors():
            return list(self.connection().execute(sql, params).fetchall())

    def read_one(self, sql: str, params: Sequence[Any] = ()) -> Any:
        """The first column of the one row `sql` returns (None when it returns none).

        On the request path, reads that return many rows are packed into one (`group_concat`,
        `json_group_array`): fetching each row is a step that releases the GIL and takes it
        back, and while other threads run Python (the event loop), each take-back can wait
        out the 5 ms switch interval. 80 rows read beside a busy thread took 330 ms; packed
        into one, 24 ms.
        """
        with self._errors():
            row = self.connection().execute(sql, params).fetchone()
        return None if row is None else row[0]

    @contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            yield
        except sqlean.Error as exc:
            raise StoreUnavailable(f"{type(exc).__name__}: {exc}") from exc


def create_private(path: str) -> None:
    """Create the database file readable by its owner alone, when it does not exist yet.

    It holds every user's conversations; made by SQLite it would take the umask's mode (0644
    as a rule: readable by every account on the machine). SQLite gives its WAL and shared-memory
    files the database file's mode, so they are private too. A path that cannot be created is
    left for `connect` to report. A link to a file not made yet (a volume's) is made at its end,
    where SQLite made it: O_EXCL refuses every link, and `connect` never creates."""
    try:
        os.close(os.open(os.path.realpath(path), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except OSError:
        pass  # it exists (its mode is the owner's choice), or connect names the problem


def connect(path: str, busy_timeout: float = 10.0) -> Connection:
    """A connection to `path` that waits up to `busy_timeout` seconds for another's lock;
    an error names the file by its absolute path (what the user needs to find it)."""
    # mode=rw: SQLite never creates the file. `create_private` made it (0600) before the first
    # connection; one opened later, after the file was removed under moim (`rm moim.db`), made
    # an empty 0644 file in its place, into which the next start stored every user's turns.
    # The absolute path as a file URI (`Path.as_uri`: an empty authority, so a path that POSIX
    # lets start with "//", `sqlite:////srv/moim.db`, is not read as a host; `C:/…` on Windows).
    # Not tidied (`os.path.abspath`): `data/../moim.db` with `data` a link is the file the
    # system finds from where the link leads, the one `create_private` made; SQLite finds it so.
    absolute = Path(path).absolute()
    target = path if path == ":memory:" else f"{absolute.as_uri()}?mode=rw"
    try:
        conn = sqlean.connect(
            target, isolation_level=None, check_same_thread=False, timeout=busy_timeout, uri=True
        )
        conn.enable_load_extension(True)
        sqlite_vec.load(conn)
        conn.enable_load_extension(False)
        # WAL is set once per connection, outside any transaction (sqlite-utils' rule).
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = ON")
        # Freed pages and cells are zeroed, so a deleted row's bytes do not stay in the file
        # (a forgotten user's words; memory/store/scrub.py). FAST would leave freed pages as
        # they were; ON cost 2-5% on a 10k-chunk forget and an FTS5 optimize (docs/forgetting.md).
        conn.execute("PRAGMA secure_delete = ON")
        conn.execute(f"PRAGMA busy_timeout = {round(busy_timeout * 1000):d}")
        conn.execute(f"PRAGMA cache_size = -{PAGE_CACHE_KIB:d}")
    except sqlean.Error as exc:
        shown = path if path == ":memory:" else str(absolute)
        raise StoreUnavailable(f"cannot open {shown}: {exc}") from exc
    return conn
