"""The operator's side of `MemoryLayer`: what the store holds, and moving a user in and out.

Counts and sizes for the metrics and the inspector, the lists of users, sessions and turns,
the embedder's work, and the per-user operations: `forget` (every row and cache of a user),
`export` and `import_` (which indexes what it stored, hence `WriteSide` under it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

from memory.block.excerpts import forget_flat_lines
from memory.block.shown import forget_words
from memory.block.tokens import forget_counted_texts
from memory.export_items import item_problem
from memory.facts.restore import restore_facts
from memory.ingest.identity import forget_recent_hashes
from memory.layer_write import WriteSide
from memory.records import Message
from memory.store import fact_rows, overview
from memory.store.failed_messages import count_failed
from memory.store.fts import forget_stems
from memory.store.message_rows import Stats
from memory.store.overview import SessionSummary, UserSummary
from memory.store.session_forget import SessionForgotten
from memory.store.sizes import StoreSizes, store_sizes
from memory.store.transfer import export_messages, import_message


class Imported(NamedTuple):
    """What an import added: messages not stored before, fact rows (history included)."""

    messages: int
    facts: int


class AdminSide(WriteSide):
    """Listing, counting, forgetting, exporting and importing a store's users."""

    def user_ids(self) -> list[str]:
        """Every user with a message or a fact, sorted (for copying a whole store)."""
        return overview.user_ids(self.store)

    def embedding_work(self) -> dict[str, tuple[float, int]]:
        """CPU seconds and texts the embedding model has spent, by kind ("query",
        "document"); empty for an embedder that does not count them or is not loaded."""
        embedder = self._embedder
        seconds = getattr(embedder, "cpu_seconds", None)
        texts = getattr(embedder, "texts", None)
        if not isinstance(seconds, dict) or not isinstance(texts, dict):
            return {}
        return {kind: (float(seconds[kind]), int(texts.get(kind, 0))) for kind in seconds}

    def embedding_service_work(self) -> dict[str, tuple[float, int]]:
        """Seconds spent waiting on a remote embedding service and texts sent to it, by kind
        ("query": on the request path, one text a call); empty with the bundled model."""
        embedder = self._embedder
        seconds = getattr(embedder, "seconds", None)
        texts = getattr(embedder, "texts", None)
        if not isinstance(seconds, dict) or not isinstance(texts, dict):
            return {}
        return {kind: (float(seconds[kind]), int(texts.get(kind, 0))) for kind in seconds}

    def messages(self, user_id: str) -> list[Message]:
        """Every stored message of one user, oldest first (the whole log: use sparingly)."""
        return self.store.messages(user_id)

    def index_frontier(self) -> tuple[int, int | None]:
        """(newest stored message id, oldest message id not yet indexed, or None)."""
        return self.store.index_frontier()

    def failed_messages(self, user_id: str | None = None) -> int:
        """Messages no indexing pass could index, set aside until `moim reindex`
        (memory/index_failures.py): of one user, or of every user (None)."""
        return count_failed(self.store, user_id)

    def lexical_problem(self) -> str | None:
        """What is wrong with the lexical index beside a SQLite store, while FTS5 answers in
        its place and it is rebuilt (None: nothing, or no such index)."""
        health = getattr(self.store, "lexical_health", None)
        return health() if health is not None else None

    def vector_users_loaded(self) -> int:
        """Users whose vectors are held in RAM right now."""
        return self.index.loaded_users()

    def vectors_loaded(self) -> int:
        """Vectors held in RAM right now, over every loaded user."""
        return self.index.loaded_vectors()

    def stats(self, user_id: str) -> Stats:
        self._expire_facts(user_id)  # a fact past its expiry is not counted active
        return self.store.stats(user_id)

    def sizes(self) -> StoreSizes:
        """The whole store's counts and bytes, for metrics (a scan: not per request)."""
        return store_sizes(self.store)

    def users(self, only: Sequence[str] | None = None, limit: int = 1000) -> list[UserSummary]:
        """Users with messages or facts, most recently active first (`only`: just those)."""
        return overview.users(self.store, only, limit)

    def sessions(self, user_id: str, limit: int = 500) -> list[SessionSummary]:
        """The user's sessions, most recently active first."""
        return overview.sessions(self.store, user_id, limit)

    def turns(self, user_id: str, session_id: str) -> list[Message]:
        """Every stored message of one of the user's sessions, in the order stored."""
        return self.store.messages(user_id, session_id)

    def holds(self, user_id: str, session_id: str, chunk_ids: Sequence[int]) -> bool:
        """Whether the store still holds what a request kept in RAM quotes of the user (the
        inspector's "why this block"): a message of its session, one of these chunks, or, when
        it names none, anything of the user's. A forget through another replica, or by
        `moim memory delete` beside this process, is told to no other process's RAM."""
        if self.store.has_session(user_id, session_id):
            return True
        if chunk_ids:
            return bool(self.store.chunks(user_id, chunk_ids))
        stats = self.store.stats(user_id)
        return stats.messages > 0 or stats.facts > 0

    def forget(self, user_id: str) -> int:
        """Delete every message, chunk, vector and fact of one user, and every cache of them."""
        removed = self.store.delete_user(user_id)
        self._drop_caches(user_id)
        return removed

    def forget_session(
        self, user_id: str, session_id: str, facts: bool = False
    ) -> SessionForgotten | None:
        """Delete one session of one user: its messages, chunks and vectors, with `facts`
        the facts learned from it (memory/store/session_forget.py); the caches of the user's
        rows go, and refill. None, and nothing changed, when the user has no such session."""
        done = self.store.delete_session(user_id, session_id, facts)
        if done is not None:
            self._drop_caches(user_id)
        return done

    def _drop_caches(self, user_id: str) -> None:
        """Let go of what this process holds in RAM of the user's rows (and of every user's,
        for the module caches keyed by text), after some of them were deleted."""
        self.index.drop(user_id)
        self.vocabulary.drop(user_id)
        self._questions.drop(user_id)
        forget_queries = getattr(self._embedder, "forget_queries", None)
        if forget_queries is not None:  # the model's own cache of recent questions
            forget_queries()
        # Module caches shared by every user, keyed by text: all of it goes, and refills.
        forget_flat_lines()
        forget_words()
        forget_counted_texts()
        forget_recent_hashes()
        forget_stems()

    def export(self, user_id: str) -> Iterator[dict[str, Any]]:
        """The user's messages, then every fact row (history too), as dicts with a `type`."""
        for item in export_messages(self.store, user_id):
            yield {"type": "message", **item}
        for item in fact_rows.export_facts(self.store, user_id):
            yield {"type": "fact", **item}

    def import_(
        self,
        user_id: str,
        items: Iterable[Mapping[str, Any]],
        progress: Callable[[int, int], None] | None = None,
        capped: bool = True,
    ) -> Imported:
        """Store exported items for `user_id`, then index them; return what was added.

        Every item is checked first (`memory.export_items`): one that is not an exported message
        or fact is a ValueError naming it, and nothing is stored.
        Fact rows (`"type": "fact"`) are restored with their history (`restore_facts`).
        `progress(done, todo)` hears the indexing, a pass at a time (todo: every message
        waiting to be indexed, this import's and any other). `capped`: past the user's limit
        of current facts the import is refused whole (TooManyFacts); an operator's import or
        copy (the CLI) is not capped, so a database moves whole.
        """
        items = list(items)
        _ = self.embedder  # a change of layout or model applies before, not amid, the import
        for number, item in enumerate(items, start=1):  # all or nothing: check before storing
            if (problem := item_problem(item)) is not None:
                raise ValueError(f"item {number}: {problem}")
        # Facts first, in one transaction: one past the user's limit refuses the file whole
        # (TooManyFacts) before any message is stored.
        facts = [i for i in items if i.get("type") == "fact"]
        facts_added = restore_facts(self.store, user_id, facts, capped)
        added = 0
        for item in items:
            if item.get("type", "message") == "message":
                added += import_message(self.store, user_id, dict(item))
        self.index.drop(user_id)
        self.catch_up(progress)
        return Imported(added, facts_added)

    def catch_up(self, progress: Callable[[int, int], None] | None = None) -> int:
        """Index every message waiting for it and finish re-embedding after a change of model,
        now; return messages indexed. After an upgrade that changed what is embedded for a
        chunk, that is every message (`moim migrate` does it, so a restart need not).

        `progress(done, todo)` hears the indexing, a pass at a time.
        """
        todo, done = self.store.count_unindexed(), 0
        while step := self.index_pending(passes=1):
            done += step
            if progress is not None:
                progress(min(done, todo), todo)
        while self.rebuild_vectors():
            pass
        return max(0, todo - self.store.count_unindexed())
