"""A user's vectors as `VectorIndex` holds them (`memory.recall.vectors` says why so).

`UserMatrix` is what is kept per user: the chunk ids, the rows (float32, or int8 with the
float16 rows in a file), their binary codes, grown block by block as chunks are indexed.
`View` is what one search reads of it, taken under the index's lock; later appends never
change a view.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from memory.recall.codes import binary_codes, nearest
from memory.recall.int8_rows import CAST_ROWS, Int8Rows, Rows, dots, dots_at, fill, floats, width
from memory.recall.row_file import RowFile
from memory.recall.row_load import Loaded
from memory.recall.scratch import Scratch

logger = logging.getLogger(__name__)

# The float16 rows one recall read from a large user's file, by chunk id (as float32): the
# dense search's and the lexical-only candidates' cosines' rows are not read again for the
# later turns on the kept hits' subjects (memory/recall/later.py: ~160 rows, 0.3-0.5 ms).
Read = dict[int, np.ndarray]

# Rows per block appended after a user's load. Growing never copies the loaded matrix: at
# 100k vectors a copy meant a 150 MB spike, and growing by a quarter kept up to 38 MB spare.
BLOCK_ROWS = 4096


@dataclass(slots=True)
class UserMatrix:
    """A user's chunk ids (ascending) and vectors: the matrix read at load, then blocks of
    `BLOCK_ROWS` appended rows; every block is full but the last, whose rows past the
    number of ids are spare."""

    ids: np.ndarray  # int64, ascending, one per row held
    blocks: list[Rows]  # float32 (n, dim) or int8 rows, in the order of `ids`
    mean: np.ndarray  # the loaded rows' mean: codes are the signs of a row minus it
    codes: list[np.ndarray]  # uint64 (words, n) per block: column j is row j's code
    file: RowFile | None = None  # int8 blocks: the float16 rows, by position

    @classmethod
    def loaded(cls, ids: np.ndarray, rows: np.ndarray) -> UserMatrix:
        """A user's matrix from the loader's rows: float16 ones go to a file and to int8."""
        rows, ids = rows[: len(ids)], np.asarray(ids, dtype=np.int64)
        mean = _mean(rows)
        if rows.dtype == np.float16:
            try:
                file = RowFile(rows.shape[1])
                file.write(0, rows)
            except OSError as exc:  # no writable temporary directory, or it is full
                logger.warning("a large user's float16 rows stay in RAM (no file): %s", exc)
            else:
                held, codes = _int8_and_codes(rows, mean)
                return cls(ids, [held], mean, [codes], file)
        return cls(ids, [rows], mean, [binary_codes(rows, mean)])

    @classmethod
    def read(cls, loaded: Loaded) -> UserMatrix:
        """A user's matrix from a batch-by-batch load (memory/recall/row_load.py): int8 rows
        get their codes from the file's float16 rows, a block at a time."""
        if loaded.file is None or loaded.mean is None:
            return cls.loaded(loaded.ids, np.asarray(loaded.rows))
        n, file = len(loaded.ids), loaded.file
        codes = np.empty((-(-file.dim // 64), n), dtype=np.uint64)
        for start in range(0, n, CAST_ROWS):
            rows = file.span(start, min(CAST_ROWS, n - start))
            codes[:, start : start + len(rows)] = binary_codes(rows, loaded.mean)
        return cls(loaded.ids, [loaded.rows], loaded.mean, [codes], file)

    def filled(self) -> list[tuple[Rows, np.ndarray]]:
        """Each block's rows that hold vectors and their codes, in order."""
        out, left = [], len(self.ids)
        for block, codes in zip(self.blocks, self.codes, strict=True):
            take = min(len(block), left)
            out.append((block[:take], codes[:, :take]))
            left -= take
        return out

    def view(self, scratch: Scratch) -> View:
        """What a search reads, taken under the index's lock: later appends write past it
        (spare rows, new blocks, a new ids array) and never change it."""
        held = [(block, codes) for block, codes in self.filled() if len(block)]
        return View(
            self.ids,
            tuple(block for block, _ in held),
            tuple(codes for _, codes in held),
            self.mean,
            self.file,
            scratch,
        )

    def append(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        fresh = ~find(self.ids, ids)[0]
        ids, vectors = ids[fresh], vectors[fresh]
        if not len(ids):
            return
        if (len(self.ids) and ids.min() <= self.ids[-1]) or not bool(np.all(np.diff(ids) > 0)):
            self._merge_sorted(ids, vectors)  # an id reused out of order: rare
            return
        row = len(self.ids)  # where the first new vector goes, counting over all blocks
        capacity = sum(len(block) for block in self.blocks)
        done = 0
        while done < len(ids):
            if row == capacity:  # the loaded matrix is never written into: it is full
                self.blocks.append(_empty(self.blocks[0], BLOCK_ROWS))
                self.codes.append(np.empty((self.codes[0].shape[0], BLOCK_ROWS), np.uint64))
                capacity += BLOCK_ROWS
            last = self.blocks[-1]
            offset = row - (capacity - len(last))
            take = min(len(ids) - done, len(last) - offset)
            fill(last, offset, vectors[done : done + take])
            if self.file is not None:
                self.file.write(row, vectors[done : done + take])
            self.codes[-1][:, offset : offset + take] = binary_codes(
                last[offset : offset + take], self.mean
            )
            done += take
            row += take
        self.ids = np.concatenate([self.ids, ids])

    def _merge_sorted(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        held = np.concatenate([self.ids, ids])
        order = np.argsort(held, kind="stable")
        if self.file is None:  # float rows
            old = [np.asarray(block) for block, _ in self.filled()]
            rows = np.concatenate([*old, vectors.astype(old[0].dtype)])[order]
            self.ids, self.blocks, self.codes = held[order], [rows], [binary_codes(rows, self.mean)]
            return
        half = np.concatenate([self.file.first(len(self.ids)), vectors.astype(np.float16)])
        half = half[order]
        self.file = RowFile(half.shape[1])  # views taken before keep reading the old one
        self.file.write(0, half)
        quantized, codes = _int8_and_codes(half, self.mean)
        self.ids, self.blocks, self.codes = held[order], [quantized], [codes]


@dataclass(frozen=True, slots=True)
class View:
    """A user's ids and vector blocks at one moment."""

    ids: np.ndarray
    blocks: tuple[Rows, ...]
    codes: tuple[np.ndarray, ...]
    mean: np.ndarray
    file: RowFile | None
    scratch: Scratch  # the searching thread's buffers

    def nearest_codes(self, query: np.ndarray, n: int) -> np.ndarray:
        """Positions of the `n` rows whose codes are nearest the query's (Hamming)."""
        code = binary_codes(query[None, :], self.mean)[:, 0]
        return nearest(self.codes, code, n, self.scratch)

    def scores(self, query: np.ndarray) -> np.ndarray:
        """Cosine of every row with `query` (rows and query are unit vectors)."""
        if not self.blocks:
            return np.zeros(0, dtype=np.float32)
        scores: np.ndarray = (
            _dot(self.blocks[0], query)
            if len(self.blocks) == 1
            else np.concatenate([_dot(block, query) for block in self.blocks])
        )
        return scores

    def rows_at(self, positions: np.ndarray, read: Read | None = None) -> np.ndarray:
        """The rows at these positions (in the order of `ids`) as float32: an int8 user's
        are read from the file of their float16 rows (those in `read` are not read again)."""
        if self.file is not None:
            return self._file_rows(self.file, positions, read)
        out = np.empty((len(positions), width(self.blocks[0])), dtype=np.float32)
        return self._by_block(positions, out, lambda block, at: floats(block[at]))

    def cosines_at(
        self, positions: np.ndarray, query: np.ndarray, read: Read | None = None
    ) -> np.ndarray:
        """What `scores_at` gives, but from the float16 rows when the rows are int8 (those
        in `read` not read again, the ones read kept there)."""
        if self.file is None:
            return self.scores_at(positions, query)
        product: np.ndarray = self._file_rows(self.file, positions, read) @ query
        return product

    def _file_rows(self, file: RowFile, positions: np.ndarray, read: Read | None) -> np.ndarray:
        """The float16 file's rows at these positions as float32, those already in `read`
        taken from it and the others read and added to it. The same matrix either way, so
        a product with it gives the same floats (a subset's would not: BLAS sums a row
        differently by its place in the matrix)."""
        if read is None:
            return file.rows(positions)
        ids = self.ids[positions].tolist()
        unread = [at for at, chunk_id in enumerate(ids) if chunk_id not in read]
        if len(unread) == len(ids):
            rows = file.rows(positions)
            read.update(zip(ids, rows, strict=True))
            return rows
        if unread:
            fresh = file.rows(positions[unread])
            read.update(zip([ids[at] for at in unread], fresh, strict=True))
        return np.stack([read[chunk_id] for chunk_id in ids])

    def scores_at(self, positions: np.ndarray, query: np.ndarray) -> np.ndarray:
        """Cosines of the rows at these positions (in the order of `ids`) with `query`."""

        def read(block: Rows, at: np.ndarray) -> np.ndarray:
            if isinstance(block, Int8Rows):  # into this thread's buffers: see `Scratch`
                return dots_at(block, at, query, self.scratch)
            return dots(block[at], query)

        if len(self.blocks) == 1:
            return read(self.blocks[0], positions)
        return self._by_block(positions, np.empty(len(positions), dtype=np.float32), read)

    def _by_block(
        self,
        positions: np.ndarray,
        out: np.ndarray,
        read: Callable[[Rows, np.ndarray], np.ndarray],
    ) -> np.ndarray:
        """`out`, each entry `read` from a block and the positions in it (over every block)."""
        start = 0
        for block in self.blocks:
            inside = (positions >= start) & (positions < start + len(block))
            out[inside] = read(block, positions[inside] - start)
            start += len(block)
        return out


def _dot(rows: Rows, query: np.ndarray) -> np.ndarray:
    """`rows @ query` in float32; int8 rows are cast a slice at a time (a whole cast would
    copy the matrix in float32, the very memory int8 saves)."""
    if not isinstance(rows, Int8Rows):
        product: np.ndarray = rows @ query
        return product
    out = np.empty(len(rows), dtype=np.float32)
    for start in range(0, len(rows), CAST_ROWS):
        part = rows[start : start + CAST_ROWS]
        out[start : start + len(part)] = dots(part, query)
    return out


def _int8_and_codes(rows: np.ndarray, mean: np.ndarray) -> tuple[Int8Rows, np.ndarray]:
    """Float rows as int8 rows, and their codes, from one cast to float32 `CAST_ROWS` rows at
    a time (no float32 copy of all; casting float16 is most of the work: ~1 s a pass at 1M)."""
    held = Int8Rows.empty(len(rows), rows.shape[1])
    codes = np.empty((-(-rows.shape[1] // 64), len(rows)), dtype=np.uint64)
    for start in range(0, len(rows), CAST_ROWS):
        part = rows[start : start + CAST_ROWS].astype(np.float32)
        fill(held, start, part)
        codes[:, start : start + len(part)] = binary_codes(part, mean)
    return held, codes


def _mean(rows: np.ndarray) -> np.ndarray:
    """The mean of the rows (zeros for none): the codes are the signs of a row minus it."""
    if not len(rows):
        return np.zeros(rows.shape[1], dtype=np.float32)
    mean: np.ndarray = rows.mean(axis=0, dtype=np.float32)
    return mean


def _empty(like: Rows, n: int) -> Rows:
    """`n` unwritten rows of the kind of `like` (int8 rows or a float matrix)."""
    if isinstance(like, Int8Rows):
        return Int8Rows.empty(n, width(like))
    return np.empty((n, like.shape[1]), dtype=like.dtype)


def find(held: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Which of `ids` are in the ascending array `held`, and where (binary search, not a
    full scan): (found mask, positions of the found ones)."""
    positions = np.searchsorted(held, ids)
    found = positions < len(held)
    found[found] = held[positions[found]] == ids[found]
    return found, positions[found]
