"""How big the store is, over every user: for `/metrics`, never for a request.

The one read besides `overview.users` that spans users, which is its purpose: operators watch
the index grow. Each count is a scan of an index (about 10 ms per million rows; the distinct
users about 60 ms per million messages), so it is read when metrics are scraped, not per
request.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from memory.store.backend import StoreBackend as Store
from memory.store.failed_messages import FAILED


@dataclass(frozen=True, slots=True)
class StoreSizes:
    """Rows in the store, and its bytes: SQLite's file and its WAL, or the PostgreSQL
    database's size."""

    users: int
    messages: int
    chunks: int
    facts: int  # active ones
    unindexed: int  # messages stored but not yet chunked, embedded and indexed
    bytes: int
    failed: int = 0  # messages no indexing pass could index, set aside (index_failures)


def store_sizes(store: Store) -> StoreSizes:
    row = store.read(
        "SELECT (SELECT count(DISTINCT user_id) FROM messages), (SELECT count(*) FROM messages), "
        "(SELECT count(*) FROM chunks), (SELECT count(*) FROM facts WHERE status = 'active'), "
        "(SELECT count(*) FROM messages WHERE indexed = 0), "
        f"(SELECT count(*) FROM messages WHERE indexed = {FAILED})"
    )[0]
    users, messages, chunks, facts, unindexed, failed = (int(n) for n in row)
    path = getattr(store, "path", None)  # a SQLite file, else PostgreSQL's database
    if isinstance(path, str):
        size = _file_bytes(path)
    else:  # its tables, indexes and TOAST (a stat of its files, as cheap as ours)
        size = int(store.read("SELECT pg_database_size(current_database())")[0][0])
    return StoreSizes(users, messages, chunks, facts, unindexed, size, failed)


def _file_bytes(path: str) -> int:
    total = 0
    for name in (path, path + "-wal"):
        try:
            total += os.stat(name).st_size
        except OSError:
            pass
    return total
