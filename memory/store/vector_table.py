"""The durable vector table: one sqlite-vec `vec0` table, partitioned by user.

sqlite-vec keeps the vectors in the same database file as the messages they come from, and
answers KNN queries for the low-RAM `vector_search: db` mode. Two of its access paths are slow
for what moim needs, measured at 100k vectors (sqlite-vec 0.1.9):

- `SELECT … WHERE user_id = ?` without a KNN `MATCH` scans every vector of every user (0.6 s
  even for a user with none), and `chunk_id IN (…)` does the same;
- so a user's whole partition — what the RAM matrix is built from — is read from vec0's own
  shadow tables instead: `<table>_chunks` lists the partition's blocks of 16 slots (which
  slots are valid, which chunk id each holds) and `<table>_vector_chunks00` holds each block's
  vectors as one blob. 90k vectors load in ~0.5 s, an empty partition in ~2 ms. If a future
  sqlite-vec lays its shadow tables out differently, the slow query is used instead (and
  tests/memory/store/test_vector_table.py compares the two).

Every function takes the connection to use; `memory.store.store` owns transactions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np
import sqlean

Connection = Any

TABLE = "chunk_vectors"
# Slots per vec0 block: sqlite-vec preallocates one block per partition, so the default 1,024
# made every user cost 1.6 MB on disk.
_BLOCK = 16
_FETCH = 256  # blocks per fetchmany while loading a partition


def create(db: Connection, dim: int) -> None:
    db.execute(
        f"CREATE VIRTUAL TABLE IF NOT EXISTS {TABLE} USING vec0 ("
        "chunk_id INTEGER PRIMARY KEY, user_id TEXT PARTITION KEY, "
        f"embedding FLOAT[{int(dim)}] distance_metric=cosine, chunk_size={_BLOCK})"
    )


def drop(db: Connection) -> None:
    db.execute(f"DROP TABLE IF EXISTS {TABLE}")


def put(db: Connection, chunk_id: int, user_id: str, vector: np.ndarray) -> None:
    db.execute(
        f"INSERT OR REPLACE INTO {TABLE} (chunk_id, user_id, embedding) VALUES (?, ?, ?)",
        (chunk_id, user_id, blob(vector)),
    )


def delete(db: Connection, chunk_ids: Sequence[int]) -> None:
    """Delete by id, one at a time: vec0 scans the whole table for an IN list."""
    for chunk_id in chunk_ids:
        db.execute(f"DELETE FROM {TABLE} WHERE chunk_id = ?", (chunk_id,))


def nearest(db: Connection, user_id: str, vector: np.ndarray, k: int) -> list[tuple[int, float]]:
    """(chunk id, cosine similarity) of the user's k nearest vectors, by sqlite-vec's KNN."""
    rows = db.execute(
        f"SELECT chunk_id, distance FROM {TABLE} WHERE embedding MATCH ? AND k = ? AND user_id = ?",
        (blob(vector), k, user_id),
    ).fetchall()
    return [(row[0], 1.0 - float(row[1])) for row in rows]


def some(db: Connection, user_id: str, chunk_ids: Sequence[int]) -> dict[int, np.ndarray]:
    """The vectors of some of the user's chunks, each looked up by its id."""
    found: dict[int, np.ndarray] = {}
    for chunk_id in chunk_ids:
        row = db.execute(
            f"SELECT user_id, embedding FROM {TABLE} WHERE chunk_id = ?", (chunk_id,)
        ).fetchone()
        if row is not None and row[0] == user_id:
            found[chunk_id] = np.frombuffer(row[1], dtype=np.float32)
    return found


class RowSink(Protocol):
    """Where a user's vectors go as `read_partition` reads them, a batch at a time."""

    def start(self, slots: int, dim: int) -> None:
        """At most `slots` rows of `dim` components follow (called once, first)."""

    def add(self, ids: np.ndarray, rows: np.ndarray) -> None:
        """The next rows (float32) and their chunk ids, in the partition's order."""


