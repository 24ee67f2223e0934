"""The memory layer's exceptions, one tree.

    MemoryLayerError
     ├── StoreUnavailable    the database cannot be opened, read or written
     ├── EmbeddingFailed     the embedding model could not be loaded or run
     ├── MigrationFailed     a schema migration did not apply
     ├── JournalInUse        another process serves the same journal of turns
     └── ConsolidationRejected   (memory/facts/consolidation.py) a model's operations failed
                                 the strict parse or the write gate; nothing was applied

The proxy catches `MemoryLayerError` (and, in one place, anything else) around the memory
steps, and forwards the request without memory: memory never fails a chat request.
"""

import errno


def describe(exc: BaseException) -> str:
    """A short, path-free name for an error: the errno's name for OS errors (ENOSPC)."""
    if isinstance(exc, OSError) and exc.errno is not None:
        return errno.errorcode.get(exc.errno, type(exc).__name__)
    return type(exc).__name__


class MemoryLayerError(Exception):
    """Base class of every error the memory layer raises on purpose."""


class StoreUnavailable(MemoryLayerError):
    """The SQLite store could not be opened, read or written."""


class EmbeddingFailed(MemoryLayerError):
    """The embedding model could not be loaded or failed on input."""


class MigrationFailed(MemoryLayerError):
    """A numbered migration failed; its transaction was rolled back."""


class JournalInUse(MemoryLayerError):
    """Another process holds the journal's lock (memory/store/journal_lock.py)."""
