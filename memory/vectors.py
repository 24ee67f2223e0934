"""The in-RAM vector index that serves the dense half of recall (CALMem §7.3).

sqlite-vec holds every vector durably; this is a mirror of it, one float32 matrix per user,
loaded lazily on that user's first recall and appended to as new chunks are indexed. It is
never the primary store: a crash loses nothing, and startup rebuilds it on demand.
Measured on 2 cores: an exact scan of 100k × 384 float32 takes ~4.4 ms, against ~55 ms for
sqlite-vec's KNN, so the hot path scans RAM.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

Loader = Callable[[str], tuple[np.ndarray, np.ndarray]]


@dataclass(slots=True)
class _Load:
    """A user's matrix being read from SQLite, and what was indexed meanwhile."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    added: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)


@dataclass(slots=True)
class _UserMatrix:
    ids: np.ndarray  # int64, ascending, at least `size` long
    rows: np.ndarray  # float32 (capacity, dim); rows past `size` are spare
    size: int

    def append(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        fresh = ~_find(self.ids[: self.size], ids)[0]
        ids, vectors = ids[fresh], vectors[fresh]
        needed = self.size + len(ids)
        if needed > len(self.rows):
            # Grow by a quarter, not double: at 100k vectors a doubling would add 150 MB.
            capacity = max(needed, len(self.rows) + len(self.rows) // 4, 64)
            grown = np.empty((capacity, self.rows.shape[1]), dtype=np.float32)
            grown[: self.size] = self.rows[: self.size]
            self.rows = grown
        if needed > len(self.ids):
            self.ids = np.resize(self.ids, len(self.rows))
        self.ids[self.size : needed] = ids
        self.rows[self.size : needed] = vectors
        held = self.ids[:needed]
        if not bool(np.all(np.diff(held[max(self.size - 1, 0) :]) > 0)):
            order = np.argsort(held, kind="stable")  # an id reused out of order: rare
            held[:] = held[order]
            self.rows[:needed] = self.rows[order]
        self.size = needed


def _find(held: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Which of `ids` are in the ascending array `held`, and where (binary search, not a
    full scan): (found mask, positions of the found ones)."""
    positions = np.searchsorted(held, ids)
    found = positions < len(held)
    found[found] = held[positions[found]] == ids[found]
    return found, positions[found]


class VectorIndex:
    """Exact cosine search over each user's vectors, held in RAM.

    A user's matrix is read from SQLite outside the index's lock: a 100k-vector user takes
    ~0.5 s to load, and other users must not queue behind it. Chunks indexed while a load is
    under way are kept aside and appended once it is done (the load may or may not have seen
    them; ids already present are skipped).
    """

    def __init__(self, loader: Loader) -> None:
        self._loader = loader
        self._users: dict[str, _UserMatrix] = {}
        self._lock = threading.Lock()
        self._loading: dict[str, _Load] = {}

    def _matrix(self, user_id: str) -> tuple[np.ndarray, np.ndarray]:
        while True:
            with self._lock:
                matrix = self._users.get(user_id)
                if matrix is not None:
                    return matrix.ids[: matrix.size], matrix.rows[: matrix.size]
                load = self._loading.get(user_id)
                if load is None:
                    load = self._loading[user_id] = _Load()
                    load.lock.acquire()  # this thread loads; others wait on the lock
                    break
            with load.lock:  # another thread is loading this user: wait, then look again
                pass
        try:
            ids, rows = self._loader(user_id)
            with self._lock:
                matrix = _UserMatrix(ids, rows, len(ids))
                for added_ids, vectors in load.added:
                    matrix.append(added_ids, vectors)
                if self._loading.get(user_id) is load:  # else dropped meanwhile: serve once
                    self._users[user_id] = matrix
                return matrix.ids[: matrix.size], matrix.rows[: matrix.size]
        finally:
            with self._lock:
                if self._loading.get(user_id) is load:
                    del self._loading[user_id]
            load.lock.release()

    def similarities(self, user_id: str, query: np.ndarray, ids: list[int]) -> dict[int, float]:
        """Cosines of some of the user's chunks (ids not held are absent)."""
        held, rows = self._matrix(user_id)
        wanted = np.asarray(ids, dtype=np.int64)
        found, positions = _find(held, wanted)
        scores = rows[positions] @ query
        return {int(i): float(s) for i, s in zip(wanted[found], scores, strict=True)}

    def count(self, user_id: str) -> int:
        """How many vectors the user has (loading them on first use)."""
        return len(self._matrix(user_id)[0])

    def search(self, user_id: str, query: np.ndarray, k: int) -> list[tuple[int, float]]:
        """(chunk id, cosine) of the k nearest chunks of this user, best first."""
        ids, rows = self._matrix(user_id)
        if len(ids) == 0:
            return []
        scores = rows @ query
        k = min(k, len(scores))
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top])]
        return [(int(ids[i]), float(scores[i])) for i in top]

    def add(self, user_id: str, ids: list[int], vectors: np.ndarray) -> None:
        """Append newly indexed chunks (only if this user's matrix is already loaded)."""
        if not ids:
            return
        pair = (np.asarray(ids, dtype=np.int64), np.asarray(vectors, dtype=np.float32))
        with self._lock:
            matrix = self._users.get(user_id)
            if matrix is not None:
                matrix.append(*pair)
            elif user_id in self._loading:
                self._loading[user_id].added.append(pair)

    def drop(self, user_id: str | None = None) -> None:
        """Forget one user's matrix (or all); the next search reloads from SQLite."""
        with self._lock:
            if user_id is None:
                self._users.clear()
                self._loading.clear()
            else:
                self._users.pop(user_id, None)
                self._loading.pop(user_id, None)

    def loaded_users(self) -> int:
        return len(self._users)
