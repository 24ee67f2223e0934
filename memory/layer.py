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
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from memory import heap
from memory.block.budget import select_tier
from memory.block.excerpts import Neighbours, build_excerpts, newest_first
from memory.block.left_out import left_out
from memory.block.render import render_block
from memory.block.tokens import count_block_tokens
from memory.embedding import Embedder, FastEmbedder, QuestionVectors
from memory.errors import EmbeddingFailed
from memory.facts.capture import capture_facts
from memory.facts.consolidation import Operation, apply_operations
from memory.facts.rules import (
    MAX_SILENCE,
    apply_captures,
    check_status,
    facts_for_block,
    facts_for_block_and_left_out,
    resolve_key,
    restore_facts,
    retire_facts,
)
from memory.facts.rules import set_fact as _set_fact
from memory.ingest.reembed import Rebuilds
from memory.ingest.turns import (
    Turn,
    content_hash,
    index_pending,
    question_text,
    store_new_messages,
)
from memory.recall.retrieval import Retrieval, build_query, retrieve
from memory.recall.vectors import HALF_FROM, VectorIndex
from memory.recall.vocabulary import Vocabulary
from memory.records import Chunk, Excerpt, Fact, Hit, LeftOut, MemoryBlock, Message, Tier
from memory.settings import Settings
from memory.store import fact_rows, fts_upkeep, marks, overview
from memory.store.backend import StoreBackend, open_store
from memory.store.fts import fts_terms
from memory.store.journal import Journal
from memory.store.marks import DueUser
from memory.store.migrations import MigrationProgress
from memory.store.overview import SessionSummary, UserSummary
from memory.store.response_links import ResponseLink, link_response, linked_response
from memory.store.sizes import StoreSizes, store_sizes
from memory.store.store import Stats, Store
from memory.store.transfer import export_messages, import_message
from memory.store.vector_rebuild import VectorRebuild

logger = logging.getLogger(__name__)

EmbedderFactory = Callable[[Settings], Embedder]
T = TypeVar("T")
# After the embedder failed to load, requests go on without it for this long before one
# tries again: a remote embedder that is down must not cost every request its timeout.
LOAD_RETRY_SECONDS = 10.0


def _default_embedder(settings: Settings) -> Embedder:
    return FastEmbedder(
        settings.embedding_model, settings.embedding_batch_size, settings.embedding_threads
    )


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
    # The provider holds this session's earlier turns (a Responses API request continuing a
    # reply): the model sees them though the request does not carry them, so none is recalled.
    session_in_context: bool = False


@dataclass(frozen=True, slots=True)
class PendingRecall:
    """A recall's searches under way (`MemoryLayer.begin_recall`), for `MemoryLayer.recall`."""

    user_id: str
    messages: Sequence[Mapping[str, Any]]
    now: float
    future: Future[tuple[Retrieval, set[str]]]


@dataclass(frozen=True, slots=True)
class Recollection:
    """The outcome of recall: the tier, the block (None when nothing to inject), the hits."""

    tier: Tier
    block: MemoryBlock | None
    hits: list[Hit]
    # True when excerpts were skipped because the embedding model was still loading.
    warming: bool = False
    # For the inspector: the query recall searched with ("" when it did not search), and what
    # it kept out of the block and why (memory/block/left_out.py).
    query: str = ""
    left_out: tuple[LeftOut, ...] = ()
    # Set when recall went on by keywords alone because the embedder failed: what to tell.
    degraded: str | None = None


