"""SQLite's spellings in the shared SQL (`fact_rows`, `marks`, `transfer`) as Postgres's.

Those modules write portable SQL through `store.write()` / `store.read()` with a handful of
SQLite-isms. Rather than keep a second copy of each for Postgres, `PgConnection` rewrites the
few that occur, by exact pattern, and fails loudly on one it does not know (the Postgres
runs of the facts and export tests catch a new one):

- `?` parameters → `%s` (and a literal `%` doubled);
- `INSERT OR IGNORE INTO t …` → `INSERT INTO t … ON CONFLICT DO NOTHING`;
- two-argument `max(a, b)` → `greatest(a, b)`;
- `trim(x, char(32, 9, 10, 13))` → `btrim(x, E' \\t\\n\\r')`;
- `cursor.lastrowid` → `RETURNING id` on inserts into tables with an `id` column;
- an insert into `messages` with an explicit `id` that may be NULL (an import) takes the next
  id from the sequence when it is, and moves the sequence past the ids it was given.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

_MAX2 = re.compile(r"\bmax\(([^(),]+),([^(),]+)\)", re.IGNORECASE)
_TRIM = "trim(m.content, char(32, 9, 10, 13))"
_WITH_ID = re.compile(r"^\s*INSERT INTO (messages|facts)\b", re.IGNORECASE)
_IGNORE = re.compile(r"^\s*INSERT OR IGNORE INTO\b", re.IGNORECASE)
_EXPLICIT_ID = re.compile(r"^\s*INSERT INTO messages \(id,", re.IGNORECASE)
_SQLITE_ONLY = re.compile(r"\b(INSERT OR REPLACE|json_group_array|group_concat|printf)\b", re.I)


def translate(sql: str) -> tuple[str, bool, bool]:
    """Postgres SQL for one SQLite statement; whether it returns the new row's id; whether
    it inserts a message under an id of its own (the sequence must then move past it)."""
    if _SQLITE_ONLY.search(sql):
        raise ValueError(f"no Postgres spelling for this SQLite statement: {sql[:80]}")
    sql = sql.replace("%", "%%").replace(_TRIM, "btrim(m.content, E' \\t\\n\\r')")
    sql = _MAX2.sub(r"greatest(\1,\2)", sql)
    ignore = bool(_IGNORE.match(sql))
    if ignore:
        sql = _IGNORE.sub("INSERT INTO", sql) + " ON CONFLICT DO NOTHING"
    explicit = bool(_EXPLICIT_ID.match(sql))
    if explicit:
        sql = sql.replace("VALUES (?,", "VALUES (coalesce(?, nextval('messages_id_seq')),", 1)
    returns_id = bool(_WITH_ID.match(sql)) and "RETURNING" not in sql.upper()
    if returns_id:
        sql += " RETURNING id"
    return sql.replace("?", "%s"), returns_id, explicit


class PgCursor:
    """What the shared modules read from a cursor: rows, `rowcount` and `lastrowid`."""

    def __init__(self, rows: list[Any], rowcount: int, lastrowid: int | None) -> None:
        self._rows = rows
        self.rowcount = rowcount
        self.lastrowid = lastrowid

    def fetchone(self) -> Any:
        return self._rows[0] if self._rows else None

    def fetchall(self) -> list[Any]:
        return list(self._rows)


class PgConnection:
    """A psycopg connection in a transaction, taking the shared modules' SQLite SQL."""

    def __init__(self, conn: Any) -> None:
        self.raw = conn

    def execute(self, sql: str, params: Sequence[Any] = ()) -> PgCursor:
        statement, returns_id, explicit = translate(sql)
        cur = self.raw.execute(statement, list(params))
        rows = cur.fetchall() if cur.description is not None else []
        lastrowid = int(rows[0][0]) if returns_id and rows else None
        if explicit and rows:  # an imported id beyond the sequence: move it on
            self.raw.execute(
                "SELECT setval('messages_id_seq', greatest(%s, "
                "(SELECT last_value FROM messages_id_seq)))",
                [lastrowid],
            )
        return PgCursor(rows, cur.rowcount, lastrowid)
