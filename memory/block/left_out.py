"""What recall held but kept out of the block, and why (for the inspector's "why this block").

Recall decides nothing here: this module only names, after the fact, the step that dropped
each chunk or fact, from what those steps returned. Retrieval reports what it dropped itself
(present in the request, abstained on, weak: `memory.recall.retrieval`), and so does fact
selection (silent, past the facts cap: `memory.facts.rules`); the rest is told by comparing
the ranked hits with the excerpts built and the excerpts and facts the block holds.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from typing import overload

from memory.records import Excerpt, Fact, Hit, LeftOut, MemoryBlock


def left_out(
    dropped: Sequence[LeftOut],
    ranked: Sequence[Hit],
    pool: int,
    excerpts: Sequence[Excerpt],
    block: MemoryBlock | None,
    facts: Sequence[Fact],
) -> tuple[LeftOut, ...]:
    """Everything kept out of `block`, in the order of the steps that kept it out.

    `dropped` is what retrieval and fact selection reported; `ranked` every hit retrieval
    kept, best first, of which the first `pool` were cut into `excerpts`; `facts` the facts
    selected for the block, before the request's token cap.
    """
    shown = {i for excerpt in (block.recalled if block else ()) for i in excerpt.chunk_ids}
    built = {i for excerpt in excerpts for i in excerpt.chunk_ids}
    found = [item for item in dropped if item.fact is None]
    for hit in ranked[:pool]:
        if hit.chunk.id not in shown:
            cut = hit.chunk.id in built  # in an excerpt the token cap dropped
            found.append(LeftOut("context_budget" if cut else "excerpts", hit=hit))
    found += [LeftOut("pool", hit=hit) for hit in ranked[pool:]]
    in_block = set(block.fact_ids) if block else set()
    found += [LeftOut("context_budget", fact=f) for f in facts if f.id not in in_block]
    found += [item for item in dropped if item.fact is not None]
    return tuple(found)


class Told(Sequence[LeftOut]):
    """What was left out, told when first read (`tell()` then, once, on whichever thread).

    Nothing of a request's forward needs it: the inspector reads it, after the block is
    placed, so the request goes upstream before its ~140 records are built.
    """

    __slots__ = ("_items", "_lock", "_tell")

    def __init__(self, tell: Callable[[], tuple[LeftOut, ...]]) -> None:
        self._tell: Callable[[], tuple[LeftOut, ...]] | None = tell
        self._items: tuple[LeftOut, ...] = ()
        self._lock = threading.Lock()

    def _told(self) -> tuple[LeftOut, ...]:
        with self._lock:
            if self._tell is not None:
                self._items, self._tell = self._tell(), None
            return self._items

    @overload
    def __getitem__(self, index: int) -> LeftOut: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[LeftOut, ...]: ...
    def __getitem__(self, index: int | slice) -> LeftOut | tuple[LeftOut, ...]:
        return self._told()[index]

    def __len__(self) -> int:
        return len(self._told())

    def __iter__(self) -> Iterator[LeftOut]:
        return iter(self._told())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Told):
            return self._told() == other._told()
        return isinstance(other, tuple) and self._told() == other

    __hash__ = None  # type: ignore[assignment]  # equal to a tuple, but not one

    def __repr__(self) -> str:
        return f"Told({self._told()!r})"
