"""The memory layer as one object: what the proxy (or any library user) calls.

`MemoryLayer` owns the store, the embedder and the in-RAM vector index, and offers one
method per thing a caller wants: `recall` a block for a request, `remember` a turn,
`search`, `stats`, `forget`, `export`/`import`. All methods are synchronous and may block
on SQLite or the model: async callers run them in a worker thread.

This module holds the read path; the class is built from sides, one concern a module:
`LayerCore` (memory/layer_core.py: construction, the embedder, lifecycle), `FactsSide`
(memory/layer_facts.py), `WriteSide` (memory/layer_write.py: storing and indexing) and
`AdminSide` (memory/layer_admin.py: listing, forget, export, import).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from typing import Any, TypeVar

from memory.block.budget import select_tier
from memory.block.excerpts import Neighbours, build_excerpts, newest_first
from memory.block.latest import lead_with_the_change
from memory.block.left_out import Told, left_out
from memory.block.render import render_block
from memory.block.shown import RequestWords
from memory.block.tokens import count_block_tokens
from memory.embedding import Embedder
from memory.facts.rules import facts_for_block_and_left_out
from memory.ingest.embedding_inputs import question_text
from memory.ingest.identity import content_hash
from memory.ingest.turns import RECALLED_ROLES
from memory.layer_admin import AdminSide
from memory.layer_facts import FactsSide
from memory.recall.changed import about_the_present
from memory.recall.facts_asked import with_the_fact_asked
from memory.recall.query import QUERY_CHARS, build_query, task_query
from memory.recall.retrieval import Retrieval, retrieve
from memory.recall.superseded import replaced_replies
from memory.recollection import PendingRecall, RecallRequest, Recollection
from memory.records import (
    Chunk,
    Counted,
    Excerpt,
    Fact,
    Hit,
    LeftOut,
    MemoryBlock,
    Message,
    Tier,
)
from memory.store.fts import fts_terms

T = TypeVar("T")

__all__ = ["MemoryLayer", "PendingRecall", "RecallRequest", "Recollection"]


class MemoryLayer(AdminSide, FactsSide):
    """Store, embedder and vector index of one process."""

    # -- read side -------------------------------------------------------------------------

    def begin_recall(
        self, user_id: str, messages: Sequence[Mapping[str, Any]], now: float | None = None
    ) -> PendingRecall | None:
        """Start the searches of a recall on another thread, before the request is measured.

        The caller counts the request's tokens and resolves its session meanwhile, then hands
        the result to `recall`. None while the embedding model is loading (no search then),
        and for a request with no user message, whose query needs its session (`task_query`).
        """
        embedder = self._embedder_if_loaded()
        if embedder is None or not any(m.get("role") == "user" for m in messages):
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
        session_id: str | None = None,
    ) -> tuple[Retrieval, set[str]]:
        """Search for the request's query; `held` are hashes of turns the provider holds. A
        request with no user message searches for its session's task (`task_query`)."""
        self._hear_other_processes()
        # Only user and assistant messages have chunks, and a hash says its message's role:
        # no other message's can be a chunk's. An agent's tool results (most of its history's
        # text) are not hashed again here, on the search's path (0.26 -> 0.1 ms at 487 kB).
        exclude = {content_hash(m) for m in messages if m.get("role") in RECALLED_ROLES}
        exclude |= held or set()
        query = build_query(messages)
        if not query and session_id is not None:
            task = self.store.last_user_text(user_id, session_id, QUERY_CHARS)
            query = task_query(messages, task)
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
            shown=self.settings.hit_pool,
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
                    embedder, request.user_id, request.messages, now, held, request.session_id
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
        A caller waiting on an event loop is woken by that thread, not by this one in turn,
        and that thread then counts the block's tokens (`Counted`: ~0.45 ms for new lines)
        while the caller sends the request on. Without a search under way (or once it is
        done) everything runs here, and the block's tokens are counted when first read.
        """
        pending = self._pending_for(request, pending)
        if pending is None:  # no search under way: all of it here
            return _done(lambda: then(self.recall(request)))
        now = pending.now
        tier, facts, dropped = self._tier_and_facts(request)
        embedder = self._episodic_embedder(request, tier, pending)
        result: Future[T] = Future()

        def finish(search: Future[tuple[Retrieval, set[str]]] | None, ahead: bool) -> None:
            try:
                found, exclude = search.result() if search else (Retrieval([], True, ""), set())
                recollection = self._recollect(
                    request, tier, facts, dropped, embedder, found, exclude, now
                )
                result.set_result(then(recollection))
            except BaseException as exc:  # the caller's to handle, on its own thread
                result.set_exception(exc)
                return
            if ahead and recollection.block is not None:  # while the request goes upstream
                _ = recollection.block.tokens

        if embedder is None:  # no excerpts for this request: the search is not waited for
            finish(None, ahead=False)
        elif pending.future.done():
            finish(pending.future, ahead=False)
        else:  # (here at once if it is done by now)
            pending.future.add_done_callback(functools.partial(finish, ahead=True))
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
        repeated: set[int] = set()  # hits left out for repeating (memory.block.shown)
        if embedder is not None:
            found = with_the_fact_asked(found, facts)  # the source of a fact it asks about
            hits = list(found.hits[: self.settings.hit_pool])  # read: the rest is not
            replaced = replaced_replies(
                self.store, request.user_id, request.session_id, request.messages, hits
            )
            if replaced:  # nor shown next to another hit
                exclude = exclude | {
                    h.chunk.message_hash for h in hits if h.chunk.message_id in replaced
                }
                gone = [h for h in hits if h.chunk.message_id in replaced]
                dropped = [*dropped, *(LeftOut("replaced", hit=h) for h in gone)]
                hits = [h for h in hits if h.chunk.message_id not in replaced]
            excerpts = build_excerpts(
                hits,
                tier,
                fts_terms(found.query),
                request.session_id,
                self._neighbours(request.user_id, exclude),
                RequestWords(request.messages).shows,
                repeated,
                about_the_present(found.query),
            )
            excerpts = newest_first(excerpts)
            if self.settings.lead_with_change:
                excerpts = lead_with_the_change(excerpts, tier.max_chars, found.query)
        block = self._render(facts, excerpts, request, now)
        warming = request.episodic and tier.max_excerpts > 0 and embedder is None
        pool = self.settings.hit_pool
        why = Told(  # told when the inspector reads it, after the forward
            lambda: left_out(
                [*found.left_out_heads, *dropped],
                found.hits,
                pool,
                excerpts,
                block,
                facts,
                repeated,
            ),
            found.texts,  # the text of those read only (the ring keeps 40 of ~155)
        )
        return Recollection(
            tier,
            block,
            hits if block else [],
            warming,
            query=found.query,
            left_out=why,
            degraded=found.degraded,
            withheld=found.withheld,
        )

    def _neighbours(self, user_id: str, exclude: set[str]) -> Neighbours:
        around = self.settings.widen_turns

        def neighbours(chunks: Sequence[Chunk]) -> dict[int, list[Message]]:
            if around <= 0:
                return {}
            ids, sessions = (
                [c.message_id for c in chunks],
                {c.message_id: c.session_id for c in chunks},
            )
            return self.store.neighbours(user_id, ids, around, exclude, sessions)

        return neighbours

    def _render(
        self,
        facts: list[Fact],
        excerpts: list[Excerpt],
        request: RecallRequest,
        now: float,
    ) -> MemoryBlock | None:
        """Render the block, dropping excerpts (then facts) until it fits the token cap.

        Without a cap, the block's tokens are counted when first read (`Counted`): the thread
        that recalled counts them once the request is on its way (`recall_then`).
        """
        while True:
            text = render_block(facts, excerpts, now, request.session_id)
            if text is None:
                return None
            if request.token_budget is None:
                tokens = Counted(functools.partial(count_block_tokens, text, request.model))
            else:
                tokens = Counted(count_block_tokens(text, request.model))
            if request.token_budget is None or tokens.value <= request.token_budget:
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
        self,
        user_id: str,
        derived: str,
        messages: Sequence[Mapping[str, Any]],
        queued: Callable[[str, Sequence[str]], str | None] | None = None,
    ) -> str:
        """The session a request without a session id belongs to.

        The id derived from the opening messages holds while the client keeps them; a client
        that slides its window drops the opening, so the request's earlier user and assistant
        turns are looked up instead, and the conversation stays one session. `queued` looks
        them up among turns not yet stored first: a client that sends its next turn at once
        continues a turn the writer may still hold.
        """
        earlier = [m for m in messages[:-1] if m.get("role") in ("user", "assistant")]
        if not earlier or self.store.has_session(user_id, derived):
            return derived
        hashes = [content_hash(m) for m in earlier]
        found = queued(user_id, hashes) if queued is not None else None
        return found or self.store.session_with(user_id, hashes) or derived

    def search(self, user_id: str, query: str, k: int = 10) -> list[Hit]:
        """The user's chunks for a free-text query, ranked, without abstention or budget."""
        embedder = self.embedder
        self._hear_other_processes()
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
        return list(found.hits[:k])


def _done(compute: Callable[[], T]) -> Future[T]:
    """A future already holding what `compute()` returned, or what it raised."""
    result: Future[T] = Future()
    try:
        result.set_result(compute())
    except BaseException as exc:
        result.set_exception(exc)
    return result
