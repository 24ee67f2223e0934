"""The in-RAM vector index that serves the dense half of recall (CALMem §7.3).

sqlite-vec holds every vector durably; this is a mirror of it, float32 rows per user, loaded
lazily on that user's first recall (one matrix) and appended to in blocks as new chunks are
indexed. It is never the primary store: a crash loses nothing, and startup rebuilds it on
demand. An exact scan of 100k × 384 float32 takes 6–14 ms on one of this project's cores (it
reads 150 MB: memory bandwidth), against ~55 ms for sqlite-vec's KNN, so the hot path scans
RAM.

Past `EXACT_BELOW` vectors a user's search is two-staged: each row also has a binary code,
the signs of the row minus the user's mean vector (48 bytes for 384 dimensions: the scan and
the choice of the nearest are `memory.recall.codes`), and the `RESCORED` rows nearest the
query in Hamming distance are scored exactly; the best k of them are returned with their
exact cosines. The codes of 100k rows are 4.6 MB against the matrix's 150 MB
(docs/performance.md has the timings and the recall of the exact top 80).
Below it every row is scored: small users get exactly what they got before.

Rows are held in float32, but for users of `HALF_FROM` vectors or more: their rows, rounded
to float16, are written to an unlinked temporary file (`memory.recall.row_file`: the
kernel's page cache, not the process's RSS) and held in RAM as int8 rows, a scale each
(`memory.recall.int8_rows`): 39 MB at 100k vectors against float16's 73 and float32's 147.
`MemoryLayer` has the store hand them over a batch at a time (`memory.recall.row_load`), so
a load never holds them all in floats. Their codes are made from the float16 rows,
as before. The `RESCORED` rows are ranked by their int8 scores, which are off by up to ~2e-3:
enough to rank them, not to be read by the cosine floors and the gate. So the best
`k + EXACT_EXTRA` get their cosines from the float16 rows read back from the file, the top k
is cut by those, and `similarities` reads the file too: every cosine that leaves the index is
the one float16 rows gave before (within ~6e-5 of float32's); without a writable temporary
directory, the float16 rows stay in RAM as before. Smaller users stay in float32, so their
exact scan and scores do not change.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

import numpy as np

from memory import heap
from memory.recall.row_load import RowLoad
from memory.recall.scratch import Scratch
from memory.recall.user_matrix import Read, UserMatrix, View, find
from memory.store.vector_table import RowSink

logger = logging.getLogger(__name__)

Loader = Callable[[str], tuple[np.ndarray, np.ndarray]]
# Hands all of a user's vectors to a sink batch by batch (`Store.read_user_vectors`).
BatchReader = Callable[[str, RowSink], None]


@dataclass(slots=True)
class _Load:
    """A user's matrix being read from SQLite, and what was indexed meanwhile."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    added: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)


# Users with fewer vectors are scanned exactly; from here on, binary codes first.
EXACT_BELOW = 20_000
# Rows scored exactly after the Hamming scan (docs/performance.md: recall of the top 80).
RESCORED = 2_000
# Users with at least this many vectors are loaded as float16 rows and held as int8 (see the
# docstring): they are searched by codes, so only the rescored rows are ever read.
HALF_FROM = EXACT_BELOW
# Rows past the k best by int8 scores whose exact cosines are read too, so that a row the
# rounding put just below the cut can still make it (docs/performance.md: measured).
EXACT_EXTRA = 8


def _read_whole(loader: Loader, user_id: str) -> UserMatrix:
    return UserMatrix.loaded(*loader(user_id))


def _read_batches(batches: BatchReader, user_id: str) -> UserMatrix:
    load = RowLoad(HALF_FROM)
    batches(user_id, load)
    matrix = UserMatrix.read(load.finish())
    if matrix.file is not None:  # the store's batches are freed: give the heap back
        heap.trim()  # (100k vectors: 102 -> 89 MB after the load; 1M: 540 -> 470)
    return matrix


