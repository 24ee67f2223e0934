"""The facts side of `MemoryLayer`: semantic memory and the consolidation bookkeeping.

A user's facts are upserted by key, archived, pinned, listed with their history and expired
(memory/facts/rules.py holds the rules, memory/store/fact_rows.py the SQL). Consolidation
reads the turns no run has read yet and applies gated operations here
(memory/store/marks.py, memory/facts/consolidation.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from memory.facts.consolidation import Operation, apply_operations
from memory.facts.rules import (
    MAX_SILENCE,
    check_status,
    facts_for_block,
    resolve_key,
)
from memory.facts.rules import set_fact as _set_fact
from memory.layer_core import LayerCore
from memory.records import Fact, Message
from memory.store import fact_rows, marks
from memory.store.marks import DueUser


class FactsSide(LayerCore):
    """A user's facts: read for a block, set, archived, pinned, expired, consolidated."""

    def facts(self, user_id: str) -> list[Fact]:
        """The user's facts for a block: unexpired, pinned first, within `facts_max_tokens`.

        Facts past their expiry turn stale first; the ones returned are marked as injected.
        """
        return facts_for_block(self.store, user_id, self.settings.facts_max_tokens, time.time())

    # -- facts (semantic memory) -----------------------------------------------------------

    def set_fact(
        self,
        user_id: str,
        key: str,
        value: str,
        category: str | None = "profile",
        policy: str | None = None,
        pinned: bool | None = None,
        ttl_seconds: float | None = None,
        source: str = "api",
    ) -> Fact:
        """Upsert a fact by key (a new value supersedes the old, which is kept as history).

        `category`, `policy` or `pinned` given as None keep the current fact's (for a new
        key: profile, speak, unpinned). Raises ValueError naming a bad field.
        """
        return _set_fact(
            self.store,
            user_id,
            key,
            value,
            category=category,
            policy=policy,
            pinned=pinned,
            ttl_seconds=ttl_seconds,
            source=source,
            now=time.time(),
        )

    def forget_fact(self, user_id: str, key_or_id: str) -> Fact | None:
        """Archive a fact by key, or by the id of any of its rows; None when none is current."""
        key = resolve_key(self.store, user_id, key_or_id)
        return fact_rows.archive_fact(self.store, user_id, key, time.time())

    def fact_history(self, user_id: str, key_or_id: str) -> list[Fact]:
        """Every row of a fact's key, oldest first, whatever its status."""
        key = resolve_key(self.store, user_id, key_or_id)
        self._expire_facts(user_id)
        return fact_rows.fact_history(self.store, user_id, key)

    def list_facts(self, user_id: str, status: str | None = None) -> list[Fact]:
        """The user's fact rows with this status (every status when None), oldest first.

        Raises ValueError for a status other than active, superseded, stale or archived.
        """
        wanted = None if status is None else check_status(status)
        self._expire_facts(user_id)
        return fact_rows.list_facts(self.store, user_id, wanted)

    def pin_fact(self, user_id: str, key_or_id: str, pinned: bool = True) -> Fact | None:
        """Pin (or unpin) the active fact of a key; pinned facts never expire and come first."""
        key = resolve_key(self.store, user_id, key_or_id)
        return fact_rows.set_pinned(self.store, user_id, key, pinned, time.time())

    def expire_facts(self) -> int:
        """The lifecycle sweep over every user: due facts turn stale; return how many."""
        return fact_rows.expire_facts(self.store, time.time(), max_silence=MAX_SILENCE)

    def users_due_for_consolidation(
        self, min_new_turns: int, user_id: str | None = None
    ) -> list[DueUser]:
        """Users with at least this many turns since their last consolidation, or just `user_id`."""
        return marks.users_due(self.store, min_new_turns, user_id)

    def mark_consolidated(self, user_id: str, message_id: int) -> bool:
        """The user's turns up to `message_id` are consolidated (see `consolidation_marks`)."""
        return marks.mark_consolidated(self.store, user_id, message_id)

    def claim_consolidation(self, user_id: str) -> Callable[[], None] | None:
        """Hold the user's consolidation against other replicas (call the release returned
        when done); None while another replica holds it."""
        return self.store.claim_consolidation(user_id)

    def consolidated_through(self, user_id: str) -> int:
        return marks.consolidated_through(self.store, user_id)

    def unread_turns(self, user_id: str, limit: int) -> list[Message]:
        """The oldest `limit` turns no consolidation has read yet, oldest first."""
        return marks.unread_turns(self.store, user_id, limit)

    def apply_consolidation(
        self, user_id: str, accepted: Sequence[Operation], now: float
    ) -> list[Fact]:
        """Apply gated consolidation operations in one transaction (all or nothing)."""
        return apply_operations(self.store, user_id, accepted, now)
