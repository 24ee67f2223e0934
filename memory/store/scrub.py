"""Erasing a forgotten user's words from the files, not only from the tables.

A DELETE removes rows, but their bytes can stay readable in the files (measured on a copy of
the 110k-chunk bench store, docs/forgetting.md):

- `chunks_fts` is contentless with `contentless_delete`: a delete writes a tombstone and the
  user's terms stay in `chunks_fts_data` until the segments holding them are merged.
- Pages and cells SQLite frees keep their old bytes, unless `PRAGMA secure_delete = ON`
  (every connection sets it: memory/store/database.py), which zeroes them as they are freed.
- The WAL holds copies of the pages written since its last reset, the user's included.
- tantivy marks deleted documents; their terms stay in the segments' dictionaries until a
  merge, which tantivy-py cannot ask for.

So a forget marks the store (`meta.scrub_due`, in the deleting transaction), and `scrub`,
run by the writer when it is idle and by `moim memory delete`, merges the FTS5 index into
one segment (the tombstoned rows dropped, the old pages zeroed as they are freed), rebuilds
the tantivy index from SQLite on a thread of its own (its old segment files deleted), then
checkpoints the WAL and truncates it. Pages freed before `secure_delete` was set (a store an
older moim wrote) keep their bytes until `vacuum` (`moim memory delete --vacuum`) rewrites
the file. The mark stays until all of that is done: a scrub cut short (a turn arrived, a
reader held the WAL, a crash) is finished by the next one.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from memory.store import fts_upkeep, lexical_sync

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    from memory.store.store import Store

_DUE = "scrub_due"
# What is left of a scrub: everything; the tantivy index and the WAL; the WAL (a reader held it).
_ALL, _LEXICAL, _WAL = "all", "lexical", "wal"


def mark_due(db: Any) -> None:
    """Note, inside a forget's transaction, that the files still hold what it deleted."""
    db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (_DUE, _ALL))


def due(store: Store) -> bool:
    """Whether a forgotten user's words may still be in the files."""
    return bool(store.read("SELECT 1 FROM meta WHERE key = ?", (_DUE,)))


def scrub(store: Store, stop: Callable[[], bool], wait: bool = False) -> bool:
    """Erase what forgotten users left in the files; True when nothing is left to do.

    Does nothing when no forget is pending. `stop()` is asked between FTS5 merge steps
    (each ~40 ms of the write lock). The tantivy index is rebuilt on a thread of its own
    (12 s at 110k chunks, 135 s at 1M; FTS5 answers meanwhile, and turns are stored and
    indexed between its batches), which truncates the WAL when it is done; `wait` waits
    for it (the command line).
    """
    rows = store.read("SELECT value FROM meta WHERE key = ?", (_DUE,))
    state = str(rows[0][0]) if rows else None
    if state == _ALL:
        if not fts_upkeep.merge_whole(store, stop):
            return False
        state = _LEXICAL if store.lexical is not None else _WAL
        _set(store, state)
    if state == _LEXICAL:
        if store.lexical is None:  # the process holding the index rebuilds it (a generation gap)
            state = _WAL
        else:
            with store.held():  # a rebuild under way may have put the user's chunks back
                if store.lexical.building:
                    return False
                store.lexical.building = True  # so the next idle time starts no second one
            thread = threading.Thread(
                target=_rebuild_lexical, args=(store,), name="moim-scrub", daemon=True
            )
            thread.start()
            if not wait:
                return False
            thread.join()
            return not due(store)
    return state is None or _truncate_wal(store)


def _rebuild_lexical(store: Store) -> None:
    """Rebuild the tantivy index from SQLite, delete its old segment files, then truncate
    the WAL; a rebuild cut short (the store closed) leaves the mark for the next start."""
    lexical = store.lexical
    assert lexical is not None
    try:
        lexical_sync.rebuild(store)
    except Exception:  # the mark stays: the next idle time tries again; FTS5 answers
        logger.exception("rebuilding the lexical index after a forget failed")
        lexical.building = False
        return
    if lexical.closed or not lexical.ready:
        return
    lexical.collect_garbage()
    _set(store, _WAL)
    _truncate_wal(store)


def _set(store: Store, state: str) -> None:
    with store.write() as db:
        db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (_DUE, state))


def _truncate_wal(store: Store) -> bool:
    """Checkpoint the WAL into the file and truncate it to nothing; False when a reader
    still needed an older page (SQLite then keeps the WAL: the next scrub tries again).

    The mark goes first, in its own transaction, so the checkpoint copies that too."""
    with store.held():
        with store.write() as db:
            db.execute("DELETE FROM meta WHERE key = ?", (_DUE,))
        busy = store.connection().execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
        if busy:
            with store.write() as db:
                db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (_DUE, _WAL))
    return not busy


def vacuum(store: Store) -> None:
    """Rewrite the whole file (SQLite's VACUUM), then truncate the WAL: no free page is left
    holding what was deleted before `secure_delete` was on (a store from an older moim).

    Holds the write lock throughout: 1.5 s for the 110k-chunk bench store (300 MB); the WAL
    grows to the file's size until the checkpoint, and the disk needs that much free."""
    with store.held():
        db = store.connection()
        db.execute("VACUUM")
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
