"""Keeping the tantivy lexical index (`memory/store/lexical_index.py`) equal to SQLite.

`bump` runs inside every transaction that changes `chunks` and returns the new generation;
`Store` then mirrors the change into the index under the same write lock. `check` runs at
start: an index whose recorded generation or chunk count differs from SQLite's is rebuilt
by `rebuild`, in batches of chunk ids, each read from SQLite and written to the index under
the store's write lock, so a turn indexed meanwhile is never lost nor doubled.

Lost under a running moim (its directory removed or made unreadable: tantivy raises on the
next write or commit), the index is not searched again until rebuilt: `failed` has FTS5
answer, never the index's stale segments, and reopens the index (in a new directory if need
be) and rebuilds it in the background, trying again every `REOPEN_EVERY` seconds while that
fails. `Store.lexical_problem` says what is wrong meanwhile (`/health`, `/metrics`).
"""

from __future__ import annotations

import errno
import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory.errors import MemoryLayerError, describe
from memory.store.fts import fts_document, owner_token, turn_tail
from memory.store.lexical_index import LexicalIndex

if TYPE_CHECKING:
    from memory.store.store import Store

logger = logging.getLogger(__name__)

Connection = Any

_KEY = "lexical_generation"
# Chunks read and indexed per hold of the write lock during a rebuild (~0.2 s each).
_BATCH = 1000
# Seconds between attempts to reopen an index whose files failed under moim.
REOPEN_EVERY = 10.0


def bump(db: Connection) -> int:
    """Increment the chunks' generation inside the caller's transaction; return it."""
    db.execute(
        "INSERT INTO meta (key, value) VALUES (?, '1') "
        "ON CONFLICT (key) DO UPDATE SET value = CAST(value AS INTEGER) + 1",
        (_KEY,),
    )
    return int(db.execute("SELECT value FROM meta WHERE key = ?", (_KEY,)).fetchone()[0])


def generation(db: Connection) -> int:
    row = db.execute("SELECT value FROM meta WHERE key = ?", (_KEY,)).fetchone()
    return int(row[0]) if row else 0


def check(store: Store) -> threading.Thread | None:
    """Verify the index against SQLite; rebuild it in the background when they differ (the
    rebuilding thread is returned)."""
    index = store.lexical
    assert index is not None
    with store.write_lock():
        db = store.connection()
        current, chunks = generation(db), db.execute("SELECT count(*) FROM chunks").fetchone()[0]
        if index.verify(current, int(chunks)):
            store.mirrored_generation = current
            return None
    return start_rebuild(store)


def start_rebuild(store: Store) -> threading.Thread:
    """Rebuild the index on a thread of its own; FTS5 answers until it is done."""
    thread = threading.Thread(target=_rebuild_or_log, args=(store,), name="moim-lexical-rebuild")
    thread.daemon = True
    thread.start()
    return thread


def _rebuild_or_log(store: Store) -> None:
    """`rebuild`, on its thread: a failure (the store unreachable, the index's files removed
    under moim) is logged and said (`Store.lexical_problem`); the index stays unready, so
    FTS5 answers, and is reopened and rebuilt again once `REOPEN_EVERY` seconds passed."""
    try:
        rebuild(store)
    except (MemoryLayerError, ValueError, OSError) as exc:
        store.lexical_problem = _unavailable(exc)
        logger.warning("lexical index not rebuilt (%s): FTS5 answers", exc)


def failed(store: Store, exc: BaseException) -> None:
    """The index's files failed under moim (the store's write lock held): FTS5 answers from
    now on, and the index is reopened and rebuilt in the background."""
    if store.lexical is not None:
        store.lexical.ready = False
    store.lexical_problem = f"lexical index failed ({describe(exc)}): FTS5 answers, rebuilding"
    logger.warning(
        "lexical index failed (%s: %s): FTS5 answers while it is rebuilt", type(exc).__name__, exc
    )
    reopen_soon(store)


def health(store: Store) -> str | None:
    """What is wrong with the lexical index (None: nothing, or none is used): its files
    failed, or its directory is gone or unreadable, under moim. Asking notices a lost
    directory before the next write, and retries a failed reopening when it is due."""
    lock = store.write_lock()
    if not lock.acquire(blocking=False):
        return store.lexical_problem  # a write under way notices a failure itself
    try:
        index = store.lexical
        if store.lexical_problem is None and index is not None and index.lost():
            failed(store, FileNotFoundError(errno.ENOENT, "its directory is gone"))
        elif store.lexical_problem is not None:
            reopen_soon(store)
        return store.lexical_problem
    finally:
        lock.release()


