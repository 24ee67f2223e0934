"""Arrays a thread's searches write into, kept from one search to the next.

A large user's search makes megabytes of temporaries: at 1M rows a distance per row (2 MB),
each word's xor (8 MB), the rescored rows cast to float32 (3 MB). Recall runs on worker
threads, and glibc gives a worker thread an arena that hands freed memory back to the kernel,
so each search faulted its temporaries in again: ~13k page faults a search at 1M, ~750 at
100k, which cost 25-50 ms and ~3 ms in a server (the same search on the main thread, whose
heap keeps freed memory: ~6 and ~2 ms, no faults). docs/performance.md, "Dense: the 1M
user's codes (fifth pass)", has the measurements.

Each thread keeps its own arrays (`threading.local`): about 3 bytes a row of the largest user
it searched, and a few fixed buffers under 1 MB.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np


class Scratch(threading.local):
    """Named arrays, per thread, grown as needed and reused."""

    def __init__(self) -> None:
        self._held: dict[str, np.ndarray] = {}

    def array(self, name: str, n: int, dtype: Any) -> np.ndarray:
        """The first `n` elements of this thread's array `name` (contents left over)."""
        held = self._held.get(name)
        if held is None or len(held) < n or held.dtype != dtype:
            held = self._held[name] = np.empty(n + n // 8, dtype=dtype)  # room to grow
        return held[:n]

    def rows(self, name: str, n: int, dim: int, dtype: Any) -> np.ndarray:
        """`n` rows of `dim` from this thread's array `name`."""
        return self.array(name, n * dim, dtype).reshape(n, dim)
