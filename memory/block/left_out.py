"""What recall held but kept out of the block, and why (for the inspector's "why this block").

Recall decides nothing here: this module only names, after the fact, the step that dropped
each chunk or fact, from what those steps returned. Retrieval reports what it dropped itself
(present in the request, abstained on, weak: `memory.recall.retrieval`), and so do the
layer (replies the client regenerated: `memory.recall.superseded`) and fact selection
(silent, past the facts cap: `memory.facts.rules`); the rest is told by comparing the ranked
hits with the excerpts built and the excerpts and facts the block holds.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

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
    placed, so the request goes upstream before its ~140 records are built.
    """

    __slots__ = ()

    def __init__(self, tell: Callable[[], tuple[LeftOut, ...]]) -> None:
        super().__init__(tell)
