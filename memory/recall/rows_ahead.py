"""A large user's rows of the lexical hits, read while the recall's thread scans the vectors.

The lexical-only candidates' cosines need their float16 rows, read from the user's row file
(`memory.recall.row_file`: ~3 us a row). Read after the dense search, on the recall's thread,
they were ~0.3 ms of its critical path; read on the lexical side while the question is
embedded, they slowed the embedding at 100k chunks (the two threads shared two busy cores). So
they are read on the lexical pool once the question is embedded, while the recall's thread
scans the codes, if the lexical side is done by then; otherwise, or when the pool has not
started the read by the time the scan ends, the recall's thread reads what it needs itself,
as before. The rows are the file's either way (`memory.recall.user_matrix.Read`).
"""

from __future__ import annotations

from concurrent.futures import Executor, Future

from memory.recall.user_matrix import Read
from memory.recall.vectors import VectorIndex


def begin(pool: Executor, index: VectorIndex, user_id: str, ids: list[int]) -> Future[Read]:
    """Read the user's rows of these chunks on `pool` (none for a user held in float32)."""
    return pool.submit(_rows_of, index, user_id, ids)


def rows_read(ahead: Future[Read] | None) -> Read:
    """The rows read ahead; none when that read has not started (cancelled then)."""
    if ahead is None or (not ahead.done() and ahead.cancel()):
        return {}
    return ahead.result()  # done, or being read now (~0.2 ms)


def _rows_of(index: VectorIndex, user_id: str, ids: list[int]) -> Read:
    read: Read = {}
    index.read_ahead(user_id, ids, read)
    return read
