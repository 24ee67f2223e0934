"""What ranking reads of a large user's chunks, held in RAM: every field but the text.

A recall of a 100k-chunk user ranks ~160 candidates and keeps ~18 (none when the gate
abstains), but read every candidate's row from SQLite (`Store.chunks`): the 80 rows of the
dense search are 80 random pages of `chunks` and 80 of `messages`, ~1.1 ms after the search
on the critical path, and the row cache (`chunk_rows.py`) holds rows read lately, which a new
question misses. Ranking reads a candidate's session, turn, time, role and speaker; the
check for messages present in the request reads its message's content hash; only the hits
that reach the block (and the inspector's list, after the answer) read the text. So for a
user the caller says is large, those fields are held here as numpy columns, a chunk's
content hash as Python's 64-bit hash of it (48 bytes a chunk: 4.8 MB at 100k), and recall
reads the text of what it keeps (`memory.recall.candidate_rows`). A chunk whose hash is one
of the request's is read whole, so a collision of 64-bit hashes changes nothing.

Derived from SQLite, never silently stale. A user's columns are read in one read
transaction with the chunks' generation (`lexical_sync`: every transaction that changes
`chunks` increments it), on a thread of their own (~0.3 s at 100k) while recall reads SQLite
as before. `Store` hands every change it commits to `changed`, with its generation (the
fields of the chunks it added, the ids it deleted, a user forgotten, everything cleared),
and each user's columns follow it one generation at a time; a change told while a user's
columns are read is replayed over them. A read is served only at the generation the
database shows: when the database is ahead (another process changed chunks, or this one's
writer committed and has not told yet) the caller reads SQLite, and a user whose columns
stay behind, or missed a generation, is dropped and read again.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from memory.records import Chunk

logger = logging.getLogger(__name__)

# Rows added or deleted since a user's columns were read before they are rebuilt in one.
_COMPACT_AT = 4_096
# Reads that found the database ahead of a user's columns, in a row, before they are dropped
# (a change of another process is never told; this process's writer tells in microseconds).
_BEHIND_READS = 3


@dataclass(frozen=True, slots=True)
class Head:
    """A chunk's fields but its text; `content_hash` is its message's."""

    id: int
    message_id: int
    session_id: str
    role: str
    name: str | None
    created_at: float
    content_hash: str
    turn: int | None


class _Codes:
    """Strings as small integers (sessions, roles, names), each string held once."""

    def __init__(self) -> None:
        self.strings: list[str] = []
        self._code: dict[str, int] = {}

    def code(self, value: str | None) -> int:
        """The string's code; -1 for None."""
        if value is None:
            return -1
        found = self._code.get(value)
        if found is None:
            found = self._code[value] = len(self.strings)
            self.strings.append(value)
        return found


@dataclass(slots=True)
class Columns:
    """One user's heads, ascending ids, a numpy column a field."""

    ids: np.ndarray  # int64
    message_ids: np.ndarray  # int64
    sessions: np.ndarray  # int32 codes into `codes`
    roles: np.ndarray  # int32 codes
    names: np.ndarray  # int32 codes, -1 for None
    created: np.ndarray  # float64
    turns: np.ndarray  # int32, -1 for None
    hashes: np.ndarray  # int64: hash(content_hash)
    codes: _Codes = field(default_factory=_Codes)

    @classmethod
    def of(cls, heads: Sequence[Head], codes: _Codes | None = None) -> Columns:
        """Columns of `heads` (in ascending id order), coding strings with `codes`."""
        rows = [
            (h.id, h.message_id, h.session_id, h.role, h.name, h.created_at, h.content_hash, h.turn)
            for h in heads
        ]
        return cls.read(len(rows), [rows], codes)

    @classmethod
    def read(
        cls, count: int, batches: Iterable[Sequence[Sequence[Any]]], codes: _Codes | None = None
    ) -> Columns:
        """Columns of `count` rows (id, message id, session, role, name, time, content hash,
        turn) in ascending id order, taken a batch at a time (no record a row)."""
        codes = codes or _Codes()
        arrays = [np.empty(count, dtype=dtype) for dtype in _DTYPES]
        start = 0
        for rows in batches:
            end = min(start + len(rows), count)
            fields = list(zip(*rows[: end - start], strict=True))
            if not fields:
                break
            ids, message_ids, sessions, roles, names, created, hashes, turns = fields
            values = (
                ids,
                message_ids,
                [codes.code(v) for v in sessions],
                [codes.code(v) for v in roles],
                [codes.code(v) for v in names],
                created,
                [-1 if v is None else v for v in turns],
                [hash(v) for v in hashes],
            )
            for array, column in zip(arrays, values, strict=True):
                array[start:end] = column
            start = end
        return _columns([array[:start] for array in arrays], codes)

    def joined(self, more: Columns) -> Columns:
        """These rows and `more`'s (same codes), in ascending id order."""
        parts = [(a, b) for a, b in zip(self._arrays(), more._arrays(), strict=True)]
        merged = [np.concatenate(pair) for pair in parts]
        order = np.argsort(merged[0], kind="stable")
        return _columns([column[order] for column in merged], self.codes)

    def without(self, keep: np.ndarray) -> Columns:
        """The rows where `keep` is true."""
        return _columns([column[keep] for column in self._arrays()], self.codes)

    def _arrays(self) -> tuple[np.ndarray, ...]:
        return (
            self.ids,
            self.message_ids,
            self.sessions,
            self.roles,
            self.names,
            self.created,
            self.turns,
            self.hashes,
        )

    @property
    def nbytes(self) -> int:
        return sum(column.nbytes for column in self._arrays())


