"""Values remembered under Python's hash of what made them: bounded, and no text held.

An agent resends its whole history with every request: tool results of 2-20 kB, hundreds of
tool calls. Their token counts (`memory/block/tokens.py`) and content hashes
(`memory/ingest/identity.py`) are remembered here rather than made again on every pass. The
key is Python's own hash of the inputs (keyed per process for text), so nothing of a user's
text is held; at most `held` values, the oldest let go first, and all of them at a forget.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

V = TypeVar("V")


class Remembered(Generic[V]):
    """At most `held` values, each under the hash of the inputs that made it."""

    def __init__(self, held: int) -> None:
        self.held = held
        self._values: dict[int, V] = {}

    def get(self, inputs: Hashable, make: Callable[[], V]) -> V:
        """The value remembered for `inputs`, else `make()`'s, remembered.

        Raises TypeError, as `hash` does, when `inputs` holds something unhashable."""
        key = hash(inputs)
        value = self._values.get(key)
        if value is None:
            value = make()
            if len(self._values) >= self.held:
                self._values.pop(next(iter(self._values), key), None)  # the oldest
            self._values[key] = value
        return value

    def clear(self) -> None:
        self._values.clear()

    def __len__(self) -> int:
        return len(self._values)
