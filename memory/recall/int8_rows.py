"""Rows of a large user's vector matrix as int8, one scale per row: a quarter of float32's RAM.

A user past `memory.recall.vectors.HALF_FROM` vectors is searched by binary codes, and only
the 2,000 rows nearest in Hamming distance are scored. Those scores only have to pick the best
few: each row is held as 384 int8 components and one float32 scale (388 bytes against
float16's 768: 39 MB at 100k vectors, 388 MB at 1M). A component is `round(x / scale)` with
`scale = max|x| / 127`, so it is off by at most half a step; on real MiniLM vectors a cosine
moves by 3e-4 on average and up to 2.3e-3. That is enough to rank 2,000 candidates, not to be
read by the cosine floors and the gate (thresholds a few hundredths apart): the rows that are
returned get their cosines from the user's float16 rows, kept out of RAM in a file
(`memory.recall.row_file`, read by `memory.recall.vectors.VectorIndex`).

The rows are two arrays, the components (n, dim) and the scales (n,), each contiguous: the
2,000 rows a search scores are gathered from the first in 0.2 ms at 100k (a structured array
of 388-byte records took 0.4).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from memory.embedding import int8_rows
from memory.recall.scratch import Scratch

_STEPS = 127
# Rows cast to float32 at a time when many are read (codes, a scan, a load): a slice, never
# a float32 copy of them all (for int8 rows, the very memory int8 saves).
CAST_ROWS = 4096
# Rescored rows gathered and cast at a time (buffers of 100 KB of int8, 400 KB of float32).
_GATHER_ROWS = 256


@dataclass(frozen=True, slots=True)
class Int8Rows:
    """Rows as int8 components and a float32 scale each: row i is `q[i] * scale[i]`."""

    q: np.ndarray  # int8 (n, dim)
    scale: np.ndarray  # float32 (n,)

    @classmethod
    def empty(cls, n: int, dim: int) -> Int8Rows:
        return cls(np.empty((n, dim), dtype=np.int8), np.empty(n, dtype=np.float32))

    def __len__(self) -> int:
        return len(self.scale)

    def __getitem__(self, index: Any) -> Int8Rows:
        return Int8Rows(self.q[index], self.scale[index])

    @property
    def nbytes(self) -> int:
        return int(self.q.nbytes + self.scale.nbytes)


Rows = np.ndarray | Int8Rows  # a float matrix (n, dim) or int8 rows


def is_int8(rows: Rows) -> bool:
    return isinstance(rows, Int8Rows)


def width(rows: Rows) -> int:
    """Dimensions of a row, for int8 rows and float matrices alike."""
    return int(rows.q.shape[1] if isinstance(rows, Int8Rows) else rows.shape[1])


def fill(rows: Rows, start: int, vectors: np.ndarray) -> None:
    """Write float `vectors` into `rows[start:]`, quantized when `rows` are int8 rows."""
    end = start + len(vectors)
    if not isinstance(rows, Int8Rows):
        rows[start:end] = vectors
        return
    vectors = np.asarray(vectors, dtype=np.float32)
    if not len(vectors):
        return
    peak = np.abs(vectors).max(axis=1)
    rows.scale[start:end] = np.where(peak > 0, peak / _STEPS, 1.0)
    rows.q[start:end] = int8_rows(vectors)  # as the vocabulary's word vectors are stored


def floats(rows: Rows) -> np.ndarray:
    """`rows` as float32 (approximate for int8 rows: each component within half a step)."""
    if not isinstance(rows, Int8Rows):
        return np.asarray(rows, dtype=np.float32)
    out: np.ndarray = rows.q.astype(np.float32)
    out *= rows.scale[:, None]
    return out


def dots_at(
    rows: Int8Rows, positions: np.ndarray, query: np.ndarray, scratch: Scratch
) -> np.ndarray:
    """`dots(rows[positions], query)`, gathered and cast `_GATHER_ROWS` rows at a time into
    this thread's buffers (`memory.recall.scratch`: no temporaries to fault in)."""
    out = np.empty(len(positions), dtype=np.float32)
    dim = rows.q.shape[1]
    for start in range(0, len(positions), _GATHER_ROWS):
        part = positions[start : start + _GATHER_ROWS]
        held = np.take(rows.q, part, axis=0, out=scratch.rows("int8", len(part), dim, np.int8))
        cast = scratch.rows("float32", len(part), dim, np.float32)
        np.copyto(cast, held)
        np.matmul(cast, query, out=out[start : start + len(part)])
    out *= rows.scale[positions]
    return out


def dots(rows: Rows, query: np.ndarray) -> np.ndarray:
    """`floats(rows) @ query` without scaling the matrix: each row's sum is scaled once."""
    if not isinstance(rows, Int8Rows):
        product: np.ndarray = np.asarray(rows, dtype=np.float32) @ query
        return product
    scores: np.ndarray = rows.q.astype(np.float32) @ query
    scores *= rows.scale
    return scores
