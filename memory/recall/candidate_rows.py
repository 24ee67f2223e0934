"""The chunk rows of one recall's candidates: a large user's come without their text.

Ranking reads every candidate's session, turn, time, role and speaker; only the hits that
reach the block read the text (and the inspector's list of what was left out, after the
answer). For a user of `Settings.chunk_heads_from` vectors or more, the candidates' rows come
from the store's heads in RAM (memory/store/chunk_heads.py: every field but the text, 48
bytes a chunk), and `whole` reads the text of the hits that need it: ~18 rows when recall
keeps something, none when it abstains, where every candidate's row was read from SQLite
(~160 at 100k chunks, 80 of them after the dense search, on the critical path).
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Sequence
from dataclasses import replace

from memory.records import Chunk, Hit
from memory.store.backend import StoreBackend as Store


class CandidateRows:
    """Reads one recall's candidates (from any thread) and, later, the text of its hits."""

    def __init__(self, store: Store, user_id: str, present: Collection[str], hold: bool) -> None:
        """`present`: the hashes of the request's messages (their chunks are read whole, for
        the inspector's "present"); `hold`: the user is large enough for heads in RAM."""
        self._store, self._user_id, self._present, self._hold = store, user_id, present, hold
        self._headless: set[int] = set()  # ids read without their text
        self._lock = threading.Lock()

    def read(self, ids: Sequence[int]) -> dict[int, Chunk]:
        """The user's chunks with these ids, ascending (`Store.chunks`), a large user's
        without their text and hash, but those of a message in `present`."""
        found, headless = self._store.chunk_heads(self._user_id, ids, self._present, self._hold)
        if headless:
            with self._lock:
                self._headless |= headless
        return found

    @property
    def partial(self) -> bool:
        """Whether any chunk was read without its text."""
        return bool(self._headless)

    def whole(self, hits: Sequence[Hit], keep_gone: bool = False) -> list[Hit]:
        """`hits` with their chunks' text (one read of those that came without it and were not
        made whole before: the kept hits of a question naming an identifier are). A chunk
        deleted since it was found is left out, or with `keep_gone` kept as it came."""
        with self._lock:  # a chunk read whole has its message's hash; a head comes without
            wanted = [
                h.chunk.id
                for h in hits
                if h.chunk.id in self._headless and not h.chunk.message_hash
            ]
        if not wanted:
            return list(hits)
        rows = self._store.chunks(self._user_id, wanted)
        out = []
        for hit in hits:
            row = rows.get(hit.chunk.id)
            if row is not None:
                out.append(replace(hit, chunk=row))
            elif hit.chunk.id not in wanted or keep_gone:
                out.append(hit)
        return out
