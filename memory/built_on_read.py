"""A sequence built the first time it is read: for what only the inspector reads.

Recall's by-products that the forward never needs (what was left out and why, the texts of
the candidates it did not keep) are made when first read, on whichever thread reads them,
once, so the request goes upstream before they are built.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar, overload

T = TypeVar("T")


class BuiltOnRead(Sequence[T]):
    """The items `build()` returns, built on first read; `length`, when given, is their
    number, known without building them. Equal to a tuple of the same items."""

    __slots__ = ("_build", "_items", "_length", "_lock")

    def __init__(self, build: Callable[[], Sequence[T]], length: int | None = None) -> None:
        self._build: Callable[[], Sequence[T]] | None = build
        self._items: tuple[T, ...] = ()
        self._length = length
        self._lock = threading.Lock()

    def _built(self) -> tuple[T, ...]:
        with self._lock:
            if self._build is not None:
                self._items, self._build = tuple(self._build()), None
            return self._items

    @overload
    def __getitem__(self, index: int) -> T: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[T, ...]: ...
    def __getitem__(self, index: int | slice) -> T | tuple[T, ...]:
        return self._built()[index]

    def __len__(self) -> int:
        return len(self._built()) if self._length is None else self._length

    def __iter__(self) -> Iterator[T]:
        return iter(self._built())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, BuiltOnRead):
            return self._built() == other._built()
        return isinstance(other, tuple) and self._built() == other

    __hash__ = None  # type: ignore[assignment]  # equal to a tuple, but not one

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._built()!r})"
