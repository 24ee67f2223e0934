"""The facts' SQL: semantic memory rows in the `facts` table (migration `m002_facts`).

Like all SQL, it lives in `memory/store/`; it is split out of `store.py` so that each stays
under STYLE.md's 400 lines. It uses the store's
connections: `store.write()` for one serialised write transaction, `store.read()` for reads.
Every function takes `user_id` and filters on it in the query, so isolation lives in the SQL;
the lifecycle sweep `expire_facts` may also run over every user. Values arrive already
normalised and validated (`memory/facts/rules.py` does that); this module only stores them.

A row's life (the durable-memory blog, "Memory lifecycle"; DMF's supersession):

    active ──new value for its key──▶ superseded  (superseded_by = new row; kept forever)
    active ──expires_at passed, or silent too long──▶ stale  (pinned rows are exempt)
    active | stale ──forget──▶ archived               (an audit trail; never deleted)

Only forgetting the whole user (`Store.delete_user`) deletes fact rows.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any, cast

from memory.records import Fact, FactStatus, Policy
from memory.store.backend import StoreBackend as Store
from memory.store.database import Connection
from memory.store.fact_limit import check_room

_COLUMNS = (
    "id, user_id, key, value, category, policy, pinned, status, confidence, source, "
    "source_message_id, expires_at, created_at, updated_at"
)
# Exported per row, beside `_COLUMNS` minus user_id: everything needed to restore history.
_EXPORTED = (
    "id key value category policy pinned status confidence source source_message_id rule "
    "expires_at superseded_by created_at updated_at last_injected_at"
).split()


def _fact(row: Sequence[Any]) -> Fact:
    return Fact(
        id=row[0],
        user_id=row[1],
        key=row[2],
        value=row[3],
        category=row[4],
        policy=row[5],
        pinned=bool(row[6]),
        status=row[7],
        confidence=row[8],
        source=row[9],
        source_message_id=row[10],
        expires_at=row[11],
        created_at=row[12],
        updated_at=row[13],
    )


def _active(db: Connection, user_id: str, key: str) -> Fact | None:
    row = db.execute(
        f"SELECT {_COLUMNS} FROM facts WHERE user_id = ? AND key = ? AND status = 'active'",
        (user_id, key),
    ).fetchone()
    return None if row is None else _fact(row)


def same_value(a: str, b: str) -> bool:
    """Values equal up to case and spacing are one value restated, not a new one."""
    return " ".join(a.split()).casefold() == " ".join(b.split()).casefold()


def upsert_fact(
    store: Store,
    user_id: str,
    key: str,
    value: str,
    category: str | None,
    *,
    policy: Policy | None = None,
    pinned: bool | None = None,
    confidence: float = 1.0,
    source: str = "api",
    source_message_id: int | None = None,
    rule: str | None = None,
    expires_at: float | None = None,
    now: float,
) -> Fact:
    """Set the active value of `key`; return the active row.

    The same value as the active one (up to case and spacing) reinforces it: its text,
    `expires_at` and timestamps are updated, confidence becomes the higher of the two, and
    `category`, `policy` and `pinned` change only when given (not None). A different value
    supersedes it: the old row turns `superseded` with `superseded_by` pointing at the new
    active row, which inherits `category`, `policy` and `pinned` unless they are given (a
    pinned fact stays pinned when it changes). With no active row the defaults are
    `profile`, `speak` and unpinned.
    """
    with store.write() as db:
        current = _active(db, user_id, key)
        if current is not None and same_value(current.value, value):
            db.execute(
                "UPDATE facts SET value = ?, category = ?, policy = ?, pinned = ?, "
                "confidence = max(confidence, ?), expires_at = ?, updated_at = ? "
                "WHERE id = ? AND user_id = ?",
                (
                    value,
                    category or current.category,
                    policy or current.policy,
                    int(current.pinned if pinned is None else pinned),
                    confidence,
                    expires_at,
                    now,
                    current.id,
                    user_id,
                ),
            )
            fact_id = current.id
        else:  # a new value: the old row stays, as superseded history
            inherited = current or Fact(0, user_id, key, value, "profile")
            if current is None:
                check_room(db, user_id, adding=1)
            if current is not None:  # free the one-active-per-key index before inserting
                db.execute(
                    "UPDATE facts SET status = 'superseded', updated_at = ? "
                    "WHERE id = ? AND user_id = ?",
                    (now, current.id, user_id),
                )
            cur = db.execute(
                "INSERT INTO facts (user_id, key, value, category, policy, pinned, status, "
                "confidence, source, source_message_id, rule, expires_at, created_at, updated_at) "
                "VALUES (?, ?, ?, ?, ?, ?, 'active', ?, ?, ?, ?, ?, ?, ?)",
                (
                    user_id,
                    key,
                    value,
                    category or inherited.category,
                    policy or inherited.policy,
                    int(inherited.pinned if pinned is None else pinned),
                    confidence,
                    source,
                    source_message_id,
                    rule,
                    expires_at,
                    now,
                    now,
                ),
            )
            fact_id = int(cur.lastrowid)
            if current is not None:
                db.execute(
                    "UPDATE facts SET superseded_by = ? WHERE id = ? AND user_id = ?",
                    (fact_id, current.id, user_id),
                )
        stored = _active(db, user_id, key)
    assert stored is not None and stored.id == fact_id
    return stored


def archive_fact(store: Store, user_id: str, key: str, now: float) -> Fact | None:
    """Forget a key: its active (and any stale) row becomes `archived`; None when none was.

    Archived rows are never deleted, only kept out of every block (an audit trail).
    Returns the newest row archived, with its new status.
    """
    with store.write() as db:
        row = db.execute(
            f"SELECT {_COLUMNS} FROM facts WHERE user_id = ? AND key = ? "
            "AND status IN ('active', 'stale') ORDER BY status = 'active' DESC, id DESC LIMIT 1",
            (user_id, key),
        ).fetchone()
        if row is None:
            return None
        db.execute(
            "UPDATE facts SET status = 'archived', updated_at = ? "
            "WHERE user_id = ? AND key = ? AND status IN ('active', 'stale')",
            (now, user_id, key),
        )
    return replace(_fact(row), status="archived", updated_at=now)


def _select(store: Store, where: str, params: Sequence[Any]) -> list[Fact]:
    """Rows matching `where` (a constant condition starting with `user_id = ?`), by id."""
    rows = store.read(f"SELECT {_COLUMNS} FROM facts WHERE {where} ORDER BY id", params)
    return [_fact(row) for row in rows]


def active_facts(store: Store, user_id: str, now: float) -> list[Fact]:
    """The user's active facts not past `expires_at` (pinned ones whatever it says), by id."""
    return _select(
        store,
        "user_id = ? AND status = 'active' AND (pinned = 1 OR expires_at IS NULL "
        "OR expires_at > ?)",
        (user_id, now),
    )