class MemoryLayer:
    """Store, embedder and vector index of one process."""

    def __init__(
        self,
        settings: Settings,
        embedder_factory: EmbedderFactory | None = None,
        on_migration: MigrationProgress | None = None,
    ):
        """Open (and migrate) the store; `on_migration(done, total, name)` hears an upgrade."""
        if settings.db_url:  # shared by replicas: no RAM copy of the vectors to go stale
            settings = replace(settings, vector_search="db")
        self.settings = settings
        self.store: StoreBackend = open_store(settings, on_migration)
        self._journal: Journal | None = None
        # Big users' rows in float16 (memory/recall/vectors.py): half the RAM, same top hits.
        self.index = VectorIndex(partial(self.store.user_vectors, half_from=HALF_FROM))
        self.vocabulary = Vocabulary(self.store)
        self._factory = embedder_factory or _default_embedder
        self._embedder: Embedder | None = None
        # Recall's question vectors, for the writer to store rather than embed again.
        self._questions = QuestionVectors()
        self._load_lock = threading.Lock()
        self._load_failed = 0.0  # time.monotonic() of the last failed load
        self.rebuilds = Rebuilds(self.store, self.index, settings)
        self._index_lock = threading.Lock()
        # Searches begun before the request is measured (`begin_recall`).
        self._ahead = ThreadPoolExecutor(max_workers=8, thread_name_prefix="moim-recall")

    # -- lifecycle -------------------------------------------------------------------------

    @property
    def embedder(self) -> Embedder:
        """The embedding model, loaded on first use (about a second for the bundled one).

        Raises what loading raises (EmbeddingFailed: e.g. a remote embedder unreachable).
        """
        if self._embedder is None:
            with self._load_lock:
                if self._embedder is None:
                    try:
                        embedder = self._factory(self.settings)
                    except Exception:
                        self._load_failed = time.monotonic()
                        raise
                    if self.store.ensure_vectors(embedder.name, embedder.dim):
                        self._announce_change()
                    self._embedder = embedder
        return self._embedder

    def _announce_change(self) -> None:
        """Log what a change of embedding model costs (`ensure_vectors` returned True)."""
        rebuild = self.rebuilds.started()
        if rebuild is None:
            logger.warning("embedding layout changed: every message will be re-indexed")
            return
        if rebuild.done:
            logger.warning(
                "re-embedding chunks for %s resumes: %d of %d done; until a user's are done, "
                "their recall is by keywords only",
                rebuild.new_model,
                rebuild.done,
                rebuild.total,
            )
            return
        logger.warning(
            "embedding model changed from %s to %s: re-embedding %d chunks in the background; "
            "until a user's are done, their recall is by keywords only",
            rebuild.old_model,
            rebuild.new_model,
            rebuild.total,
        )

    @property
    def ready(self) -> bool:
        return self._embedder is not None

    def _embedder_if_loaded(self) -> Embedder | None:
        """The embedder, or None while another thread is loading it.

        The first start converts the bundled model (seconds): a request that arrives then
        goes on with facts only instead of waiting. With no load under way (a layer used
        directly, without the app's warm-up) the model is loaded here, as before.
        """
        if self._embedder is None and self._load_lock.locked():
            return None
        if self._embedder is None and time.monotonic() - self._load_failed < LOAD_RETRY_SECONDS:
            raise EmbeddingFailed("the embedding model failed to load; retrying shortly")
        return self.embedder

    # -- read side -------------------------------------------------------------------------

    def begin_recall(
        self, user_id: str, messages: Sequence[Mapping[str, Any]], now: float | None = None
    ) -> PendingRecall | None:
        """Start the searches of a recall on another thread, before the request is measured.

        The caller counts the request's tokens and resolves its session meanwhile, then hands
        the result to `recall`. None while the embedding model is loading (no search then).
        """
        embedder = self._embedder_if_loaded()
        if embedder is None:
            return None
        now = time.time() if now is None else now
        future = self._ahead.submit(self._retrieve, embedder, user_id, messages, now)
        return PendingRecall(user_id, messages, now, future)

    def _retrieve(
        self,
        embedder: Embedder,
        user_id: str,
        messages: Sequence[Mapping[str, Any]],
        now: float,
        held: set[str] | None = None,
    ) -> tuple[Retrieval, set[str]]:
        """Search for the request's query; `held` are hashes of turns the provider holds."""
        exclude = {content_hash(m) for m in messages} | (held or set())
        query = build_query(messages)
        ready = self.rebuilds.ready(user_id)  # else keywords only: vectors being rebuilt
        question = question_text(messages, self.settings)  # the only vector the writer takes
        noting = self._questions.noting(embedder, user_id, question) if question else embedder
        found = retrieve(
            self.store,
            self.index,
            noting if ready else None,
            self.settings,
            user_id,
            query,
            exclude,
            now,
            question=question,
            vocabulary=self.vocabulary,
        )
        return found, exclude

    def recall(
        self,
        request: RecallRequest,
        now: float | None = None,
        pending: PendingRecall | None = None,
    ) -> Recollection:
        """The tier for this request and the memory block to inject into it.

        `pending` (from `begin_recall` for the same user and messages) is the search already
        under way; without it, recall searches here.
        """
        pending = self._pending_for(request, pending)
        now = (pending.now if pending else time.time()) if now is None else now
        tier, facts, dropped = self._tier_and_facts(request)
        embedder = self._episodic_embedder(request, tier, pending)
        found, exclude = Retrieval([], True, ""), set[str]()
        if embedder is not None:
            if pending is not None:
                found, exclude = pending.future.result()
            else:
                held: set[str] = set()
                if request.session_in_context:
                    stored = self.store.stored_keys(request.user_id, request.session_id)
                    held = {key.partition("#")[0] for key in stored}
                found, exclude = self._retrieve(
                    embedder, request.user_id, request.messages, now, held
                )
        return self._recollect(request, tier, facts, dropped, embedder, found, exclude, now)

    def recall_then(
        self,
        request: RecallRequest,
        then: Callable[[Recollection], T],
        pending: PendingRecall | None = None,
    ) -> Future[T]:
        """`then(recall(request, pending=pending))`, finished by the thread that searches.

        The tier and the facts are read here, while the search `begin_recall` started goes on;
        the excerpts, the block and `then` run on the search's thread as soon as it is done,
        and the returned future holds what `then` returned (or what it, or recall, raised).
        A caller waiting on an event loop is woken by that thread, not by this one in turn.
        Without a search under way (or once it is done) everything runs here.
        """
        pending = self._pending_for(request, pending)
        if pending is None:  # no search under way: all of it here
            return _done(lambda: then(self.recall(request)))
        now = pending.now
        tier, facts, dropped = self._tier_and_facts(request)
        embedder = self._episodic_embedder(request, tier, pending)
        result: Future[T] = Future()

        def finish(search: Future[tuple[Retrieval, set[str]]] | None) -> None:
            try:
                found, exclude = search.result() if search else (Retrieval([], True, ""), set())
                recollection = self._recollect(
                    request, tier, facts, dropped, embedder, found, exclude, now
                )
                result.set_result(then(recollection))
            except BaseException as exc:  # the caller's to handle, on its own thread
                result.set_exception(exc)

        if embedder is None:  # no excerpts for this request: the search is not waited for
            finish(None)
        else:
            pending.future.add_done_callback(finish)  # here at once if it is done already
        return result

    def _pending_for(
        self, request: RecallRequest, pending: PendingRecall | None
    ) -> PendingRecall | None:
        """`pending` if it is this request's search, else None."""
        if pending is not None and (
            pending.user_id != request.user_id
            or pending.messages is not request.messages
            or request.session_in_context  # its exclusions need the session: search here
        ):
            return None  # not this request's results
        return pending

    def _tier_and_facts(self, request: RecallRequest) -> tuple[Tier, list[Fact], list[LeftOut]]:
        """The request's tier, and the facts for its block (with those kept out, and why)."""
        tier = select_tier(request.request_tokens, request.context_window, self.settings.tier_rules)
        facts, dropped = facts_for_block_and_left_out(
            self.store, request.user_id, self.settings.facts_max_tokens, time.time()
        )
        return tier, facts, dropped

    def _episodic_embedder(
        self, request: RecallRequest, tier: Tier, pending: PendingRecall | None
    ) -> Embedder | None:
        """The embedder to recall excerpts with; None when the request gets none, or while
        the model loads."""
        if not request.episodic or tier.max_excerpts <= 0:
            return None
        return self._embedder_if_loaded() if pending is None else self._embedder

    def _recollect(
        self,
        request: RecallRequest,
        tier: Tier,
        facts: list[Fact],
        dropped: list[LeftOut],
        embedder: Embedder | None,
        found: Retrieval,
        exclude: set[str],
        now: float,
    ) -> Recollection:
        """The excerpts of what the search found, the block, and what was left out."""
        hits: list[Hit] = []
        excerpts: list[Excerpt] = []
        if embedder is not None:
            hits = found.hits[: self.settings.hit_pool]
            excerpts = build_excerpts(
                hits,
                tier,
                fts_terms(found.query),
                request.session_id,
                self._neighbours(request.user_id, exclude),
            )
            excerpts = newest_first(excerpts)
        block = self._render(facts, excerpts, request, now)
        warming = request.episodic and tier.max_excerpts > 0 and embedder is None
        pool = self.settings.hit_pool
        why = left_out([*found.left_out, *dropped], found.hits, pool, excerpts, block, facts)
        return Recollection(
            tier,
            block,
            hits if block else [],
            warming,
            query=found.query,
            left_out=why,
            degraded=found.degraded,
        )

    def _neighbours(self, user_id: str, exclude: set[str]) -> Neighbours:
        around = self.settings.widen_turns

        def neighbours(chunks: Sequence[Chunk]) -> dict[int, list[Message]]:
            if around <= 0:
                return {}
            return self.store.neighbours(user_id, [c.message_id for c in chunks], around, exclude)

        return neighbours

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
            tokens = count_block_tokens(text, request.model)
            if request.token_budget is None or tokens <= request.token_budget:
                return MemoryBlock(
                    text,
                    tokens,
                    len(excerpts),
                    len(facts),
                    tuple(f.id for f in facts),
                    tuple(excerpts),
                )
            if excerpts:  # the least relevant goes first
                least = max(excerpts, key=lambda e: e.rank)
                excerpts = [e for e in excerpts if e is not least]
            elif facts:
                facts = facts[:-1]
            else:
                return None

    def continue_session(
        self, user_id: str, derived: str, messages: Sequence[Mapping[str, Any]]
    ) -> str:
        """The session a request without a session id belongs to.

        The id derived from the opening messages holds while the client keeps them; a client
        that slides its window drops the opening, so the request's earlier user and assistant
        turns are looked up instead, and the conversation stays one session.
        """
        earlier = [m for m in messages[:-1] if m.get("role") in ("user", "assistant")]
        if not earlier or self.store.has_session(user_id, derived):
            return derived
        found = self.store.session_with(user_id, [content_hash(m) for m in earlier])
        return found or derived

    def search(self, user_id: str, query: str, k: int = 10) -> list[Hit]:
        """The user's chunks for a free-text query, ranked, without abstention or budget."""
        embedder = self.embedder
        found = retrieve(
            self.store,
            self.index,
            embedder if self.rebuilds.ready(user_id) else None,
            self.settings,
            user_id,
            query,
            (),
            time.time(),
            limit=k,
            gate=False,
            vocabulary=self.vocabulary,
        )
        return found.hits[:k]

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
        return fact_rows.fact_history(self.store, user_id, key)

    def list_facts(self, user_id: str, status: str | None = None) -> list[Fact]:
        """The user's fact rows with this status (every status when None), oldest first.

        Raises ValueError for a status other than active, superseded, stale or archived.
        """
        wanted = None if status is None else check_status(status)
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

    def consolidated_through(self, user_id: str) -> int:
        return marks.consolidated_through(self.store, user_id)

    def unread_turns(self, user_id: str, limit: int) -> list[Message]:
        """The oldest `limit` turns no consolidation has read yet, oldest first."""
        return marks.unread_turns(self.store, user_id, limit)

    # -- write side ------------------------------------------------------------------------

    def remember(self, turn: Turn) -> int:
        """Store a turn durably, then index everything pending; return messages stored."""
        stored = self.store_only(turn)
        self.index_pending()
        return stored

    def store_only(self, turn: Turn) -> int:
        """Make a turn durable (one transaction); indexing is left to `index_pending`.

        With `capture_facts` on, facts the user states in the turn's newly stored user
        messages are stored too (`memory/facts/capture.py`). Resent history is not read again, so an
        old statement never overrides a newer one.
        """
        if turn.response_id is not None and self.response_link(turn.user_id, turn.response_id):
            return 0  # stored before: a journal replayed after a crash
        stored = store_new_messages(self.store, turn)
        if turn.response_id is not None:
            link = ResponseLink(turn.session_id, turn.context_tokens)
            link_response(self.store, turn.user_id, turn.response_id, link, turn.created_at)
        if self.settings.capture_facts:
            for message in stored:
                if message.role == "user":
                    captures = capture_facts(message.content)
                    apply_captures(self.store, turn.user_id, captures, message.id, turn.created_at)
        retire_facts(self.store, turn.user_id, turn.extra.get("injected_facts", ()), time.time())
        return len(stored)

    def response_link(self, user_id: str, response_id: str) -> ResponseLink | None:
        """The session (and context tokens) of a stored Responses API reply, or None."""
        return linked_response(self.store, user_id, response_id)

    def index_pending(self, batch: int = 64, passes: int | None = None) -> int:
        """Chunk, embed and index unindexed messages, oldest first, a pass at a time.

        A pass looks at `batch` messages and embeds at most `settings.index_slice_chunks`
        chunks; a larger message takes several passes, and messages not yet begun go before
        it (`memory.ingest.index_pending`). Everything pending by default; at most `passes`
        passes when given (the writer runs one, then stores newly finished turns, so neither
        waits on the other). Returns how many messages were worked on, summed over passes.
        """
        total, done_passes = 0, 0
        with self._index_lock:  # one indexer at a time: the writer, an import, a reindex
            while passes is None or done_passes < passes:
                known = self._questions.take
                done = index_pending(
                    self.store,
                    self.embedder,
                    self.index,
                    self.settings,
                    batch,
                    known,
                    self._questions.take_words,
                )
                total += done
                done_passes += 1
                if done == 0:
                    break
        if total:
            heap.trim()  # the batch's activations are freed: give the memory back
        return total

    def rebuild_vectors(self) -> int:
        """Re-embed one batch of chunks after a change of embedding model (the writer runs
        it when no turn waits to be indexed); 0 when no rebuild is under way or it is over."""
        if not self.rebuilds.active:
            return 0
        with self._index_lock:
            return self.rebuilds.step(self.embedder)

    def vector_rebuild(self) -> VectorRebuild | None:
        """The re-embedding under way after a change of model (its progress), or None."""
        return self.rebuilds.progress()

    def tidy_index(self, stop: Callable[[], bool]) -> bool:
        """Merge the FTS index a step at a time until it is whole or `stop()` is true; for
        the writer's idle time (memory/store/fts_upkeep.py). True when it merged it whole."""
        if not isinstance(self.store, Store):
            return True  # Postgres keeps its own indexes
        return fts_upkeep.tidy(self.store, stop, self.settings.fts_merge_after)

    def reindex(self, progress: Callable[[int, int], None] | None = None) -> int:
        """Rebuild chunks, FTS rows and vectors from the message log; return how many
        messages were re-indexed. `progress(done, todo)` is called about twice a second."""
        with self._index_lock:
            todo = self.store.reset_index()  # a rebuild under way ends: all is indexed anew
            self.rebuilds.active = False
            self.index.drop()
            shown = time.monotonic()
            while index_pending(self.store, self.embedder, self.index, self.settings, 64):
                if progress is not None and time.monotonic() - shown >= 0.5:
                    progress(todo - self.store.count_unindexed(), todo)  # a pass may do a slice
                    shown = time.monotonic()
            if progress is not None:
                progress(todo, todo)
            return todo

    # -- replicas ----------------------------------------------------------------------------

    @property
    def shared(self) -> bool:
        """True when the store is Postgres, shared with other replicas."""
        return self.settings.db_url is not None

    def open_journal(self, path: Path) -> Journal:
        """The journal the writer appends finished turns to: the file at `path` for SQLite;
        for Postgres the `pending_turns` table, with that file for when it is unreachable."""
        if self.settings.db_url is None:
            self._journal = Journal(path)
        else:
            from memory.store.pg_journal import PgJournal
            from memory.store.postgres import PgStore

            assert isinstance(self.store, PgStore)
            self._journal = PgJournal(self.store, path)
        return self._journal

    def recover_replicas(self) -> int:
        """Store the turns replicas that died left in the shared journal, then index one batch
        of whatever is unindexed (theirs too); return turns adopted. Postgres only."""
        from memory.store.pg_journal import PgJournal

        adopted = 0
        if isinstance(self._journal, PgJournal):
            adopted = self._journal.adopt(self.store_only)
        if self.store.count_unindexed():
            self.index_pending(passes=1)
        return adopted

    def user_ids(self) -> list[str]:
        """Every user with a message or a fact, sorted (for copying a whole store)."""
        return overview.user_ids(self.store)

    def wait_for_lexical_index(self, timeout: float | None = None) -> bool:
        """Wait for a rebuild of SQLite's tantivy index under way (FTS5 answers meanwhile);
        True when it answers searches. False on Postgres or with `lexical_index: fts5`."""
        wait = getattr(self.store, "wait_for_lexical_index", None)
        return bool(wait(timeout)) if wait is not None else False

    def close(self) -> None:
        """Close the store's connections (Postgres's pool; SQLite's close with the process)
        and let go of the lexical index."""
        journal_close = getattr(self._journal, "close", None)
        if journal_close is not None:
            journal_close()
        close = getattr(self.store, "close", None)
        if close is not None:
            close()
        close_embedder = getattr(self._embedder, "close", None)  # a service's connections
        if close_embedder is not None:
            close_embedder()

    # -- housekeeping ----------------------------------------------------------------------

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

    def vector_users_loaded(self) -> int:
        """Users whose vectors are held in RAM right now."""
        return self.index.loaded_users()

    def vectors_loaded(self) -> int:
        """Vectors held in RAM right now, over every loaded user."""
        return self.index.loaded_vectors()

    def apply_consolidation(
        self, user_id: str, accepted: Sequence[Operation], now: float
    ) -> list[Fact]:
        """Apply gated consolidation operations in one transaction (all or nothing)."""
        return apply_operations(self.store, user_id, accepted, now)

    def stats(self, user_id: str) -> Stats:
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

    def forget(self, user_id: str) -> int:
        """Delete every message, chunk, vector and fact of one user."""
        removed = self.store.delete_user(user_id)
        self.index.drop(user_id)
        self.vocabulary.drop(user_id)
        self._questions.drop(user_id)
        forget_queries = getattr(self._embedder, "forget_queries", None)
        if forget_queries is not None:  # the model's own cache of recent questions
            forget_queries()
        return removed

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
    ) -> int:
        """Store exported items for `user_id`, then index them; return messages added.

        Fact rows (`"type": "fact"`) are restored with their history (`restore_facts`).
        `progress(done, todo)` hears the indexing, a pass at a time (todo: every message
        waiting to be indexed, this import's and any other).
        """
        added = 0
        fact_rows = []
        for item in items:
            if item.get("type", "message") == "message":
                added += import_message(self.store, user_id, dict(item))
            elif item.get("type") == "fact":
                fact_rows.append(item)
        restore_facts(self.store, user_id, fact_rows)
        self.index.drop(user_id)
        todo, done = self.store.count_unindexed(), 0
        while step := self.index_pending(passes=1):
            done += step
            if progress is not None:
                progress(min(done, todo), todo)
        return added


def _done(compute: Callable[[], T]) -> Future[T]:
    """A future already holding what `compute()` returned, or what it raised."""
    result: Future[T] = Future()
    try:
        result.set_result(compute())
    except BaseException as exc:
        result.set_exception(exc)
    return result
