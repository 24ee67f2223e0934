"""The memory layer as one object: what the proxy (or any library user) calls.

`MemoryLayer` owns the store, the embedder and the in-RAM vector index, and offers one
method per thing a caller wants: `recall` a block for a request, `remember` a turn,
`search`, `stats`, `forget`, `export`/`import`. All methods are synchronous and may block
on SQLite or the model: async callers run them in a worker thread.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memory.budget import select_tier
from memory.embedding import Embedder, FastEmbedder
from memory.excerpts import build_excerpts
from memory.fts import fts_terms
from memory.ingest import Turn, content_hash, index_pending, store_turn
from memory.records import Excerpt, Fact, Hit, MemoryBlock, Tier
from memory.render import render_block
from memory.retrieval import build_query, retrieve
from memory.settings import Settings
from memory.store import Stats, Store
from memory.tokens import count_tokens
from memory.vectors import VectorIndex

logger = logging.getLogger(__name__)

EmbedderFactory = Callable[[Settings], Embedder]


def _default_embedder(settings: Settings) -> Embedder:
    return FastEmbedder(settings.embedding_model, settings.embedding_batch_size)


@dataclass(frozen=True, slots=True)
class RecallRequest:
    """What recall needs to know about one chat request."""

    user_id: str
    session_id: str
    model: str
    messages: Sequence[Mapping[str, Any]]
    request_tokens: int
    context_window: int
    token_budget: int | None = None
    episodic: bool = True


@dataclass(frozen=True, slots=True)
class Recollection:
    """The outcome of recall: the tier, the block (None when nothing to inject), the hits."""

    tier: Tier
    block: MemoryBlock | None
    hits: list[Hit]


class MemoryLayer:
    """Store, embedder and vector index of one process."""

    def __init__(self, settings: Settings, embedder_factory: EmbedderFactory | None = None):
        self.settings = settings
        self.store = Store(settings.db_path)
        self.index = VectorIndex(self.store.user_vectors)
        self._factory = embedder_factory or _default_embedder
        self._embedder: Embedder | None = None
        self._load_lock = threading.Lock()

    # -- lifecycle -------------------------------------------------------------------------

    @property
    def embedder(self) -> Embedder:
        """The embedding model, loaded on first use (about a second for the bundled one)."""
        if self._embedder is None:
            with self._load_lock:
                if self._embedder is None:
                    embedder = self._factory(self.settings)
                    if self.store.ensure_vectors(embedder.name, embedder.dim):
                        logger.warning("embedding model changed: every message will be re-indexed")
                    self._embedder = embedder
        return self._embedder

    @property
    def ready(self) -> bool:
        return self._embedder is not None

    # -- read side -------------------------------------------------------------------------

    def recall(self, request: RecallRequest, now: float | None = None) -> Recollection:
        """The tier for this request and the memory block to inject into it."""
        now = time.time() if now is None else now
        tier = select_tier(
            request.request_tokens, request.context_window, self.settings.tier_rules
        )
        facts = self.facts(request.user_id)
        hits: list[Hit] = []
        excerpts: list[Excerpt] = []
        if request.episodic and tier.max_excerpts > 0:
            query = build_query(request.messages)
            exclude = {content_hash(m) for m in request.messages}
            found = retrieve(
                self.store, self.index, self.embedder, self.settings, request.user_id,
                query, exclude, now,
            )
            hits = found.hits[: self.settings.hit_pool]
            excerpts = build_excerpts(hits, tier, fts_terms(query), request.session_id)
        block = self._render(facts, excerpts, request, now)
        return Recollection(tier, block, hits if block else [])

    def _render(
        self,
        facts: list[Fact],
        excerpts: list[Excerpt],
        request: RecallRequest,
        now: float,
    ) -> MemoryBlock | None:
        """Render the block, dropping excerpts (then facts) until it fits the token cap."""
        while True:
            text = render_block(facts, excerpts, now, request.session_id)
            if text is None:
                return None
            tokens = count_tokens(text, request.model)
            if request.token_budget is None or tokens <= request.token_budget:
                return MemoryBlock(text, tokens, len(excerpts), len(facts))
            if excerpts:
                excerpts = excerpts[:-1]
            elif facts:
                facts = facts[:-1]
            else:
                return None

    def search(self, user_id: str, query: str, k: int = 10) -> list[Hit]:
        """The user's chunks for a free-text query, ranked, without abstention or budget."""
        found = retrieve(
            self.store, self.index, self.embedder, self.settings, user_id, query, (),
            time.time(), limit=k,
        )
        return found.hits[:k]

    def facts(self, user_id: str) -> list[Fact]:
        """The user's active facts, pinned first."""
        return []

    # -- write side ------------------------------------------------------------------------

    def remember(self, turn: Turn) -> int:
        """Store a turn durably, then index everything pending; return messages stored."""
        stored = self.store_only(turn)
        self.index_pending()
        return stored

    def store_only(self, turn: Turn) -> int:
        """Make a turn durable (one transaction); indexing is left to `index_pending`."""
        return store_turn(self.store, turn)

    def index_pending(self, batch: int = 64) -> int:
        """Chunk, embed and index every unindexed message; return how many were indexed."""
        total = 0
        while True:
            done = index_pending(self.store, self.embedder, self.index, self.settings, batch)
            total += done
            if done == 0:
                return total

    def reindex(self, progress: Callable[[int, int], None] | None = None) -> int:
        """Rebuild chunks, FTS rows and vectors from the message log."""
        todo = self.store.reset_index()
        self.index.drop()
        done = 0
        while True:
            step = index_pending(self.store, self.embedder, self.index, self.settings, 64)
            if step == 0:
                return done
            done += step
            if progress is not None:
                progress(done, todo)

    # -- housekeeping ----------------------------------------------------------------------

    def stats(self, user_id: str) -> Stats:
        return self.store.stats(user_id)

    def forget(self, user_id: str) -> int:
        """Delete every message, chunk, vector and fact of one user."""
        removed = self.store.delete_user(user_id)
        self.index.drop(user_id)
        return removed

    def export(self, user_id: str) -> Iterator[dict[str, Any]]:
        """The user's messages (and facts) as JSON-ready dicts with a `type` field."""
        for item in self.store.export_messages(user_id):
            yield {"type": "message", **item}

    def import_(self, user_id: str, items: Iterable[Mapping[str, Any]]) -> int:
        """Store exported items for `user_id`, then index them; return messages added."""
        added = 0
        for item in items:
            if item.get("type", "message") == "message":
                added += self.store.import_message(user_id, dict(item))
        self.index.drop(user_id)
        self.index_pending()
        return added