def get_fact(store: Store, user_id: str, key: str) -> Fact | None:
    """The active fact of `key`, or None."""
    found = _select(store, "user_id = ? AND key = ? AND status = 'active'", (user_id, key))
    return found[0] if found else None


def fact_by_id(store: Store, user_id: str, fact_id: int) -> Fact | None:
    """The user's fact row with this id, whatever its status; None for another user's id."""
    found = _select(store, "user_id = ? AND id = ?", (user_id, fact_id))
    return found[0] if found else None


def fact_history(store: Store, user_id: str, key: str) -> list[Fact]:
    """Every row ever stored for `key`, oldest first (superseded, stale, archived included)."""
    return _select(store, "user_id = ? AND key = ?", (user_id, key))


def list_facts(store: Store, user_id: str, status: FactStatus | None = None) -> list[Fact]:
    """The user's fact rows with this status (every status when None), oldest first."""
    if status is None:
        return _select(store, "user_id = ?", (user_id,))
    return _select(store, "user_id = ? AND status = ?", (user_id, status))


def set_pinned(store: Store, user_id: str, key: str, pinned: bool, now: float) -> Fact | None:
    """Pin or unpin the active fact of `key`; None when there is none."""
    return _update_active(store, user_id, key, "pinned = ?", int(pinned), now)


def set_policy(store: Store, user_id: str, key: str, policy: Policy, now: float) -> Fact | None:
    """Change how the active fact of `key` is surfaced; None when there is none."""
    return _update_active(store, user_id, key, "policy = ?", policy, now)


def _update_active(
    store: Store, user_id: str, key: str, assignment: str, value: Any, now: float
) -> Fact | None:
    """`assignment` is one of the constant strings above, never caller text."""
    with store.write() as db:
        db.execute(
            f"UPDATE facts SET {assignment}, updated_at = ? "
            "WHERE user_id = ? AND key = ? AND status = 'active'",
            (value, now, user_id, key),
        )
        return _active(db, user_id, key)


def mark_injected(store: Store, user_id: str, ids: Sequence[int], now: float) -> None:
    """Record that these facts of the user went into a block at `now` (`last_injected_at`)."""
    if ids:
        with store.write() as db:
            db.execute(
                f"UPDATE facts SET last_injected_at = ? WHERE user_id = ? AND id IN "
                f"({','.join('?' * len(ids))})",
                [now, user_id, *ids],
            )


