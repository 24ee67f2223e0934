"""The inspector's "why this block": each user's last requests, kept in RAM.

`History.record` is the one call `proxy/recall_step.py` makes, right after recall, on the
thread that ran it: the request takes its place in a ring of `size` entries per user, for the
`MAX_USERS` most recently active users, and what the inspector shows of it (tier, fill ratio,
the block as sent, the scores of the hits in its excerpts, what was left out and why) is made
once the answer is sent, or when the inspector reads it first (`_Kept`). Nothing is written
anywhere; a restart forgets it. `size` 0 records nothing (`inspector.history`).

What is kept is bounded, so the ring's memory is: the block whole (it is what was sent, and
recall bounds it), the first `MAX_LEFT_OUT` left-out items, chunk texts and the model's name
cut to `TEXT_CHARS`, and the query to `QUERY_CHARS` (the client's text: a pasted document of
megabytes, kept whole, held that much per request until a restart).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Collection
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from memory import Hit, LeftOut, MemoryBlock, Recollection, Tier

if TYPE_CHECKING:
    from proxy.exchange import Report
    from proxy.identity import Identity

MAX_USERS = 256
MAX_LEFT_OUT = 40
TEXT_CHARS = 400
QUERY_CHARS = 5 * TEXT_CHARS


@dataclass(frozen=True, slots=True)
class BlockRecord:
    """One chat request as the inspector shows it."""

    request_id: str
    at: float
    user_id: str
    session_id: str
    model: str
    mode: str
    tier: Tier
    fill_ratio: float
    query: str
    block: MemoryBlock | None
    # The hits the block's excerpts show, for their scores.
    hits: tuple[Hit, ...]
    left_out: tuple[LeftOut, ...]
    # How many were left out in all (`left_out` holds the first `MAX_LEFT_OUT`).
    left_out_total: int
    warming: bool


class History:
    """A bounded ring of `BlockRecord`s per user; safe to use from any thread."""

    def __init__(self, size: int, max_users: int = MAX_USERS) -> None:
        self.size = size
        self.max_users = max_users
        self._users: OrderedDict[str, deque[_Kept]] = OrderedDict()
        self._lock = threading.Lock()

    def record(
        self, who: Identity, model: str, report: Report, recollection: Recollection
    ) -> Callable[[], None]:
        """Keep this request's recall for the inspector (nothing when the size is 0).

        The request takes its place in the ring now; what the inspector shows of it (what
        was left out, told only then: ~140 records at 1k chunks) is made when the returned
        `settle` is called, which the proxy does once the answer is sent, or when the
        inspector reads it first. Nothing upstream waits for it.
        """
        if self.size <= 0:
            return _nothing
        kept = _Kept(who, model, report, recollection)
        with self._lock:
            ring = self._users.pop(who.user_id, None) or deque(maxlen=self.size)
            ring.append(kept)
            self._users[who.user_id] = ring
            while len(self._users) > self.max_users:
                self._users.popitem(last=False)
        return kept.settle

    def recent(self, user_id: str) -> list[BlockRecord]:
        """The user's kept requests, newest first."""
        with self._lock:
            kept = list(reversed(self._users.get(user_id, ())))
        return [k.record() for k in kept]

    def drop(self, user_id: str) -> None:
        """Let a forgotten user's requests go: their blocks quote what was forgotten."""
        with self._lock:
            self._users.pop(user_id, None)

    def discard(self, user_id: str, request_ids: Collection[str]) -> None:
        """Let these requests of the user go (their user was forgotten elsewhere)."""
        with self._lock:
            ring = list(self._users.get(user_id, ()))
        gone = {id(k) for k in ring if k.record().request_id in request_ids}
        with self._lock:
            if (now := self._users.get(user_id)) is not None:
                kept = [k for k in now if id(k) not in gone]
                self._users[user_id] = deque(kept, maxlen=self.size)

    def find(self, user_id: str, request_id: str) -> BlockRecord | None:
        """The user's kept request with this id (the newest, if a client reused one)."""
        return next((r for r in self.recent(user_id) if r.request_id == request_id), None)


class _Kept:
    """One request in the ring: its recall until the record is made, then the record."""

    __slots__ = ("_lock", "_made", "_recall", "_report", "at")

    def __init__(self, who: Identity, model: str, report: Report, found: Recollection) -> None:
        self.at = time.time()
        self._recall: tuple[Identity, str, str, float, Recollection] | None = (
            who,
            model,
            report.request_id,
            report.fill_ratio,
            found,
        )
        # Says, once the answer is sent, whether the block went after all: a provider's window
        # refusal sends the request again without it (`Report.without_block`).
        self._report: Report | None = report
        self._made: BlockRecord | None = None
        self._lock = threading.Lock()

    def settle(self) -> None:
        """Make the record (once) and let the recall go."""
        self.record()

    def record(self) -> BlockRecord:
        with self._lock:
            if self._made is None:
                assert self._recall is not None and self._report is not None
                sent = self._report.block is not None
                self._made = _entry(*self._recall, self.at, sent)
                self._recall, self._report = None, None
            return self._made


def _nothing() -> None:
    """What there is to settle when the ring keeps nothing."""


def _entry(
    who: Identity,
    model: str,
    request_id: str,
    fill_ratio: float,
    recollection: Recollection,
    at: float,
    sent: bool,
) -> BlockRecord:
    block = recollection.block if sent else None
    shown = {i for excerpt in (block.recalled if block else ()) for i in excerpt.chunk_ids}
    hits = tuple(_short(h) for h in recollection.hits if h.chunk.id in shown)
    left_out = tuple(_short_left_out(item) for item in recollection.left_out[:MAX_LEFT_OUT])
    return BlockRecord(
        request_id=request_id,
        at=at,
        user_id=who.user_id,
        session_id=who.session_id,
        model=_cut(model, TEXT_CHARS),
        mode=who.mode.value,
        tier=recollection.tier,
        fill_ratio=fill_ratio,
        query=_cut(recollection.query, QUERY_CHARS),
        block=block,
        hits=hits,
        left_out=left_out,
        left_out_total=len(recollection.left_out),
        warming=recollection.warming,
    )


def _cut(text: str, chars: int) -> str:
    """`text`, or its first `chars` characters and "…" when it is longer."""
    return text if len(text) <= chars else text[:chars] + "…"


def _short(hit: Hit) -> Hit:
    if len(hit.chunk.text) <= TEXT_CHARS:
        return hit
    return replace(hit, chunk=replace(hit.chunk, text=_cut(hit.chunk.text, TEXT_CHARS)))


def _short_left_out(item: LeftOut) -> LeftOut:
    if item.hit is not None:
        short = _short(item.hit)
        # `replace` costs microseconds, 40 times a request: only when the text was cut
        return item if short is item.hit else replace(item, hit=short)
    if item.chunk is not None and len(item.chunk.text) > TEXT_CHARS:
        return replace(item, chunk=replace(item.chunk, text=_cut(item.chunk.text, TEXT_CHARS)))
    return item
