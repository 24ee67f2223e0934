"""The text of the hits recall keeps: the block's pool now, the rest when first read.

A large user's candidates come without their text (`memory.recall.candidate_rows`), and
recall read the text of every hit it kept before returning, to leave out the turns that say
nothing ('thanks!'): ~95-130 random rows of SQLite at 100k chunks, 1.3 ms of the recall
thread on the critical path. The block is cut from the first `Settings.hit_pool` (40) hits;
the ones past it are only listed by the inspector ("pool"), after the answer. So a caller
that says how many it shows gets that many read now, in order, each turn that says nothing
left out and replaced by the next, and the rest read when first read. Which of the rest say
nothing, and so how many hits there are, is known once they are read; the first ones and
their order are the same either way.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Iterator, Sequence
from typing import overload

from memory.records import Hit

# Reads hits' text (`CandidateRows.whole`): the hits kept, in their order, with it.
Whole = Callable[[Sequence[Hit]], list[Hit]]
# Whether a turn says nothing (`memory.recall.empty_turns.says_nothing`).
Empty = Callable[[str], bool]


def read_kept(
    kept: Sequence[Hit], whole: Whole, empty: Empty, shown: int | None = None
) -> tuple[Sequence[Hit], Collection[int]]:
    """`kept` with their text, but the turns that say nothing, and those turns' ids. With
    `shown`, the text of the first `shown` such hits is read now, the rest's when read."""
    said, nothing, done = list[Hit](), set[int](), 0
    while done < len(kept) and (shown is None or len(said) < shown):
        batch = kept[done:] if shown is None else kept[done : done + shown - len(said)]
        done += len(batch)
        for hit in whole(batch):
            if empty(hit.chunk.text):
                nothing.add(hit.chunk.id)
            else:
                said.append(hit)
    if done == len(kept):
        return said, frozenset(nothing)
    later = _Later(said, nothing, kept[done:], whole, empty)
    return KeptHits(later), _Nothing(later)


class _Later:
    """The hits read so far and the ones whose text is read when first asked for."""

    __slots__ = ("_empty", "_lock", "_rest", "_whole", "first", "most", "nothing", "said")

    def __init__(
        self, said: list[Hit], nothing: set[int], rest: Sequence[Hit], whole: Whole, empty: Empty
    ) -> None:
        self.first = tuple(said)  # read, in order: what the block is cut from
        self.most = len(said) + len(rest)  # the hits there are when none of the rest is empty
        self.said, self.nothing = said, nothing
        self._rest: Sequence[Hit] | None = rest
        self._whole, self._empty = whole, empty
        self._lock = threading.Lock()

    def built(self) -> tuple[list[Hit], set[int]]:
        """Every hit with its text, but those that say nothing; and their ids."""
        with self._lock:
            if self._rest is not None:
                said, nothing = read_kept(self._rest, self._whole, self._empty)
                self.said = [*self.said, *said]
                self.nothing = self.nothing | set(nothing)
                self._rest = None
            return self.said, self.nothing


class KeptHits(Sequence[Hit]):
    """Recall's hits: the first ones read, the rest read when an item past them is asked for
    (or their number). A slice gives a list, as the list of every hit would."""

    __slots__ = ("_later",)

    def __init__(self, later: _Later) -> None:
        self._later = later

    @overload
    def __getitem__(self, index: int) -> Hit: ...
    @overload
    def __getitem__(self, index: slice) -> list[Hit]: ...
    def __getitem__(self, index: int | slice) -> Hit | list[Hit]:
        first = self._later.first
        if isinstance(index, slice):
            start, stop, step = index.start, index.stop, index.step
            if (
                (start is None or 0 <= start)
                and stop is not None
                and 0 <= stop <= len(first)
                and step in (None, 1)
            ):
                return list(first[index])
            return self._later.built()[0][index]
        if 0 <= index < len(first):
            return first[index]
        return self._later.built()[0][index]

    def __len__(self) -> int:
        return len(self._later.built()[0])

    def __bool__(self) -> bool:
        return bool(self._later.first) or len(self) > 0

    def __iter__(self) -> Iterator[Hit]:
        return iter(self._later.built()[0])

    def __eq__(self, other: object) -> bool:
        items = self._later.built()[0]
        return items == (list(other) if isinstance(other, KeptHits) else other)

    __hash__ = None  # type: ignore[assignment]  # equal to the list of its hits

    def fewer_than(self, n: int) -> bool:
        """Whether there are fewer than `n` hits: without reading the rest when there would
        be even if none of them said nothing."""
        return self._later.most < n or len(self) < n

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._later.built()[0]!r})"


class _Nothing(Collection[int]):
    """The ids of the kept turns that say nothing: known once the rest is read."""

    __slots__ = ("_later",)

    def __init__(self, later: _Later) -> None:
        self._later = later

    def __contains__(self, item: object) -> bool:
        return item in self._later.built()[1]

    def __iter__(self) -> Iterator[int]:
        return iter(self._later.built()[1])

    def __len__(self) -> int:
        return len(self._later.built()[1])