class VectorIndex:
    """Exact cosine search over each user's vectors, held in RAM.

    A user's matrix is read from SQLite and made (codes, int8 rows) outside the index's lock:
    a 100k-vector user takes ~1.5 s to load (1M: ~17 s), and other users must not queue
    behind it. Chunks indexed while a load is
    under way are kept aside and appended once it is done (the load may or may not have seen
    them; ids already present are skipped).
    """

    def __init__(self, loader: Loader | None = None, batches: BatchReader | None = None) -> None:
        """Rows come from `loader` in one piece (ids, matrix: float16 rows for a user held in
        int8), or from `batches` a batch at a time, so that a large user's rows are never all
        held in floats (memory/recall/row_load.py); the store's `read_user_vectors`."""
        if batches is not None:
            self._read: Callable[[str], UserMatrix] = partial(_read_batches, batches)
        elif loader is not None:
            self._read = partial(_read_whole, loader)
        else:
            raise TypeError("VectorIndex needs a loader or batches")
        self._users: dict[str, UserMatrix] = {}
        # Users found with no vectors, by id only (`_held`), the oldest let go first: reading
        # that a user has none costs ~2 ms of SQLite (sqlite-vec looks for the partition) on
        # every request of a new user; one empty matrix serves them all.
        self._empty: dict[str, None] = {}
        self._no_rows: UserMatrix | None = None
        self._lock = threading.Lock()
        self._loading: dict[str, _Load] = {}
        self._scratch = Scratch()  # each searching thread's buffers

    def _matrix(self, user_id: str) -> View:
        while True:
            with self._lock:
                matrix = self._users.get(user_id)
                if matrix is None and user_id in self._empty:
                    matrix = self._no_rows
                if matrix is not None:
                    return matrix.view(self._scratch)
                load = self._loading.get(user_id)
                if load is None:
                    load = self._loading[user_id] = _Load()
                    load.lock.acquire()  # this thread loads; others wait on the lock
                    break
            with load.lock:  # another thread is loading this user: wait, then look again
                pass
        try:
            # Codes, int8 rows and the row file are made outside the lock too: seconds at 1M
            # vectors, when every other user's search would have waited on them.
            matrix = self._read(user_id)
            with self._lock:
                for added_ids, vectors in load.added:
                    matrix.append(added_ids, vectors)
                # Held unless dropped meanwhile (then served once); empty, by id only (`_held`)
                if self._loading.get(user_id) is load:
                    if _held(matrix):
                        self._users[user_id] = matrix
                    else:
                        self._note_empty(user_id, matrix)
                return matrix.view(self._scratch)
        finally:
            with self._lock:
                if self._loading.get(user_id) is load:
                    del self._loading[user_id]
            load.lock.release()

    def _note_empty(self, user_id: str, matrix: UserMatrix) -> None:
        """Remember (under the lock) that `user_id` has no vectors, at most `EMPTY_HELD`."""
        if self._no_rows is None:
            self._no_rows = matrix
        if len(self._empty) >= EMPTY_HELD:
            del self._empty[next(iter(self._empty))]  # the oldest
        self._empty[user_id] = None

    def similarities(
        self, user_id: str, query: np.ndarray, ids: list[int], read: Read | None = None
    ) -> dict[int, float]:
        """Cosines of some of the user's chunks (ids not held are absent). A large user's
        rows in `read` (this recall's, see `Read`) are not read again."""
        view = self._matrix(user_id)
        wanted = np.asarray(ids, dtype=np.int64)
        found, positions = find(view.ids, wanted)
        scores = view.cosines_at(positions, query, read) if len(positions) else np.zeros(0)
        return {int(i): float(s) for i, s in zip(wanted[found], scores, strict=True)}

    def vectors(
        self, user_id: str, ids: list[int], read: Read | None = None
    ) -> dict[int, np.ndarray]:
        """The float32 rows of some of the user's chunks (ids not held are absent); a large
        user's rows in `read` are not read again."""
        view = self._matrix(user_id)
        wanted = np.asarray(ids, dtype=np.int64)
        found, positions = find(view.ids, wanted)
        rows = view.rows_at(positions, read) if len(positions) else np.zeros((0, 0), np.float32)
        return {int(i): row for i, row in zip(wanted[found].tolist(), rows, strict=True)}

    def count(self, user_id: str) -> int:
        """How many vectors the user has (loading them on first use)."""
        return len(self._matrix(user_id).ids)

    def search(
        self, user_id: str, query: np.ndarray, k: int, read: Read | None = None
    ) -> list[tuple[int, float]]:
        """(chunk id, cosine) of the k nearest chunks of this user, best first; a large
        user's rows read for the cosines are kept in `read`."""
        view = self._matrix(user_id)
        ids = view.ids
        if len(ids) == 0:
            return []
        if len(ids) < EXACT_BELOW and view.file is None:
            positions, scores = np.arange(len(ids)), view.scores(query)
        else:  # the codes nearest the query, scored from the rows held
            positions = np.sort(view.nearest_codes(query, max(RESCORED, k)))
            scores = view.scores_at(positions, query)
            if view.file is not None:  # int8 scores: the best few get their cosines
                n = min(k + EXACT_EXTRA, len(scores))
                best = np.argpartition(-scores, n - 1)[:n] if n < len(scores) else slice(None)
                positions = np.sort(positions[best])
                scores = view.cosines_at(positions, query, read)
        k = min(k, len(scores))
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.lexsort((positions[top], -scores[top]))]
        return [(int(ids[positions[i]]), float(scores[i])) for i in top]

    def add(self, user_id: str, ids: list[int], vectors: np.ndarray) -> None:
        """Append newly indexed chunks (only if this user's matrix is already loaded)."""
        if not ids:
            return
        pair = (np.asarray(ids, dtype=np.int64), np.asarray(vectors, dtype=np.float32))
        with self._lock:
            self._empty.pop(user_id, None)  # their first vectors: read from the store
            matrix = self._users.get(user_id)
            if matrix is not None:
                try:
                    matrix.append(*pair)
                except OSError as exc:  # the row file cannot grow (a full disk): never stale
                    logger.warning("a user's vectors are reloaded: their row file failed: %s", exc)
                    del self._users[user_id]  # the next search reads them all from the store
            elif user_id in self._loading:
                self._loading[user_id].added.append(pair)

    def drop(self, user_id: str | None = None) -> None:
        """Forget one user's matrix (or all); the next search reloads from SQLite."""
        with self._lock:
            if user_id is None:
                self._users.clear()
                self._loading.clear()
                self._empty.clear()
            else:
                self._users.pop(user_id, None)
                self._loading.pop(user_id, None)
                self._empty.pop(user_id, None)

    def loaded_users(self) -> int:
        return len(self._users)

    def loaded_vectors(self) -> int:
        """Vectors held in RAM, over every loaded user."""
        with self._lock:
            return sum(len(matrix.ids) for matrix in self._users.values())


# Users with no vectors remembered by id (~100 bytes each: ~1 MB at most).
EMPTY_HELD = 10_000


def _held(matrix: UserMatrix) -> bool:
    """Whether a user's loaded matrix is kept: not when it is empty. A request may name any
    user, and each one asked about without memory held ~1-4 kB here for good (a client naming
    a million users: gigabytes); their first vectors are read from the store at the next
    search, as for any user not loaded (`add` leaves them to it)."""
    return len(matrix.ids) > 0
