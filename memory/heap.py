"""Keep the process's C heap small (glibc only; elsewhere these do nothing).

onnxruntime allocates tens of MB of activations per batch, from whichever thread runs it,
and glibc gives each thread its own arena (up to 8 per core) and keeps freed memory in it.
Measured with the bundled model (4 threads embedding 64 long texts, then 32 threads each
embedding queries): RSS 435 MB by default, 304 MB with two arenas, 229 MB after a trim.

glibc also moves its mmap threshold: a block of at least the threshold gets a mapping of
its own, returned to the system when freed, and each such free raises the threshold to the
block's size (up to 32 MB), so later blocks that size come from the heap and, once freed,
stay resident there. Recall's temporaries are such blocks (the 2,000 rescored rows, a long
question's activations); 320 searches by 8 threads of a user with 100k chunks left the
process at 372 MB, and at 336 MB with the threshold fixed at 1 MiB; 8 threads embedding
256-token texts, 452 MB against 241. Fixing it also fixes the heap's trim threshold (glibc
turns both dynamic adjustments off together), which is then set to 64 MiB, glibc's own
dynamic maximum: at its static 128 KiB, the heap top was given back and taken again on
every model run, and a stored chunk took 15 ms to embed instead of 13. (A threshold of
256 KiB maps the model's own activations: 17 ms.) `trim` still gives the top back.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

_M_ARENA_MAX = -8  # from glibc's malloc.h
_M_MMAP_THRESHOLD = -3
_M_TRIM_THRESHOLD = -1


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.malloc_trim  # noqa: B018 - musl has no malloc_trim: then do nothing
        libc.mallopt  # noqa: B018
    except (OSError, AttributeError):
        return None
    return libc


_LIBC = _libc()


def limit_arenas(count: int = 2) -> None:
    """Let glibc create at most `count` malloc arenas (affects threads started later)."""
    if _LIBC is not None:
        _LIBC.mallopt(_M_ARENA_MAX, count)


def fix_mmap_threshold(size: int = 1 << 20, trim: int = 64 << 20) -> None:
    """Give every block of `size` bytes or more its own mapping, for good, and give the
    heap's top back past `trim` free bytes (see the module docstring)."""
    if _LIBC is not None:
        _LIBC.mallopt(_M_MMAP_THRESHOLD, size)
        _LIBC.mallopt(_M_TRIM_THRESHOLD, trim)


def trim() -> None:
    """Return freed heap memory to the operating system."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)