def reopen_soon(store: Store) -> None:
    """Reopen and rebuild a failed index on a thread of its own, unless that is under way or
    was tried less than `REOPEN_EVERY` seconds ago (the write lock held)."""
    if store.rebuilding is not None and store.rebuilding.is_alive():
        return
    if time.monotonic() - store.lexical_tried < REOPEN_EVERY:
        return
    store.lexical_tried = time.monotonic()
    thread = threading.Thread(target=_reopen, args=(store,), name="moim-lexical-rebuild")
    thread.daemon = True
    store.rebuilding = thread
    thread.start()


def _reopen(store: Store) -> None:
    """Let go of the failed index, open it again (its directory made anew if removed) and
    rebuild it from SQLite; a failure (the directory unwritable) is said and retried."""
    directory = Path(store.target + "-lexical")
    try:
        if not Path(store.target).is_file():  # the database itself is gone: nothing to make
            raise FileNotFoundError(errno.ENOENT, "the database file is gone")
        with store.write_lock():
            if store.lexical_tried == float("inf"):  # the store was closed meanwhile
                return
            if store.lexical is not None:
                store.lexical.close()
            store.lexical = None  # FTS5 answers; nothing mirrors into the lost files
            store.lexical = LexicalIndex(directory)
        rebuild(store)
    except Exception as exc:  # on a thread of its own: said, and tried again
        store.lexical_problem = _unavailable(exc)
        logger.warning("lexical index not reopened (%s): FTS5 answers", exc)
    else:
        store.lexical_problem = None
        logger.warning("lexical index reopened and rebuilt: it answers again")


def _unavailable(exc: BaseException) -> str:
    """What `Store.lexical_problem` says while the index cannot be reopened or rebuilt."""
    every = f"retried every {REOPEN_EVERY:g} s"
    return f"lexical index unavailable ({describe(exc)}): FTS5 answers, {every}"


def rebuild(store: Store) -> int:
    """Index every chunk again from SQLite; return how many. The index is ready after."""
    index = store.lexical
    assert index is not None
    started = time.perf_counter()
    with store.write_lock():
        index.building, index.ready = True, False
        index.forget_state()
        index.clear()
        db = store.connection()
        top = int(db.execute("SELECT coalesce(max(id), 0) FROM chunks").fetchone()[0])
    done, low = 0, 0
    while low < top and not index.closed:
        with store.write_lock():
            rows = list(_documents(store.connection(), low, low + _BATCH, store.context_chars))
            index.put(rows)
        done, low = done + len(rows), low + _BATCH
    with store.write_lock():
        if index.closed:  # the store was closed meanwhile: the next start rebuilds
            return done
        current = generation(store.connection())
        index.commit(current)  # still building: the rows become searchable, no state yet
        index.building, index.ready = False, True  # only now: a search never sees it half done
        index.commit(current)  # nothing left to write: records the generation
        store.mirrored_generation = current
    logger.info("lexical index rebuilt: %d chunks in %.1f s", done, time.perf_counter() - started)
    return done


def _documents(
    db: Connection, low: int, high: int, context_chars: int
) -> Iterator[tuple[int, str, str, str]]:
    """(id, owner token, terms, context terms) of the chunks with low < id ≤ high: what
    `Store.add_chunks` wrote to `chunks_fts` (the context is the turn before, for a message's
    first chunk; memory/ingest/embedding_inputs.py)."""
    rows = db.execute(
        "SELECT c.id, c.user_id, c.text, CASE WHEN c.position = 0 THEN ("
        "SELECT p.content FROM messages p WHERE p.user_id = m.user_id "
        "AND p.session_id = m.session_id AND p.id < m.id AND p.role IN ('user', 'assistant') "
        "ORDER BY p.id DESC LIMIT 1) END "
        "FROM chunks c JOIN messages m ON m.id = c.message_id WHERE c.id > ? AND c.id <= ?",
        (low, high),
    ).fetchall()
    for chunk_id, user_id, text, before in rows:
        context = turn_tail(before or "", context_chars)
        yield (
            int(chunk_id),
            owner_token(user_id),
            fts_document(user_id, text),
            fts_document(user_id, context),
        )
