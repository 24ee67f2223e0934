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
from dataclasses import dataclass

import numpy as np

Loader = Callable[[str], tuple[np.ndarray, np.ndarray]]


@dataclass(slots=True)
class _UserMatrix:
    ids: np.ndarray  # int64, capacity-sized
    rows: np.ndarray  # float32 (capacity, dim)
    size: int

    def append(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        needed = self.size + len(ids)
        if needed > len(self.ids):
            capacity = max(needed, 2 * len(self.ids), 64)
            self.ids = np.resize(self.ids, capacity)
            grown = np.zeros((capacity, self.rows.shape[1]), dtype=np.float32)
            grown[: self.size] = self.rows[: self.size]
            self.rows = grown
        self.ids[self.size : needed] = ids
        self.rows[self.size : needed] = vectors
        self.size = needed


class VectorIndex:
    """Exact cosine search over each user's vectors, held in RAM."""

    def __init__(self, loader: Loader) -> None:
        self._loader = loader
        self._users: dict[str, _UserMatrix] = {}
        self._lock = threading.Lock()

    def _matrix(self, user_id: str) -> tuple[np.ndarray, np.ndarray]:
        with self._lock:
            matrix = self._users.get(user_id)
            if matrix is None:
                ids, rows = self._loader(user_id)
                matrix = _UserMatrix(ids, rows, len(ids))
                self._users[user_id] = matrix
            return matrix.ids[: matrix.size], matrix.rows[: matrix.size]

    def similarities(self, user_id: str, query: np.ndarray, ids: list[int]) -> dict[int, float]:
        """Cosines of some of the user's chunks (ids not held are absent)."""
        held, rows = self._matrix(user_id)
        # ids are appended in increasing order, so the held ids are sorted
        wanted = np.asarray(ids, dtype=np.int64)
        positions = np.searchsorted(held, wanted)
        found = positions < len(held)
        found[found] = held[positions[found]] == wanted[found]
        scores = rows[positions[found]] @ query
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
        with self._lock:
            matrix = self._users.get(user_id)
            if matrix is not None and ids:
                matrix.append(np.asarray(ids, dtype=np.int64), vectors.astype(np.float32))

    def drop(self, user_id: str | None = None) -> None:
        """Forget one user's matrix (or all); the next search reloads from SQLite."""
        with self._lock:
            if user_id is None:
                self._users.clear()
            else:
                self._users.pop(user_id, None)

    def loaded_users(self) -> int:
        return len(self._users)
