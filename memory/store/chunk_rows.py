"""Chunk rows recall read lately, kept in RAM beside the SQLite store.

A recall reads the rows of its ~160 candidates (`Store.chunks`, one statement joined to
`messages`): 0.4 ms for a 1k-chunk user, 0.8 ms at 100k, half of it on the critical path
after the question is embedded. The same chunks come back from one request to the next (a
conversation stays on its topic; a small user has few chunks), and a chunk's row never
changes once written: chunks are only added, and deleted (forget, reset, reindex, a message
indexed again), after which SQLite may give a deleted id to a new chunk. So rows are kept
under (user, id), at most `size` of them over all users, least recently used out first.

Never stale: every transaction that changes `chunks` increments the store's generation
(`memory/store/lexical_sync.py`), and `Store` hands this cache each change it commits
(`changed`: the ids it deleted, the user it forgot, or everything), so the cache's generation
follows the database's. A read passes the generation it saw in the database: if it is ahead
(another process changed chunks, or this one's writer committed and has not told the cache
yet), every row is dropped before anything is served; if it is behind (the cache moved on
meanwhile), nothing is served from, or put into, the cache. Rows read from SQLite are put only
if no change came between the generation read and the put (`Ticket`).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from memory.records import Chunk

# ~0.5 KB a row (a 200-character turn and its ids): 20,000 rows are ~10 MB.
DEFAULT_ROWS = 20_000


@dataclass(frozen=True, slots=True)
class Ticket:
    """What a read saw: rows read from SQLite under it may be put if nothing changed since."""

    generation: int
    changes: int


class ChunkRows:
    """An LRU of (user_id, chunk id) → `Chunk`, in step with the store's chunk generation."""

    def __init__(self, size: int = DEFAULT_ROWS) -> None:
        self.size = size
        self._rows: OrderedDict[tuple[str, int], Chunk] = OrderedDict()
        self._lock = threading.Lock()
        self._generation = -1  # unknown until a read or a change tells it
        self._changes = 0  # every change this cache was told of, or found

    def get(
        self, user_id: str, ids: Sequence[int], generation: int
    ) -> tuple[dict[int, Chunk], list[int], Ticket]:
        """The user's rows held for `ids`, the ids to read from SQLite, and the ticket to put
        them with; `generation` is the database's, read before this call."""
        found: dict[int, Chunk] = {}
        with self._lock:
            if generation > self._generation:  # changed by another process, or not told yet
                self._drop_all(generation)
            if generation == self._generation:
                rows = self._rows
                for chunk_id in ids:
                    row = rows.get((user_id, chunk_id))
                    if row is not None:
                        rows.move_to_end((user_id, chunk_id))
                        found[chunk_id] = row
            ticket = Ticket(generation, self._changes)
        return found, [i for i in ids if i not in found], ticket

    def put(self, user_id: str, rows: Mapping[int, Chunk], ticket: Ticket) -> None:
        """Keep rows read from SQLite under `ticket`, unless chunks changed since."""
        if self.size <= 0 or not rows:
            return
        with self._lock:
            if ticket.changes != self._changes or ticket.generation != self._generation:
                return
            for chunk_id, row in rows.items():
                self._rows[(user_id, chunk_id)] = row
                self._rows.move_to_end((user_id, chunk_id))
            while len(self._rows) > self.size:
                self._rows.popitem(last=False)

    def changed(
        self,
        generation: int,
        user_id: str | None = None,
        deleted: Iterable[int] = (),
        forgotten: bool = False,
        clear: bool = False,
    ) -> None:
        """A committed change of `chunks` and its generation: `deleted` ids of `user_id`'s,
        every chunk of `user_id` (`forgotten`), or every chunk (`clear`); none for chunks
        only added. A change this cache did not hear of (a gap in generations) drops every
        row."""
        with self._lock:
            if clear or generation > self._generation + 1:
                self._drop_all(generation)
                return
            self._changes += 1
            self._generation = max(self._generation, generation)
            if user_id is None:
                return
            if forgotten:
                for key in [key for key in self._rows if key[0] == user_id]:
                    del self._rows[key]
            for chunk_id in deleted:
                self._rows.pop((user_id, chunk_id), None)

    def __len__(self) -> int:
        return len(self._rows)

    def _drop_all(self, generation: int) -> None:
        self._rows.clear()
        self._changes += 1
        self._generation = max(self._generation, generation)
