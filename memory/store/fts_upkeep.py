"""Keep the FTS5 index merged, a step at a time, while the writer has nothing else to do.

Every indexing batch adds a small segment to the FTS5 index; FTS5 merges them as it goes
(`automerge`), but leaves several per level. A query reads every segment, and BM25 counts each
query term's documents over all of them, whoever they belong to: a 1k-chunk user among 1M
chunks took 4.1 ms for a lexical search, 2.7 ms once the index was merged into one segment
(1.3 → 0.9 ms alone in its database). Merging everything at once (`optimize`) holds the
write lock for seconds on a large store, so it is done incrementally: FTS5's `merge` command
with a negative page budget is a bounded step of an optimize, and a step that changes
fewer than two rows means the index is whole (https://sqlite.org/fts5.html, "The 'merge'
Command"). An index is merged again once it has grown by `TIDY_GROWTH` (and by
`Settings.fts_merge_after` chunks) since the last time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memory.store.store import Store

# Leaf pages written per step: ~40 ms of work on this project's machine, so a turn that
# arrives meanwhile waits at most that long for the write lock.
STEP_PAGES = 200
# Merge again once the index holds this share more chunks than when it was last whole (and
# at least `min_new` more): a merge rewrites the whole index.
TIDY_GROWTH = 0.05

_MARK = "fts_merged_at_chunk"  # the newest chunk id when the index was last whole


def tidy_due(store: Store, min_new: int) -> bool:
    """Whether the index has grown enough since it was last merged to merge it again.

    Growth is read off the newest chunk id (one index step; `count(*)` took 7 ms at 1M
    chunks, and this runs whenever the writer falls idle).
    """
    rows = store.read(
        "SELECT (SELECT coalesce(max(id), 0) FROM chunks), (SELECT value FROM meta WHERE key = ?)",
        (_MARK,),
    )
    newest, mark = int(rows[0][0]), int(rows[0][1] or 0)
    return newest - mark >= max(min_new, int(mark * TIDY_GROWTH))


def tidy(store: Store, stop: Callable[[], bool], min_new: int) -> bool:
    """Merge the index step by step until it is whole (True) or `stop()` says to yield.

    Does nothing (and returns False) when it is not due. An interrupted merge is finished by
    the next call, whatever the growth: FTS5 resumes a merge it has started.
    """
    if not tidy_due(store, min_new) and not _merge_started(store):
        return False
    return merge_whole(store, stop)


def merge_whole(store: Store, stop: Callable[[], bool]) -> bool:
    """Merge the index step by step into one segment (True) unless `stop()` says to yield.

    A whole index holds no deleted row's terms: a merge drops the rows a segment's
    tombstones name (memory/store/scrub.py relies on it after a user is forgotten).
    """
    while not stop():
        with store.write() as db:
            before = db.total_changes
            db.execute(
                "INSERT INTO chunks_fts (chunks_fts, rank) VALUES ('merge', ?)", (-STEP_PAGES,)
            )
            whole = db.total_changes - before < 2
            if whole:
                db.execute(
                    "INSERT OR REPLACE INTO meta (key, value) "
                    "SELECT ?, coalesce(max(id), 0) FROM chunks",
                    (_MARK,),
                )
                db.execute("DELETE FROM meta WHERE key = ?", (_MARK + ":started",))
            else:
                db.execute(
                    "INSERT OR IGNORE INTO meta (key, value) VALUES (?, '1')",
                    (_MARK + ":started",),
                )
        if whole:
            return True
    return False


def _merge_started(store: Store) -> bool:
    return bool(store.read("SELECT 1 FROM meta WHERE key = ?", (_MARK + ":started",)))
