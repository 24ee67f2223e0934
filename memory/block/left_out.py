"""What recall held but kept out of the block, and why (for the inspector's "why this block").

Recall decides nothing here: this module only names, after the fact, the step that dropped
each chunk or fact, from what those steps returned. Retrieval reports what it dropped itself
(present in the request, abstained on, weak: `memory.recall.retrieval`), and so do the
layer (replies the client regenerated: `memory.recall.superseded`) and fact selection
(silent, past the facts cap: `memory.facts.rules`); the rest is told by comparing the ranked
hits with the excerpts built and the excerpts and facts the block holds.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import replace
from typing import overload

from memory.built_on_read import BuiltOnRead
from memory.records import Excerpt, Fact, Hit, LeftOut, MemoryBlock


def left_out(
    dropped: Sequence[LeftOut],
    ranked: Sequence[Hit],
    pool: int,
    excerpts: Sequence[Excerpt],
    block: MemoryBlock | None,
    facts: Sequence[Fact],
    repeated: Collection[int] = (),
) -> tuple[LeftOut, ...]:
    """Everything kept out of `block`, in the order of the steps that kept it out.

    `dropped` is what retrieval and fact selection reported; `ranked` every hit retrieval
    kept, best first, of which the first `pool` were cut into `excerpts`; `facts` the facts
    selected for the block, before the request's token cap; `repeated` the chunk ids of the
    hits left out for repeating what the model reads already (`memory.block.shown`).
    """
    shown = {i for excerpt in (block.recalled if block else ()) for i in excerpt.chunk_ids}
    built = {i for excerpt in excerpts for i in excerpt.chunk_ids}
    found = [item for item in dropped if item.fact is None]
    told = {item.hit.chunk.id for item in found if item.hit is not None}  # a replaced reply
    for hit in ranked[:pool]:
        if hit.chunk.id not in shown and hit.chunk.id not in told:
            cut = hit.chunk.id in built  # in an excerpt the token cap dropped
            again = hit.chunk.id in repeated
            found.append(
                LeftOut("repeated" if again else "context_budget" if cut else "excerpts", hit=hit)
            )
    found += [LeftOut("pool", hit=hit) for hit in ranked[pool:]]
    in_block = set(block.fact_ids) if block else set()
    found += [LeftOut("context_budget", fact=f) for f in facts if f.id not in in_block]
    found += [item for item in dropped if item.fact is not None]
    return tuple(found)


class Told(BuiltOnRead[LeftOut]):
    """What was left out, told when first read (`tell()` then, once, on whichever thread).

    Nothing of a request's forward needs it: the inspector reads it, after the block is
    placed, so the request goes upstream before its ~140 records are built. A large user's
    ranked candidates come without their text (`memory.recall.candidate_rows`): `tell()`
    lists them so, and `texts` reads the text of those read, when read: the inspector's ring
    keeps the first 40 of ~155 and their number (docs/performance.md, fifteenth pass).
    """

    __slots__ = ("_texts", "_whole")

    def __init__(
        self,
        tell: Callable[[], Sequence[LeftOut]],
        texts: Callable[[Sequence[Hit]], list[Hit]] | None = None,
    ) -> None:
        super().__init__(tell)
        # `texts` gives each hit back, in order, with its text (one that has it as it is).
        self._texts = texts
        self._whole: dict[int, LeftOut] = {}  # by place: the items made whole so far

    @overload
    def __getitem__(self, index: int) -> LeftOut: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[LeftOut, ...]: ...
    def __getitem__(self, index: int | slice) -> LeftOut | tuple[LeftOut, ...]:
        if self._texts is None:  # every item came with its text
            return self._built()[index]
        places = range(len(self._built()))
        if isinstance(index, slice):
            return self._with_text(places[index])
        return self._with_text([places[index]])[0]

    def __iter__(self) -> Iterator[LeftOut]:
        return iter(self._with_text(range(len(self._built()))))

    def __eq__(self, other: object) -> bool:
        mine = self[:]
        if isinstance(other, Told):
            return mine == other[:]
        return isinstance(other, tuple) and mine == other

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self[:]!r})"

    def _with_text(self, places: Sequence[int]) -> tuple[LeftOut, ...]:
        """The items at `places`, each with its hit's text (read once, all in one read)."""
        items = self._built()
        if self._texts is None:
            return tuple(items[i] for i in places)
        with self._lock:
            wanted = [i for i in places if i not in self._whole and items[i].hit is not None]
            if wanted:
                hits = self._texts([h for i in wanted if (h := items[i].hit) is not None])
                for i, hit in zip(wanted, hits, strict=True):
                    item = items[i]
                    self._whole[i] = item if hit is item.hit else replace(item, hit=hit)
            return tuple(self._whole.get(i, items[i]) for i in places)
