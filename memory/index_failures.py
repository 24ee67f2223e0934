"""Messages no indexing pass can index: found, set aside, counted.

Indexing takes the oldest unindexed messages a pass at a time, and a pass fails whole when
one of its texts fails (an embedding service that refuses that one input, a chunker bug).
Such a message would fail every pass, forever, and hold back every message after it. So after
a failed pass its messages are tried one at a time, oldest first ("suspects"): the others are
indexed, and a message that fails alone `ATTEMPTS` times, while the embedder still embeds
another text (it is not down), is marked failed in the store (`indexed = 2`: stored, exported,
not indexed, not retried until `moim reindex`) and counted (`failed` in `/v1/memory/stats`,
`moim_ingest_failed`). A store that fails, or an embedder that fails every text, marks
nothing: those messages wait, as before, until it works.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from typing import Any

from memory.errors import StoreUnavailable
from memory.store.failed_messages import mark_failed, oldest_unindexed

logger = logging.getLogger(__name__)

# Failed passes of one message alone before it is set aside.
ATTEMPTS = 3
# What is embedded to tell "this text fails" from "the embedder fails".
_PROBE = "moim indexing probe"


class IndexFailures:
    """The messages of a failed pass not yet tried alone, and their failures alone."""

    def __init__(self) -> None:
        self._suspects: set[int] = set()
        self._failures: Counter[int] = Counter()

    def run(self, store: Any, embedder: Any, batch: int, index: Callable[[int], int]) -> int:
        """One pass, `index(limit)`: of `batch` messages, or of the oldest alone while it is
        a suspect. Returns what `index` returns, or 1 when the message tried alone was set
        aside; raises what `index` raised otherwise (the writer counts a failed pass)."""
        alone = self._next_suspect(store)
        try:
            worked = index(1 if alone is not None else batch)
        except Exception as exc:
            if alone is None:
                if not isinstance(exc, StoreUnavailable):
                    self._suspects = oldest_unindexed(store, batch)
                raise
            if not self._blame(alone, exc, embedder, store):
                raise
            return 1
        if alone is not None:
            self._suspects.discard(alone)
            self._failures.pop(alone, None)
        return worked

    def _next_suspect(self, store: Any) -> int | None:
        """The oldest unindexed message, when it is a suspect (else suspects are done)."""
        if not self._suspects:
            return None
        _, oldest = store.index_frontier()
        if oldest in self._suspects:
            return int(oldest)
        self._suspects.clear()
        self._failures.clear()
        return None

    def _blame(self, message_id: int, exc: Exception, embedder: Any, store: Any) -> bool:
        """Count a failure of this message alone; set it aside (True) at the `ATTEMPTS`th.
        Not counted when the store failed, or the embedder fails a probe too (it is down)."""
        if isinstance(exc, StoreUnavailable):
            return False
        try:
            embedder.embed_documents([_PROBE])
        except Exception:
            return False
        self._failures[message_id] += 1
        if self._failures[message_id] < ATTEMPTS:
            return False
        mark_failed(store, message_id)
        self._suspects.discard(message_id)
        del self._failures[message_id]
        logger.warning(
            "message %d failed indexing alone %d times (%s) while other texts are embedded: "
            "set aside, stored but not indexed until `moim reindex`",
            message_id,
            ATTEMPTS,
            type(exc).__name__,
        )
        return True
