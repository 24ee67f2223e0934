"""One process per journal: an OS lock on `<journal>.lock`, held while the process serves.

Two `moim serve` in one directory appended to and replayed the same `moim.db.journal`; one's
replay could store the other's turns twice, or its truncation drop turns the other had just
appended. The second now refuses to start (`JournalInUse`). The lock is `flock` on a file of
its own (the journal is replaced whole by `Journal._rewrite`, and a lock on a replaced file
guards nothing); the OS drops it when the process dies, however it dies, so a crash never
leaves a stale lock. The file is left in place (removing it would race with a starting
process). On Windows, which has no `flock`, nothing is locked: one moim per directory is then
the operator's to keep.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from memory.errors import JournalInUse


class JournalLock:
    """The lock of the journal at `journal`, taken at once or JournalInUse, whose message
    ends with `remedy` (the caller knows whether the journal's path was named or implied)."""

    def __init__(
        self, journal: Path, remedy: str = "run each moim in a directory of its own"
    ) -> None:
        self.journal = journal
        self.path = journal.with_name(journal.name + ".lock")
        self._fd: int | None = None
        if sys.platform == "win32":
            return
        import fcntl

        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode("ascii", "replace").strip() or "?"
            os.close(fd)
            raise JournalInUse(
                f"another moim is using {journal.absolute()}: process {holder} holds its lock; "
                f"stop it, or {remedy}"
            ) from None
        except OSError:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)  # named to the process refused
        self._fd = fd

    def release(self) -> None:
        """Let go of the lock (closing the file is what releases it)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