def expire_facts(
    store: Store,
    now: float,
    *,
    user_id: str | None = None,
    max_silence: Mapping[str, float] | None = None,
) -> int:
    """Turn unpinned active facts `stale` when past `expires_at`; return how many changed.

    `max_silence` maps a category to seconds: an active fact of that category not updated
    (stated or reinforced) for longer also goes stale. With `user_id` only that user's facts
    are swept (the read path); without, every user's (the lifecycle job). Nothing is written
    when nothing is due, so the read path pays one indexed read.
    """
    where = "status = 'active' AND pinned = 0 AND ((expires_at IS NOT NULL AND expires_at <= ?)"
    params: list[Any] = [now]
    for category, seconds in (max_silence or {}).items():
        where += " OR (category = ? AND updated_at <= ?)"
        params += [category, now - seconds]
    where += ")"
    if user_id is not None:
        where += " AND user_id = ?"
        params.append(user_id)
    if not store.read(f"SELECT 1 FROM facts WHERE {where} LIMIT 1", params):
        return 0
    with store.write() as db:
        cur = db.execute(
            f"UPDATE facts SET status = 'stale', updated_at = ? WHERE {where}", [now, *params]
        )
        return int(cur.rowcount)


def export_facts(store: Store, user_id: str) -> Iterator[dict[str, Any]]:
    """Every fact row of the user, history included, as JSON-ready dicts in id order."""
    rows = store.read(
        f"SELECT {', '.join(_EXPORTED)} FROM facts WHERE user_id = ? ORDER BY id", (user_id,)
    )
    for row in rows:
        item = dict(zip(_EXPORTED, row, strict=True))
        item["pinned"] = bool(item["pinned"])
        yield item


def import_facts(
    store: Store, user_id: str, items: Sequence[Mapping[str, Any]], capped: bool = True
) -> int:
    """Restore exported rows (as `export_facts` writes them) for `user_id`; return rows added.

    Rows get new ids and their `superseded_by` links are remapped, so an export moves between
    databases and users. A row already stored (same key, value and `created_at`, any status)
    is skipped, so importing twice adds nothing. An imported active row whose key already has
    an active fact is stored as superseded by it: the live value wins. `source_message_id` is
    dropped, since imported messages may get new ids.
    """
    stored: dict[Any, int] = {}  # exported id -> id here
    links: list[tuple[int, Any]] = []  # (id here, exported superseded_by)
    added = 0
    with store.write() as db:
        for item in sorted(items, key=lambda i: i.get("id") or 0):
            found = db.execute(
                "SELECT id FROM facts WHERE user_id = ? AND key = ? AND value = ? "
                "AND created_at = ?",
                (user_id, item["key"], item["value"], item["created_at"]),
            ).fetchone()
            if found is not None:
                stored[item.get("id")] = found[0]
                continue
            status, superseded_by = item["status"], item.get("superseded_by")
            live = _active(db, user_id, item["key"]) if status == "active" else None
            if live is not None:
                status, superseded_by = "superseded", None
            cur = db.execute(
                "INSERT INTO facts (user_id, key, value, category, policy, pinned, status, "
                "confidence, source, source_message_id, rule, expires_at, superseded_by, "
                "created_at, updated_at, last_injected_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, ?, ?, ?, ?, ?)",
                (
                    user_id,
                    item["key"],
                    item["value"],
                    item["category"],
                    item["policy"],
                    int(item["pinned"]),
                    status,
                    item["confidence"],
                    item["source"],
                    item.get("rule"),
                    item.get("expires_at"),
                    live.id if live else None,
                    item["created_at"],
                    item["updated_at"],
                    item.get("last_injected_at"),
                ),
            )
            stored[item.get("id")] = int(cur.lastrowid)
            links += [(int(cur.lastrowid), superseded_by)] if superseded_by is not None else []
            added += 1
        for fact_id, old in links:
            db.execute(
                "UPDATE facts SET superseded_by = ? WHERE id = ? AND user_id = ?",
                (stored.get(old), fact_id, user_id),
            )
        if capped:  # past it: the transaction rolls back, nothing is restored
            check_room(db, user_id)
    return added


@contextmanager
def one_transaction(store: Store) -> Iterator[Store]:
    """A view of `store` on which every function here joins one write transaction.

    Each function opens its own `store.write()`, and SQLite cannot nest them; a batch that must
    commit or roll back as a whole (consolidation's operations) runs its steps on this view.
    The functions here use only `write()` and `read()`, which the view provides.
    """
    with store.write() as db:
        yield cast(Store, _Joined(db))


class _Joined:
    """`write()` yields the open transaction instead of starting one; `read()` reads in it."""

    def __init__(self, db: Connection) -> None:
        self._db = db

    @contextmanager
    def write(self) -> Iterator[Connection]:
        yield self._db

    def read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        return list(self._db.execute(sql, params).fetchall())