# The columns' types, in `Columns`' order.
_DTYPES = (np.int64, np.int64, np.int32, np.int32, np.int32, np.float64, np.int32, np.int64)


def _columns(arrays: list[np.ndarray], codes: _Codes) -> Columns:
    ids, message_ids, sessions, roles, names, created, turns, hashes = arrays
    return Columns(ids, message_ids, sessions, roles, names, created, turns, hashes, codes)


@dataclass(slots=True)
class _User:
    """A user's columns at `generation`, and the changes since they were made."""

    columns: Columns
    generation: int
    added: dict[int, Head] = field(default_factory=dict)
    deleted: set[int] = field(default_factory=set)
    behind: int = 0


@dataclass(frozen=True, slots=True)
class _Change:
    generation: int
    user_id: str | None
    deleted: tuple[int, ...]
    added: tuple[Head, ...]
    forgotten: bool
    clear: bool


# Reads a user's heads from SQLite: (the chunks' generation they were read at, their columns).
Reader = Callable[[str], tuple[int, Columns]]


class ChunkHeads:
    """Each large user's heads (`Head`), in step with the store's chunk generation."""

    def __init__(self, reader: Reader) -> None:
        self._reader = reader
        self._users: dict[str, _User] = {}
        self._loading: dict[str, list[_Change]] = {}  # user -> changes told meanwhile
        self._threads: dict[str, threading.Thread] = {}
        self._lock = threading.Lock()

    def get(
        self, user_id: str, ids: Sequence[int], generation: int, present: Collection[str]
    ) -> tuple[dict[int, Chunk], list[int]] | None:
        """The heads of the user's `ids` as chunks without text or hash (ids not the user's
        are absent), and the ids to read whole: their message's hash may be in `present`.
        None when the user's heads are not held at `generation` (the database's, read before
        this call): then they are read, in the background, and the caller reads SQLite."""
        with self._lock:
            user = self._users.get(user_id)
            if user is None:
                self._start(user_id)
                return None
            if generation != user.generation:
                if generation > user.generation:
                    user.behind += 1
                    if user.behind >= _BEHIND_READS:  # a change that will not be told
                        del self._users[user_id]
                return None
            user.behind = 0
            return _lookup(user, user_id, ids, {hash(h) for h in present})

    def changed(
        self,
        generation: int,
        user_id: str | None = None,
        deleted: Sequence[int] = (),
        added: Sequence[Head] = (),
        forgotten: bool = False,
        clear: bool = False,
    ) -> None:
        """A committed change of `chunks` (see `ChunkRows.changed`), with the heads of the
        chunks it added."""
        change = _Change(generation, user_id, tuple(deleted), tuple(added), forgotten, clear)
        with self._lock:
            for told in self._loading.values():
                told.append(change)
            for held, user in list(self._users.items()):
                if not _apply(user, held, change):
                    del self._users[held]

    def wait(self, user_id: str, timeout: float | None = None) -> bool:
        """Wait for a read of the user's heads under way; True when they are held."""
        thread = self._threads.get(user_id)
        if thread is not None:
            thread.join(timeout)
        return user_id in self._users

    def held_bytes(self) -> int:
        with self._lock:
            return sum(user.columns.nbytes for user in self._users.values())

    def _start(self, user_id: str) -> None:
        """Read the user's heads on a thread of their own (the lock held)."""
        if user_id in self._loading:
            return
        self._loading[user_id] = []
        thread = threading.Thread(
            target=self._load, args=(user_id,), name="moim-chunk-heads", daemon=True
        )
        self._threads[user_id] = thread
        thread.start()

    def _load(self, user_id: str) -> None:
        try:
            generation, columns = self._reader(user_id)
        except Exception as exc:  # noqa: BLE001 - a failed read leaves recall on SQLite
            logger.warning("a user's chunk heads were not read, recall reads SQLite: %s", exc)
            with self._lock:
                self._loading.pop(user_id, None)
                self._threads.pop(user_id, None)
            return
        user = _User(columns, generation)
        with self._lock:
            told = self._loading.pop(user_id, [])
            self._threads.pop(user_id, None)
            if all(_apply(user, user_id, change) for change in told):
                self._users[user_id] = user


