"""A large user's float16 rows in an unlinked temporary file: their cosines, at no RSS.

A user held in int8 rows (`memory.recall.int8_rows`) is ranked by scores that may be off by
~2e-3, too much for the cosine floors and the gate. Their float16 rows, which were held in
RAM before, are written once to a file with no name (`tempfile.TemporaryFile`: gone when
the process ends, even by kill -9, so there is nothing to recover or verify) and the few rows
whose cosines leave the index are read back with `os.pread`: ~3 us a row from the page cache,
against ~16 us for sqlite-vec's point lookup. The kernel's page cache holds the file, not the
process: it is counted by neither RSS nor the process's heap, and under memory pressure it is
written out and read back from disk instead of the process being killed. The file takes 768
bytes a row in the temporary directory (`TMPDIR`: 73 MB for 100k vectors, 730 MB for 1M); on
a tmpfs it is RAM after all (shared memory, swapped out only).

Rows are addressed by position, in the order of the user's ids; `pread`/`pwrite` take an
offset, so searches read while a newly indexed chunk's row is written past them.
"""

from __future__ import annotations

import os
import tempfile
import weakref

import numpy as np


class RowFile:
    """float16 rows of `dim` components, by position."""

    def __init__(self, dim: int) -> None:
        self._file = tempfile.TemporaryFile(prefix="moim-rows-")
        weakref.finalize(self, self._file.close)  # the user's matrix dropped: the file goes
        self._size = dim * 2  # bytes a row
        self.dim = dim

    def write(self, start: int, rows: np.ndarray) -> None:
        """Rows `start`, `start + 1`, … are `rows` (rounded to float16)."""
        data = np.ascontiguousarray(rows, dtype=np.float16).data.cast("B")
        offset, done = start * self._size, 0
        while done < len(data):  # a write may stop short of a large buffer
            done += os.pwrite(self._file.fileno(), data[done:], offset + done)

    def rows(self, positions: np.ndarray) -> np.ndarray:
        """The rows at these positions, as float32 (n, dim)."""
        fd, size = self._file.fileno(), self._size
        data = b"".join(os.pread(fd, size, int(p) * size) for p in positions)
        return np.frombuffer(data, dtype=np.float16).reshape(-1, self.dim).astype(np.float32)

    def first(self, n: int) -> np.ndarray:
        """Rows 0 … n - 1, as float16 (n, dim): a rare rewrite's input."""
        return self.span(0, n)

    def span(self, start: int, n: int) -> np.ndarray:
        """Rows `start` … `start + n - 1`, as float16 (n, dim)."""
        out = np.empty((n, self.dim), dtype=np.float16)
        view, done, offset = out.data.cast("B"), 0, start * self._size
        while done < len(view):  # a read may stop short of a large buffer
            got = os.preadv(self._file.fileno(), [view[done:]], offset + done)
            if not got:
                raise OSError(f"the row file ends before row {start + n}")
            done += got
        return out
