"""Connections to PostgreSQL for `PgStore`: one pool, errors turned into `StoreUnavailable`.

A failed connection or statement is `StoreUnavailable`, as a locked SQLite file is, so chat
fails open and the memory API says 503; after a lost connection, calls fail at once for a
moment instead of each waiting out the timeout. The URL is only ever shown with its password
masked. Statements are never prepared: each is planned for its own user, as users' sizes
differ by orders of magnitude. `read` and `write` take the shared modules' SQLite spelling
(memory/store/pg_sql.py); `_rows` takes native Postgres SQL.

Recall's reads (`_rows(…, recall=True)`) go through a second pool whose connections end any
statement after `read_timeout` seconds (Postgres's `statement_timeout`): a search that runs
away (a bad plan once ran 25 minutes) fails that recall, which goes on without memory, and
frees its connection, instead of holding it long after its request gave up. Writes, deletes
and exports keep the first pool, with no limit: forgetting a large user may take a while.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
import psycopg_pool

from memory.errors import StoreUnavailable
from memory.store.backend import redact_url
from memory.store.pg_sql import PgConnection

# Seconds to wait for a connection (at start, from the pool) before the store is unavailable.
CONNECT_TIMEOUT = 5

# Errors of one statement while the server is there: a lost deadlock or serialization (two
# replicas indexing at once), a cancelled statement. psycopg derives them from
# OperationalError, as it does a lost connection, but they must not stop the next calls.
_LOST_STATEMENT = (
    psycopg.errors.TransactionRollback,
    psycopg.errors.SerializationFailure,
    psycopg.errors.DeadlockDetected,
    psycopg.errors.QueryCanceled,
)

# After a lost connection, calls fail at once for this long instead of each waiting out
# CONNECT_TIMEOUT: a recall makes several reads, and chat must fail open promptly.
DOWN_FOR = 2.0


class PgConnections:
    """A pool of connections to one Postgres database, and the reads and writes through it."""

    def __init__(self, url: str, max_connections: int = 8, read_timeout: float = 10.0) -> None:
        self.url = url
        self._down_until = 0.0
        self._pool = _pool(url, max_connections, "moim")
        limit = f"-c statement_timeout={max(1, round(read_timeout * 1000))}"
        self._recall_pool = _pool(url, max_connections, "moim-recall", options=limit)

    def close(self) -> None:
        self._recall_pool.close()
        self._pool.close()

    @contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            yield
        except _LOST_STATEMENT as exc:
            # A lost deadlock (replicas indexing at once), a cancelled statement: the server
            # is there, so this call fails and the next ones are not refused.
            raise StoreUnavailable(f"{redact_url(self.url)}: {failure_reason(exc)}") from exc
        except (psycopg.OperationalError, psycopg_pool.PoolTimeout) as exc:
            self._down_until = time.monotonic() + DOWN_FOR
            raise StoreUnavailable(f"{redact_url(self.url)}: {failure_reason(exc)}") from exc
        except psycopg.Error as exc:
            raise StoreUnavailable(f"{redact_url(self.url)}: {failure_reason(exc)}") from exc

    @contextmanager
    def _conn(self, recall: bool = False) -> Iterator[Any]:
        if time.monotonic() < self._down_until:
            raise StoreUnavailable(f"{redact_url(self.url)}: unreachable, retrying shortly")
        pool = self._recall_pool if recall else self._pool
        with self._errors(), pool.connection(timeout=DOWN_FOR) as conn:
            yield conn

    @contextmanager
    def write(self) -> Iterator[PgConnection]:
        """One write transaction, on a pooled connection, taking the shared modules' SQL."""
        with self._conn() as conn, conn.transaction():
            yield PgConnection(conn)

    def read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """Rows of a statement written as the shared modules write it (SQLite's `?`)."""
        with self._conn() as conn:
            return PgConnection(conn).execute(sql, params).fetchall()

    def try_lock(self, space: int, name: str) -> Callable[[], None] | None:
        """A session advisory lock on (`space`, hashtext(`name`)) held on a pooled connection
        until the returned release is called; None when another session holds it. A replica
        that dies lets go with its connection."""
        if time.monotonic() < self._down_until:
            raise StoreUnavailable(f"{redact_url(self.url)}: unreachable, retrying shortly")
        key = [space, name]
        with self._errors():
            conn = self._pool.getconn(timeout=DOWN_FOR)
            try:
                taken = conn.execute("SELECT pg_try_advisory_lock(%s, hashtext(%s))", key)
                held = bool((taken.fetchone() or [False])[0])
            except BaseException:
                self._pool.putconn(conn)
                raise
        if not held:
            self._pool.putconn(conn)
            return None

        def release() -> None:
            try:
                conn.execute("SELECT pg_advisory_unlock(%s, hashtext(%s))", key)
            except psycopg.Error:
                pass  # the connection is lost, and the lock with it
            finally:
                self._pool.putconn(conn)

        return release

    def _rows(
        self, sql: str, params: Sequence[Any] = (), binary: bool = False, recall: bool = False
    ) -> list[Any]:
        """Rows of a native Postgres statement (`%s` parameters); `binary` asks for the
        columns in binary form (a `bytea` then comes back without its hex encoding); `recall`
        runs it on recall's pool, where it ends after `read_timeout` seconds."""
        with self._conn(recall) as conn:
            return list(conn.execute(sql, list(params), binary=binary).fetchall())


def _pool(url: str, size: int, name: str, **options: str) -> psycopg_pool.ConnectionPool:
    """A pool of autocommit connections that prepare nothing: Postgres would plan a statement
    run a few times once, for an average user (a generic plan), and a heavy user's search then
    re-counts its chunks for each one that matches (100k chunks: 25 minutes, not 2 s)."""
    return psycopg_pool.ConnectionPool(
        url,
        min_size=1,
        max_size=size,
        kwargs={
            "autocommit": True,
            "connect_timeout": CONNECT_TIMEOUT,
            "prepare_threshold": None,
            **options,
        },
        check=psycopg_pool.ConnectionPool.check_connection,
        timeout=CONNECT_TIMEOUT,
        open=True,
        name=name,
    )


def failure_reason(exc: BaseException) -> str:
    """One line saying why, without the connection string psycopg may quote."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return redact_url(text)