def _apply(user: _User, user_id: str, change: _Change) -> bool:
    """Bring `user`'s heads to `change`'s generation; False when they cannot be kept (a
    generation missed, the user forgotten, everything cleared)."""
    if change.generation <= user.generation:
        return True  # in the columns already: they were read at a later generation
    if change.clear or change.generation > user.generation + 1:
        return False
    user.generation = change.generation
    if change.user_id != user_id:
        return True
    if change.forgotten:
        return False
    for chunk_id in change.deleted:
        if user.added.pop(chunk_id, None) is None:
            user.deleted.add(chunk_id)
    for head in change.added:
        user.added[head.id] = head
    if len(user.added) + len(user.deleted) >= _COMPACT_AT:
        _compact(user)
    return True


def _compact(user: _User) -> None:
    """Fold the rows added and deleted since the load into the columns."""
    columns = user.columns
    gone = np.fromiter(user.deleted | set(user.added), dtype=np.int64)
    columns = columns.without(~np.isin(columns.ids, gone))
    added = sorted(user.added.values(), key=lambda head: head.id)
    user.columns = columns.joined(Columns.of(added, columns.codes))
    user.added, user.deleted = {}, set()


def _lookup(
    user: _User, user_id: str, ids: Sequence[int], present: set[int]
) -> tuple[dict[int, Chunk], list[int]]:
    """The heads of `ids` in ascending id order, and the ids whose hash is in `present`."""
    columns, strings = user.columns, user.columns.codes.strings
    wanted = np.unique(np.fromiter(ids, dtype=np.int64, count=len(ids)))
    rows: dict[int, tuple[int, str, str, str | None, float, int | None, int]] = {}
    if len(columns.ids):
        at = np.minimum(np.searchsorted(columns.ids, wanted), len(columns.ids) - 1)
        found = columns.ids[at] == wanted
        at = at[found]
        # Each column gathered once and made Python numbers at once (numpy scalars, one by
        # one, cost more than the rest of the lookup).
        gathered = zip(
            wanted[found].tolist(),
            columns.message_ids[at].tolist(),
            columns.sessions[at].tolist(),
            columns.roles[at].tolist(),
            columns.names[at].tolist(),
            columns.created[at].tolist(),
            columns.turns[at].tolist(),
            columns.hashes[at].tolist(),
            strict=True,
        )
        for chunk_id, message_id, session, role, name, created, turn, hashed in gathered:
            if chunk_id not in user.deleted:
                rows[chunk_id] = (
                    message_id,
                    strings[session],
                    strings[role],
                    None if name < 0 else strings[name],
                    created,
                    None if turn < 0 else turn,
                    hashed,
                )
    for chunk_id in wanted.tolist():
        head = user.added.get(chunk_id)
        if head is not None:
            rows[chunk_id] = (
                head.message_id,
                head.session_id,
                head.role,
                head.name,
                head.created_at,
                head.turn,
                hash(head.content_hash),
            )
    heads: dict[int, Chunk] = {}
    whole: list[int] = []
    for chunk_id in sorted(rows):
        message_id, session_id, role, name, created_at, turn_of, hashed = rows[chunk_id]
        if hashed in present:  # present in the request, or a collision: read it whole
            whole.append(chunk_id)
        else:
            heads[chunk_id] = Chunk(
                chunk_id, message_id, user_id, session_id, role, name, "", created_at, "", turn_of
            )
    return heads, whole
