"""The indexing thread's lower OS priority: when the cores are all busy, requests go first.

The writer (proxy/writer.py) indexes on a thread of its own, started with `lower_priority`;
its embedding is the heaviest work moim does, and a request's recall embeds a question too.
"""

from __future__ import annotations

import logging
import os
import threading

logger = logging.getLogger(__name__)

# How much nicer than the process the indexing thread is (Unix nice values, 19 at most).
_INDEXING_NICENESS = 10


def lower_priority() -> None:
    """Make the calling thread yield the CPU to the others when they compete (Linux: the
    nice value is per thread; elsewhere, or where it is not allowed, nothing changes)."""
    if not hasattr(os, "setpriority"):
        return
    try:
        tid = threading.get_native_id()
        current = os.getpriority(os.PRIO_PROCESS, tid)
        os.setpriority(os.PRIO_PROCESS, tid, min(19, current + _INDEXING_NICENESS))
    except OSError:
        logger.debug("could not lower the indexing thread's priority", exc_info=True)
