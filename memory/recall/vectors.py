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
from memory.recall.codes import binary_codes, nearest
from memory.recall.int8_rows import Int8Rows, Rows, dots, dots_at, fill, floats, width
from memory.recall.row_file import RowFile
from memory.recall.row_load import Loaded, RowLoad
from memory.recall.scratch import Scratch
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
# Rows cast to float32 at a time when an int8 matrix is read whole (codes, a scan).
_CAST_ROWS = 4096

# Rows per block appended after a user's load. Growing never copies the loaded matrix: at
# 100k vectors a copy meant a 150 MB spike, and growing by a quarter kept up to 38 MB spare.
_BLOCK_ROWS = 4096


@dataclass(slots=True)
class _UserMatrix:
    """A user's chunk ids (ascending) and vectors: the matrix read at load, then blocks of
    `_BLOCK_ROWS` appended rows; every block is full but the last, whose rows past the
    number of ids are spare."""

    ids: np.ndarray  # int64, ascending, one per row held
    blocks: list[Rows]  # float32 (n, dim) or int8 rows, in the order of `ids`
    mean: np.ndarray  # the loaded rows' mean: codes are the signs of a row minus it
    codes: list[np.ndarray]  # uint64 (words, n) per block: column j is row j's code
    file: RowFile | None = None  # int8 blocks: the float16 rows, by position

    @classmethod
    def loaded(cls, ids: np.ndarray, rows: np.ndarray) -> _UserMatrix:
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
    def read(cls, loaded: Loaded) -> _UserMatrix:
        """A user's matrix from a batch-by-batch load (memory/recall/row_load.py): int8 rows
        get their codes from the file's float16 rows, a block at a time."""
        if loaded.file is None or loaded.mean is None:
            return cls.loaded(loaded.ids, np.asarray(loaded.rows))
        n, file = len(loaded.ids), loaded.file
        codes = np.empty((-(-file.dim // 64), n), dtype=np.uint64)
        for start in range(0, n, _CAST_ROWS):
            rows = file.span(start, min(_CAST_ROWS, n - start))
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

    def view(self, scratch: Scratch) -> _View:
        """What a search reads, taken under the index's lock: later appends write past it
        (spare rows, new blocks, a new ids array) and never change it."""
        held = [(block, codes) for block, codes in self.filled() if len(block)]
        return _View(
            self.ids,
            tuple(block for block, _ in held),
            tuple(codes for _, codes in held),
            self.mean,
            self.file,
            scratch,
        )

    def append(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        fresh = ~_find(self.ids, ids)[0]
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
                self.blocks.append(_empty(self.blocks[0], _BLOCK_ROWS))
                self.codes.append(np.empty((self.codes[0].shape[0], _BLOCK_ROWS), np.uint64))
                capacity += _BLOCK_ROWS
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
class _View:
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

    def rows_at(self, positions: np.ndarray) -> np.ndarray:
        """The rows at these positions (in the order of `ids`) as float32: an int8 user's
        are read from the file of their float16 rows."""
        if self.file is not None:
            return self.file.rows(positions)
        out = np.empty((len(positions), width(self.blocks[0])), dtype=np.float32)
        return self._by_block(positions, out, lambda block, at: floats(block[at]))

    def cosines_at(self, positions: np.ndarray, query: np.ndarray) -> np.ndarray:
        """What `scores_at` gives, but read from the float16 rows when the rows are int8."""
        if self.file is None:
            return self.scores_at(positions, query)
        product: np.ndarray = self.file.rows(positions) @ query
        return product

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
    for start in range(0, len(rows), _CAST_ROWS):
        part = rows[start : start + _CAST_ROWS]
        out[start : start + len(part)] = dots(part, query)
    return out


def _int8_and_codes(rows: np.ndarray, mean: np.ndarray) -> tuple[Int8Rows, np.ndarray]:
    """Float rows as int8 rows, and their codes, from one cast to float32 `_CAST_ROWS` rows at
    a time (no float32 copy of all; casting float16 is most of the work: ~1 s a pass at 1M)."""
    held = Int8Rows.empty(len(rows), rows.shape[1])
    codes = np.empty((-(-rows.shape[1] // 64), len(rows)), dtype=np.uint64)
    for start in range(0, len(rows), _CAST_ROWS):
        part = rows[start : start + _CAST_ROWS].astype(np.float32)
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


def _find(held: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Which of `ids` are in the ascending array `held`, and where (binary search, not a
    full scan): (found mask, positions of the found ones)."""
    positions = np.searchsorted(held, ids)
    found = positions < len(held)
    found[found] = held[positions[found]] == ids[found]
    return found, positions[found]


def _read_whole(loader: Loader, user_id: str) -> _UserMatrix:
    return _UserMatrix.loaded(*loader(user_id))


def _read_batches(batches: BatchReader, user_id: str) -> _UserMatrix:
    load = RowLoad(HALF_FROM)
    batches(user_id, load)
    matrix = _UserMatrix.read(load.finish())
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
            self._read: Callable[[str], _UserMatrix] = partial(_read_batches, batches)
        elif loader is not None:
            self._read = partial(_read_whole, loader)
        else:
            raise TypeError("VectorIndex needs a loader or batches")
        self._users: dict[str, _UserMatrix] = {}
        self._lock = threading.Lock()
        self._loading: dict[str, _Load] = {}
        self._scratch = Scratch()  # each searching thread's buffers

    def _matrix(self, user_id: str) -> _View:
        while True:
            with self._lock:
                matrix = self._users.get(user_id)
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
                if self._loading.get(user_id) is load:  # else dropped meanwhile: serve once
                    self._users[user_id] = matrix
                return matrix.view(self._scratch)
        finally:
            with self._lock:
                if self._loading.get(user_id) is load:
                    del self._loading[user_id]
            load.lock.release()

    def similarities(self, user_id: str, query: np.ndarray, ids: list[int]) -> dict[int, float]:
        """Cosines of some of the user's chunks (ids not held are absent)."""
        view = self._matrix(user_id)
        wanted = np.asarray(ids, dtype=np.int64)
        found, positions = _find(view.ids, wanted)
        scores = view.cosines_at(positions, query) if len(positions) else np.zeros(0)
        return {int(i): float(s) for i, s in zip(wanted[found], scores, strict=True)}

    def vectors(self, user_id: str, ids: list[int]) -> dict[int, np.ndarray]:
        """The float32 rows of some of the user's chunks (ids not held are absent)."""
        view = self._matrix(user_id)
        wanted = np.asarray(ids, dtype=np.int64)
        found, positions = _find(view.ids, wanted)
        rows = view.rows_at(positions) if len(positions) else np.zeros((0, 0), np.float32)
        return {int(i): row for i, row in zip(wanted[found].tolist(), rows, strict=True)}

    def count(self, user_id: str) -> int:
        """How many vectors the user has (loading them on first use)."""
        return len(self._matrix(user_id).ids)

    def search(self, user_id: str, query: np.ndarray, k: int) -> list[tuple[int, float]]:
        """(chunk id, cosine) of the k nearest chunks of this user, best first."""
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
                scores = view.cosines_at(positions, query)
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
            else:
                self._users.pop(user_id, None)
                self._loading.pop(user_id, None)

    def loaded_users(self) -> int:
        return len(self._users)

    def loaded_vectors(self) -> int:
        """Vectors held in RAM, over every loaded user."""
        with self._lock:
            return sum(len(matrix.ids) for matrix in self._users.values())