def partition(
    db: Connection, user_id: str, dim: int, half_from: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """All of a user's (chunk ids, vectors), ids ascending; the arrays may have spare rows.

    Returns (ids, matrix) where only the first `len(ids)` rows of `matrix` are meaningful:
    the matrix is allocated once at the partition's slot count, which leaves room to append
    without copying 150 MB at 100k vectors. Its rows are float32, or float16 from `half_from`
    rows on (written into it batch by batch: no float32 copy).
    """
    return collect(lambda sink: read_partition(db, user_id, dim, sink), half_from)


def collect(
    read: Callable[[RowSink], None], half_from: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """What `read` hands a sink, as one (ids ascending, matrix) pair: the matrix has the slot
    count `read` announced, float32 rows or float16 from `half_from` rows on (`row_dtype`)."""
    matrix = _Matrix(half_from)
    read(matrix)
    return _ascending(matrix.ids[: matrix.count], matrix.rows, matrix.count)


def read_partition(db: Connection, user_id: str, dim: int, sink: RowSink) -> None:
    """Hand all of a user's vectors to `sink`, a batch of up to `_FETCH` × 16 rows at a time,
    so a caller that keeps them in another form (memory/recall/vectors.py: int8 rows) never
    holds them all as floats. Ids come in the partition's order: ascending, unless slots were
    reused out of order. The fast read counts the partition's slots, its vectors and the
    free slots of its 16-slot blocks."""
    try:
        _read_shadow(db, user_id, dim, sink)
    except sqlean.OperationalError as exc:  # "no such table/column": another layout
        if "no such" not in str(exc):
            raise
        _read_scan(db, user_id, dim, sink)


def row_dtype(count: int, half_from: int | None) -> type[np.floating[Any]]:
    """float16 for `count` rows at or past `half_from` (None: never), else float32."""
    return np.float16 if half_from is not None and count >= half_from else np.float32


class _Matrix:
    """A `RowSink` that fills one matrix of the announced slot count (`collect`)."""

    def __init__(self, half_from: int | None) -> None:
        self.half_from, self.count = half_from, 0
        self.ids, self.rows = np.empty(0, dtype=np.int64), np.empty((0, 0), dtype=np.float32)

    def start(self, slots: int, dim: int) -> None:
        self.ids = np.empty(slots, dtype=np.int64)
        self.rows = np.empty((slots, dim), dtype=row_dtype(slots, self.half_from))

    def add(self, ids: np.ndarray, rows: np.ndarray) -> None:
        self.ids[self.count : self.count + len(ids)] = ids
        self.rows[self.count : self.count + len(ids)] = rows
        self.count += len(ids)


def _read_shadow(db: Connection, user_id: str, dim: int, sink: RowSink) -> None:
    slots = db.execute(
        f"SELECT coalesce(sum(size), 0) FROM {TABLE}_chunks WHERE partition00 = ?", (user_id,)
    ).fetchone()[0]
    sink.start(slots, dim)
    cursor = db.execute(
        f"SELECT c.size, c.validity, c.rowids, v.vectors FROM {TABLE}_chunks AS c "
        f"JOIN {TABLE}_vector_chunks00 AS v ON v.rowid = c.chunk_id "
        "WHERE c.partition00 = ? ORDER BY c.chunk_id",
        (user_id,),
    )
    while blocks := cursor.fetchmany(_FETCH):
        ids = np.empty(sum(block[0] for block in blocks), dtype=np.int64)  # slots
        rows = np.empty((len(ids), dim), dtype=np.float32)
        count = 0
        for size, validity, rowids, vectors in blocks:
            valid = np.unpackbits(np.frombuffer(validity, np.uint8), bitorder="little")
            valid = valid[:size].astype(bool)
            held = int(valid.sum())
            ids[count : count + held] = np.frombuffer(rowids, np.int64)[:size][valid]
            block = np.frombuffer(vectors, np.float32)[: size * dim].reshape(size, dim)
            rows[count : count + held] = block[valid]
            count += held
        sink.add(ids[:count], rows[:count])


def _read_scan(db: Connection, user_id: str, dim: int, sink: RowSink) -> None:
    rows = db.execute(
        f"SELECT chunk_id, embedding FROM {TABLE} WHERE user_id = ? ORDER BY chunk_id",
        (user_id,),
    ).fetchall()
    sink.start(len(rows), dim)
    for start in range(0, len(rows), _FETCH * _BLOCK):
        part = rows[start : start + _FETCH * _BLOCK]
        ids = np.fromiter((r[0] for r in part), dtype=np.int64, count=len(part))
        vectors = np.empty((len(part), dim), dtype=np.float32)
        for position, row in enumerate(part):
            vectors[position] = np.frombuffer(row[1], dtype=np.float32)
        sink.add(ids, vectors)


def _ascending(ids: np.ndarray, matrix: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
    """Sort by id when slots were reused out of order (binary search needs sorted ids)."""
    if count < 2 or bool(np.all(ids[1:] > ids[:-1])):
        return ids, matrix
    order = np.argsort(ids, kind="stable")
    matrix[:count] = matrix[order]
    return ids[order], matrix


def blob(vector: np.ndarray) -> bytes:
    return np.ascontiguousarray(vector, dtype=np.float32).tobytes()
