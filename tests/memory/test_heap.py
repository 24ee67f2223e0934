"""memory/heap.py: glibc's malloc kept from holding freed memory (Linux with glibc only)."""

import subprocess
import sys

import pytest

from memory import heap

pytestmark = pytest.mark.skipif(heap._LIBC is None, reason="glibc only")

# Frees an 8 MB block (glibc then raises its mmap threshold to 8 MB), allocates 2 MB, and
# prints whether that block got a mapping of its own (mallinfo2's count of mapped blocks).
_PROBE = """
import ctypes, sys
from memory import heap
class Info(ctypes.Structure):
    names = "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost"
    _fields_ = [(n, ctypes.c_size_t) for n in names.split()]
libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = Info
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
if sys.argv[1] == "fixed":
    heap.fix_mmap_threshold(1 << 20)
libc.free(libc.malloc(8 << 20))
before = libc.mallinfo2().hblks
block = libc.malloc(2 << 20)
print(libc.mallinfo2().hblks - before)
libc.free(block)
"""


# Allocates 512 kB from the heap (below either threshold), frees it, and prints how many
# bytes the main heap gave back to the system then (mallinfo2's `arena`, before - after).
_TOP = (
    _PROBE.split("if sys.argv")[0]
    + """
if sys.argv[1] == "fixed":
    heap.fix_mmap_threshold(1 << 20)
else:  # the mmap threshold alone: glibc's trim threshold is then its static 128 kB
    libc.mallopt(-3, 1 << 20)
block = libc.malloc(512 << 10)
before = libc.mallinfo2().arena
libc.free(block)
print(before - libc.mallinfo2().arena)
"""
)


def run(probe, mode):
    out = subprocess.run(
        [sys.executable, "-c", probe, mode], capture_output=True, text=True, check=True
    )
    return int(out.stdout)


def mapped_blocks(mode):
    return run(_PROBE, mode)


def test_a_fixed_mmap_threshold_maps_large_blocks_after_a_larger_one_was_freed():
    assert mapped_blocks("default") == 0  # from the heap: glibc's threshold moved to 8 MB
    assert mapped_blocks("fixed") == 1  # its own mapping, given back when freed


def test_the_heap_top_is_kept_for_the_next_block_with_the_threshold_fixed():
    # glibc's static trim threshold (128 kB, once the dynamic one is off) would give 512 kB
    # back at every free and take it again at the next model run.
    assert run(_TOP, "mmap threshold only") > 0
    assert run(_TOP, "fixed") == 0
