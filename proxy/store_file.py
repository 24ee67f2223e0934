"""The SQLite file the writer stores into, watched for being removed or replaced under it.

SQLite keeps writing into the file it opened: unlinked (`rm moim.db`, its directory removed,
a restore that moved another file into place), the open file lives on without a name, every
store "succeeds", and all of it is gone when the process ends; the writer emptied the journal
and said every turn was stored. So after each run of stores the writer compares the path's
file with the one opened (device and inode): another file, or none, and the run counts as
failed, its turns kept in the queue and the journal (for the next start, which stores them in
whatever database the path then holds), and the store reported as failing. PostgreSQL has no
such file: nothing is watched.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from memory import MemoryLayer


class StoreFile:
    def __init__(self, layer: MemoryLayer) -> None:
        # absolute, as the store's connections open it: a later chdir must not move the watch
        self._path = None if layer.shared else Path(layer.settings.db_path).absolute()
        self._opened = _identity(self._path) if self._path is not None else None

    def problem(self) -> OSError | None:
        """None while the path still names the file opened; else why the stores are lost."""
        if self._path is None or self._opened is None:
            return None
        if _identity(self._path) == self._opened:
            return None
        return FileNotFoundError(
            errno.ENOENT,
            "the database file was removed or replaced under moim: what it stores now is lost "
            "when it stops; restart moim",
            str(self._path),
        )


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        status = os.stat(path)
    except OSError:
        return None
    return status.st_dev, status.st_ino
