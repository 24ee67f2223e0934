"""A user's vectors taken from the store batch by batch (a `RowSink`), for the RAM index.

A user of `HALF_FROM` vectors or more is held as int8 rows, their float16 rows in a file
(memory/recall/vectors.py). Loaded in one piece, the store's float16 matrix (73 MB at 100k
vectors) lived beside the int8 rows it was quantized into (39 MB) until both were done: the
process's peak RSS under load. Here each batch the store reads (up to 4,096 rows) is rounded
to float16, written to the row file and quantized into the preallocated int8 rows, and the
float16 rows' mean (the binary codes' centre) is summed as it goes, so only one batch is
held in floats. What comes out is what the one-piece load gave, bit for bit: the same
float16 rows, int8 rows and mean (summed row after row in float32, as numpy's mean over the
first axis does), and memory/recall/user_matrix.py makes the codes from the file afterwards.

Smaller users are filled into one float32 matrix, as before; so is a large user when the
file cannot be made or written (no writable temporary directory, a full disk): their rows
then stay in RAM as float16, and what the file already held is read back into them.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from memory.recall.int8_rows import Int8Rows, Rows, fill
from memory.recall.row_file import RowFile

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Loaded:
    """A user's ids (ascending) and rows: a float matrix (`file` None), or int8 rows whose
    float16 rows are in `file` and whose mean is `mean`."""

    ids: np.ndarray
    rows: Rows
    mean: np.ndarray | None = None
    file: RowFile | None = None


class RowLoad:
    """Takes a user's rows from the store (`memory.store.vector_table.RowSink`)."""

    def __init__(self, half_from: int) -> None:
        self._half_from = half_from
        self._count = 0
        self._ids = np.empty(0, dtype=np.int64)
        self._rows: Rows = np.empty((0, 0), dtype=np.float32)
        self._file: RowFile | None = None
        self._sum = np.zeros(0, dtype=np.float32)

    def start(self, slots: int, dim: int) -> None:
        self._ids = np.empty(slots, dtype=np.int64)
        if slots < self._half_from:
            self._rows = np.empty((slots, dim), dtype=np.float32)
            return
        try:
            self._file = RowFile(dim)
        except OSError as exc:  # no writable temporary directory
            self._in_ram(exc, dim)
            return
        self._rows = Int8Rows.empty(slots, dim)
        self._sum = np.zeros(dim, dtype=np.float32)

    def add(self, ids: np.ndarray, rows: np.ndarray) -> None:
        start, end = self._count, self._count + len(ids)
        self._ids[start:end] = ids
        self._count = end
        if self._file is None:  # a float matrix
            fill(self._rows, start, rows)
            return
        half = np.asarray(rows).astype(np.float16)
        try:
            self._file.write(start, half)
        except OSError as exc:  # the file cannot grow: the rows so far are read back
            self._in_ram(exc, half.shape[1], start)
            fill(self._rows, start, half)
            return
        wide = half.astype(np.float32)
        fill(self._rows, start, wide)
        # Row after row in float32, as `mean(axis=0, dtype=float32)` sums a float16 matrix.
        self._sum = np.add.reduce(np.concatenate([self._sum[None, :], wide]), axis=0)

    def finish(self) -> Loaded:
        """What was read: ids ascending (sorted when slots were reused out of order)."""
        count, ids, rows = self._count, self._ids[: self._count], self._rows
        ordered = count < 2 or bool(np.all(ids[1:] > ids[:-1]))
        if self._file is None:
            assert isinstance(rows, np.ndarray)  # int8 rows only come with a file
            if not ordered:
                order = np.argsort(ids, kind="stable")
                ids, rows[:count] = ids[order], rows[order]
            return Loaded(ids, rows)
        if not ordered:  # rare: sorted as float16 rows, which user_matrix.py files again
            order = np.argsort(ids, kind="stable")
            return Loaded(ids[order], self._file.first(count)[order])
        mean = np.zeros(self._file.dim, dtype=np.float32)
        if count:  # as numpy's mean divides: by an intp, into float32
            np.true_divide(self._sum, np.intp(count), out=mean, casting="unsafe")
        return Loaded(ids, rows[:count], mean, self._file)

    def _in_ram(self, exc: OSError, dim: int, held: int = 0) -> None:
        """Keep the rows in RAM as float16 from now on (the file's first `held` rows too)."""
        logger.warning("a large user's float16 rows stay in RAM (no file for them): %s", exc)
        rows = np.empty((len(self._ids), dim), dtype=np.float16)
        if self._file is not None and held:
            rows[:held] = self._file.first(held)
        self._rows, self._file = rows, None
