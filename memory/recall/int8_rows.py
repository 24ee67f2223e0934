"""Rows of a large user's vector matrix as int8, one scale per row: a quarter of float32's RAM.

A user past `memory.recall.vectors.HALF_FROM` vectors is searched by binary codes, and only
the 2,000 rows nearest in Hamming distance are scored. Those scores only have to pick the best
few: each row is held as 384 int8 components and one float32 scale (388 bytes against
float16's 768: 39 MB at 100k vectors, 388 MB at 1M). A component is `round(x / scale)` with
`scale = max|x| / 127`, so it is off by at most half a step; on real MiniLM vectors a cosine
moves by 3e-4 on average and up to 2.3e-3. That is enough to rank 2,000 candidates, not to be
read by the cosine floors and the gate (thresholds a few hundredths apart): the rows that are
returned get their exact cosines from the store (`memory.recall.vectors.VectorIndex`).

The rows are one numpy structured array (`row_type`), so the store's loader can fill it block
by block and hand it over as it does float32 rows; `ints` and `scales` are views of it.
"""

from __future__ import annotations

import numpy as np

_STEPS = 127


def row_type(dim: int) -> np.dtype[np.void]:
    """A row: `dim` int8 components ("q") and their scale ("scale")."""
    return np.dtype([("q", np.int8, (dim,)), ("scale", np.float32)])


def is_int8(rows: np.ndarray) -> bool:
    """True for an array of `row_type` rows."""
    return rows.dtype.names == ("q", "scale")


def width(rows: np.ndarray) -> int:
    """Dimensions of a row, for int8 rows and float matrices alike."""
    return int(rows.dtype["q"].shape[0]) if is_int8(rows) else int(rows.shape[1])


def fill(rows: np.ndarray, start: int, vectors: np.ndarray) -> None:
    """Write float `vectors` into `rows[start:]`, quantized when `rows` are int8 rows."""
    end = start + len(vectors)
    if not is_int8(rows):
        rows[start:end] = vectors
        return
    vectors = np.asarray(vectors, dtype=np.float32)
    peak = np.abs(vectors).max(axis=1) if vectors.size else np.zeros(len(vectors), np.float32)
    scale = np.where(peak > 0, peak / _STEPS, 1.0).astype(np.float32)
    rows["scale"][start:end] = scale
    rows["q"][start:end] = np.rint(vectors / scale[:, None])


def floats(rows: np.ndarray) -> np.ndarray:
    """`rows` as float32 (approximate for int8 rows: each component within half a step)."""
    if not is_int8(rows):
        return np.asarray(rows, dtype=np.float32)
    out: np.ndarray = rows["q"].astype(np.float32)
    out *= rows["scale"][:, None]
    return out


def dots(rows: np.ndarray, query: np.ndarray) -> np.ndarray:
    """`floats(rows) @ query` without scaling the matrix: each row's sum is scaled once."""
    if not is_int8(rows):
        product: np.ndarray = np.asarray(rows, dtype=np.float32) @ query
        return product
    scores: np.ndarray = rows["q"].astype(np.float32) @ query
    scores *= rows["scale"]
    return scores
