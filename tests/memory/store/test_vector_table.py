"""The vector table's fast partition read agrees with sqlite-vec's own (slow) answer.

`vector_table.partition` reads vec0's shadow tables directly; if a sqlite-vec release lays
them out differently these tests fail before a user's recall silently does.
"""

import numpy as np
import pytest

from memory.store import vector_table
from memory.store.database import connect, create_private

DIM = 8


@pytest.fixture
def db(tmp_path):
    create_private(str(tmp_path / "vectors.db"))  # connect opens a file, never makes one
    conn = connect(str(tmp_path / "vectors.db"))
    vector_table.create(conn, DIM)
    yield conn
    conn.close()


def vector(seed):
    return np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)


def held(ids, matrix):
    return {int(i): matrix[position].tolist() for position, i in enumerate(ids)}


def into_matrix(read):
    """One of the two reads (`_read_shadow`, `_read_scan`: sqlite-vec's own query) into one
    matrix, as `partition` gives it."""

    def matrix_read(db, user_id, dim, half_from=None):
        matrix = vector_table._Matrix(half_from)
        read(db, user_id, dim, matrix)
        return vector_table._ascending(matrix.ids[: matrix.count], matrix.rows, matrix.count)

    return matrix_read


shadow, scan = into_matrix(vector_table._read_shadow), into_matrix(vector_table._read_scan)


def test_a_partition_read_matches_the_scan_across_users_and_deletions(db):
    owners = {}
    for chunk_id in range(1, 120):  # several 16-slot blocks per user, interleaved
        owners[chunk_id] = ("alice", "bob", "carol")[chunk_id % 3]
        vector_table.put(db, chunk_id, owners[chunk_id], vector(chunk_id))
    vector_table.delete(db, [3, 4, 5, 60, 61, 62, 63])  # invalid slots inside blocks

    for user in ("alice", "bob", "carol", "nobody"):
        fast = vector_table.partition(db, user, DIM)
        slow = scan(db, user, DIM)
        assert fast[0].tolist() == slow[0].tolist()
        assert held(*fast) == held(*slow)
        assert {owners[i] for i in fast[0].tolist()} <= {user}
    alice = [i for i, user in owners.items() if user == "alice" and i not in {3, 60, 63}]
    assert vector_table.partition(db, "alice", DIM)[0].tolist() == alice


def test_a_reinserted_id_comes_back_in_order_with_its_new_vector(db):
    for chunk_id in range(1, 40):
        vector_table.put(db, chunk_id, "alice", vector(chunk_id))
    vector_table.delete(db, [2])
    vector_table.put(db, 2, "alice", vector(1000))  # lands in a later slot than id 39

    ids, matrix = vector_table.partition(db, "alice", DIM)

    assert ids.tolist() == list(range(1, 40))
    assert matrix[1].tolist() == vector(1000).tolist()
    assert matrix[38].tolist() == vector(39).tolist()


def test_an_empty_partition_reads_as_no_rows(db):
    vector_table.put(db, 1, "alice", vector(1))
    ids, matrix = vector_table.partition(db, "bob", DIM)
    assert ids.tolist() == [] and matrix.shape[1] == DIM


def test_some_vectors_are_looked_up_by_id_for_their_owner_only(db):
    vector_table.put(db, 1, "alice", vector(1))
    vector_table.put(db, 2, "bob", vector(2))
    found = vector_table.some(db, "alice", [1, 2, 3])
    assert list(found) == [1]
    assert found[1].tolist() == vector(1).tolist()


def test_the_shadow_tables_are_read_directly_on_the_pinned_sqlite_vec(db):
    # `partition` falls back to the slow scan when the shadow layout is not the one it knows;
    # this pins that the fast read itself works on the sqlite-vec version pyproject.toml pins.
    vector_table.put(db, 1, "alice", vector(1))
    vector_table.put(db, 2, "alice", vector(2))
    ids, matrix = shadow(db, "alice", DIM)
    assert held(ids, matrix) == held(*scan(db, "alice", DIM))


@pytest.mark.parametrize("read", [vector_table.partition, scan])
def test_a_user_at_half_from_vectors_reads_as_float16_rows(db, read):
    for chunk_id in range(1, 41):
        vector_table.put(db, chunk_id, "alice", vector(chunk_id))
    vector_table.put(db, 100, "bob", vector(100))

    # 40 vectors in 16-slot blocks: 48 slots, which the fast read counts (the scan, rows)
    at = 48 if read is vector_table.partition else 40
    ids, matrix = read(db, "alice", DIM, at)
    small_ids, small = read(db, "bob", DIM, at)

    assert matrix.dtype == np.float16 and small.dtype == np.float32
    assert ids.tolist() == list(range(1, 41))
    expected = np.stack([vector(i) for i in range(1, 41)]).astype(np.float16)
    assert matrix[:40].tolist() == expected.tolist()  # each value rounded once, to nearest
    assert held(small_ids, small) == {100: vector(100).tolist()}
    assert read(db, "alice", DIM, at + 1)[1].dtype == np.float32
