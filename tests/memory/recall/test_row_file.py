"""memory/recall/row_file.py: float16 rows in a file with no name, read back by position."""

import gc
import os

import numpy as np

from memory.recall.row_file import RowFile


def test_rows_read_back_are_the_float16_rows_at_those_positions():
    rows = np.random.default_rng(1).normal(size=(300, 384)).astype(np.float32)
    file = RowFile(384)
    file.write(0, rows[:200])
    file.write(200, rows[200:])  # appended past the first write
    positions = np.array([299, 0, 17, 17, 200])
    read = file.rows(positions)
    assert read.dtype == np.float32 and read.shape == (5, 384)
    assert np.array_equal(read, rows[positions].astype(np.float16).astype(np.float32))
    assert np.array_equal(file.first(300), rows.astype(np.float16))
    assert file.rows(np.array([], dtype=np.int64)).shape == (0, 384)


def test_the_file_has_no_name_and_is_closed_with_its_rows():
    # Nothing on disk outlives the process, even by kill -9: no name, no recovery.
    file = RowFile(8)
    file.write(0, np.ones((4, 8), dtype=np.float32))
    handle = file._file
    assert os.fstat(handle.fileno()).st_nlink == 0
    del file
    gc.collect()
    assert handle.closed
