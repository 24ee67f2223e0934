"""The storage seam: what the rest of `memory/` asks of a store, whichever database it is.

Two backends implement `StoreBackend`: `memory.store.store.Store` (one SQLite file, the
embedded default) and `memory.store.postgres.PgStore` (PostgreSQL + pgvector, shared by N
replicas). Recall, ranking, facts and rendering are written once against this protocol.

The facts', marks' and export SQL (`fact_rows`, `marks`, `transfer`) is shared too: it goes
through `write()` and `read()`, and the Postgres backend translates the few SQLite spellings it
uses (`memory/store/pg_sql.py`). `open_store` picks the backend from the settings.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from memory.records import Chunk, Message, Term

if TYPE_CHECKING:
    from memory.settings import Settings
    from memory.store.message_rows import NewMessage, Stats
    from memory.store.migrations import MigrationProgress
    from memory.store.session_forget import SessionForgotten
    from memory.store.vector_table import RowSink


@dataclass(frozen=True, slots=True)
class ChunkSlice:
    """One message's chunks from position `start` on, as `StoreBackend.add_chunks` takes
    them: an indexing pass stores several at once (`add_slices`)."""

    message: Message
    texts: Sequence[str]
    vectors: np.ndarray | None
    context: str = ""
    start: int = 0
    last: bool = True
    words: Sequence[Sequence[Term]] = ()


class StoreBackend(Protocol):
    """Messages, chunks, both search indexes, and raw SQL access for the shared modules."""

    dim: int | None
    migrations_applied: list[str]  # by this process on opening, oldest first (none: current)

    def write(self) -> AbstractContextManager[Any]:
        """One write transaction; yields a connection whose `execute` takes SQLite's `?`."""
        ...

    def read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]: ...

    def ensure_vectors(self, model: str, dim: int) -> bool: ...

    def claim_consolidation(self, user_id: str) -> Callable[[], None] | None:
        """Hold the user's consolidation until the release returned is called; None while
        another process holds it."""
        ...

    def write_vectors(
        self, db: Any, rows: Sequence[tuple[int, str]], vectors: np.ndarray
    ) -> None: ...

    def add_messages(self, user_id: str, session_id: str, rows: Sequence[NewMessage]) -> int: ...

    def insert_messages(
        self, user_id: str, session_id: str, rows: Sequence[NewMessage]
    ) -> list[int]: ...

    def stored_keys(self, user_id: str, session_id: str) -> list[str]: ...

    def has_session(self, user_id: str, session_id: str) -> bool: ...

    def session_with(self, user_id: str, hashes: Sequence[str]) -> str | None: ...

    def unindexed_messages(self, limit: int = 256) -> list[Message]: ...

    def count_unindexed(self) -> int: ...

    def index_frontier(self) -> tuple[int, int | None]: ...

    def messages(self, user_id: str, session_id: str | None = None) -> list[Message]: ...

    def last_user_text(self, user_id: str, session_id: str, chars: int) -> str | None: ...

    def answers_of(
        self, user_id: str, session_id: str, reply_id: int
    ) -> tuple[list[tuple[str, str]], list[str]]: ...

    def add_chunks(
        self,
        message: Message,
        texts: Sequence[str],
        vectors: np.ndarray | None,
        context: str = "",
        start: int = 0,
        last: bool = True,
        words: Sequence[Sequence[Term]] = (),
    ) -> list[int]: ...

    def add_slices(self, slices: Sequence[ChunkSlice]) -> list[list[int]]:
        """`add_chunks` of each slice, in order: each one's ids ([] for one not stored)."""
        ...

    def vocabulary_mark(self, user_id: str) -> tuple[int, int]: ...

    def vocabulary(self, user_id: str, after: int = 0) -> list[Term]: ...

    def chunk_counts(self, message_ids: Sequence[int]) -> dict[int, int]: ...

    def chunks(self, user_id: str, ids: Sequence[int]) -> dict[int, Chunk]: ...

    def chunk_heads(
        self, user_id: str, ids: Sequence[int], present: Collection[str], hold: bool
    ) -> tuple[dict[int, Chunk], set[int]]: ...

    def neighbours(
        self,
        user_id: str,
        message_ids: Sequence[int],
        around: int,
        exclude_hashes: Collection[str] = (),
        sessions: Mapping[int, str] | None = None,
    ) -> dict[int, list[Message]]: ...

    def lexical_search(
        self, user_id: str, terms: Sequence[str], limit: int, context_weight: float
    ) -> list[tuple[int, float]]: ...

    def dense_search(
        self, user_id: str, vector: np.ndarray, limit: int
    ) -> list[tuple[int, float]]: ...

    def user_vectors(
        self, user_id: str, half_from: int | None = None
    ) -> tuple[np.ndarray, np.ndarray]: ...

    def read_user_vectors(self, user_id: str, sink: RowSink) -> None:
        """Hand all of a user's chunk ids and float32 vectors to `sink`, batch by batch."""
        ...

    def vectors(self, user_id: str, ids: Sequence[int]) -> dict[int, np.ndarray]: ...

    def reset_index(self) -> int: ...

    def commit_lexical(self, backlog: bool = False) -> None:
        """Make chunks added since the last call searchable (a derived index's commit);
        `backlog`: more passes follow at once, and the commit may wait for a few of them."""
        ...

    def take_foreign_change(self) -> bool:
        """True, once, when another process changed chunks this one mirrors in RAM."""
        ...

    def stats(self, user_id: str) -> Stats: ...

    def delete_user(self, user_id: str) -> int: ...

    def delete_session(
        self, user_id: str, session_id: str, facts: bool = False
    ) -> SessionForgotten | None: ...

    def leave_messages(self, user_id: str, message_ids: Sequence[int]) -> int: ...

    def forgotten_since(self, user_id: str, at: float) -> bool: ...

    def integrity_ok(self) -> bool: ...


def is_postgres_url(target: str) -> bool:
    """True for a `postgresql://…` (or `postgres://…`) connection URL."""
    return target.startswith(("postgresql://", "postgres://"))


def redact_url(url: str) -> str:
    """The URL with any password replaced by `***`, safe for logs and error messages: the
    one before `@`, and libpq's `password=` (and `sslpassword=`) parameters."""
    url = re.sub(r"^([a-z]+://[^:@/?#]*):[^@/?#]*@", r"\1:***@", url)
    return re.sub(r"([?&](?:ssl)?password=)[^&#]*", r"\1***", url, flags=re.IGNORECASE)


def open_store(settings: Settings, on_migration: MigrationProgress | None = None) -> StoreBackend:
    """The store the settings name: Postgres for `db_url`, else the SQLite file `db_path`;
    `on_migration` hears SQLite's migrations (Postgres applies its own under a lock)."""
    if settings.db_url:
        from memory.store.postgres import PgStore  # only Postgres users need psycopg

        return PgStore(settings.db_url, read_timeout=settings.busy_timeout)
    from memory.store.store import Store

    return Store(
        settings.db_path,
        settings.busy_timeout,
        on_migration,
        lexical_index=settings.lexical_index == "tantivy",
        context_chars=settings.embedding_context_chars,
    )
