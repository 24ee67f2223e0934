"""The write side of `MemoryLayer`: store a finished turn, then index it.

A turn is made durable first (`store_only`, one transaction), then chunked, embedded and
indexed (`index_pending`, memory/ingest/turns.py), so a crash between the two loses no turn.
Re-embedding after a change of model, rebuilding every index and the FTS index's upkeep
run here too, one indexer at a time.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from memory import heap
from memory.block.tokens import message_text
from memory.facts.capture import capture_facts
from memory.facts.corrections import by_kind
from memory.facts.rules import apply_captures, retire_facts
from memory.ingest.speakers import is_an_example, several_speakers
from memory.ingest.turns import Turn, index_pending, store_new_messages
from memory.ingest.wrapped import own_words
from memory.layer_core import LayerCore
from memory.store import fts_upkeep, scrub
from memory.store.response_links import (
    ResponseLink,
    link_response,
    linked_response,
    linked_turn,
)
from memory.store.store import Store
from memory.store.vector_rebuild import VectorRebuild


class WriteSide(LayerCore):
    """Storing turns and keeping every index of them up to date."""

    def remember(self, turn: Turn) -> int:
        """Store a turn durably, then index everything pending; return messages stored."""
        stored = self.store_only(turn)
        self.index_pending()
        return stored

    def store_only(self, turn: Turn) -> int:
        """Make a turn durable (one transaction); indexing is left to `index_pending`.

        With `capture_facts` on, facts the user states in the turn's newly stored user
        messages, and in those it takes back (a branch the user went back to), are stored too
        (`memory/facts/capture.py`), at the time each was said. Resent history is not read
        again, and a capture never overrides a fact updated later than it was said.
        """
        # Stored before (a journal replayed after a crash): its reply id is linked to its
        # session at its time, and it adds nothing. A backfill dates a session's turns alike
        # and a provider may give its ids out again, so a link alone does not tell, but for a
        # turn that continues a reply, whose messages are numbered on from the stored ones.
        replayed = turn.response_id is not None and linked_turn(
            self.store, turn.user_id, turn.response_id, turn.session_id, turn.created_at
        )
        if replayed and turn.continues:
            return 0
        if turn.arrived_at is not None and self.store.forgotten_since(
            turn.user_id, turn.arrived_at
        ):
            return 0  # its user was forgotten while it was under way, through another replica
        stored, taken_back = store_new_messages(self.store, turn, replayed)
        if replayed and not stored:
            return 0
        if turn.response_id is not None:
            link = ResponseLink(turn.session_id, turn.context_tokens)
            link_response(self.store, turn.user_id, turn.response_id, link, turn.created_at)
        if self.settings.capture_facts:
            # a message taken back (the user went back to a branch they had left) is read
            # again: its facts went when it was left; it keeps the time it was said
            shared = several_speakers(turn.messages)  # whose are the named ones?
            for message in [*stored, *taken_back]:
                if message.role != "user" or is_an_example(message.name):
                    continue
                if shared and message.name:
                    continue
                text = own_words(message.content)  # not the documents a RAG UI added
                captures = capture_facts(text)
                before = _user_message_before(turn, message.content) if by_kind(captures) else ""
                said = (text, before)
                apply_captures(
                    self.store, turn.user_id, captures, message.id, message.created_at, said
                )
        retire_facts(self.store, turn.user_id, turn.extra.get("injected_facts", ()), time.time())
        return len(stored)

    def response_link(self, user_id: str, response_id: str) -> ResponseLink | None:
        """The session (and context tokens) of a stored Responses API reply, or None."""
        return linked_response(self.store, user_id, response_id)

    def make_searchable(self) -> None:
        """Commit what indexing passes held back from the lexical index (under a backlog a
        pass commits every few: `Store.commit_lexical`), so every chunk indexed so far is found
        by its words too; `flush` ends with it. The store's write lock is enough: a pass
        embedding meanwhile is not waited for."""
        self.store.commit_lexical()

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
                # a message no pass can index is set aside (memory/index_failures.py)
                done = self._index_failures.run(self.store, self.embedder, batch, self._pass)
                total += done
                done_passes += 1
                if done == 0:
                    break
        if total:
            heap.trim()  # the batch's activations are freed: give the memory back
        return total

    def _pass(self, limit: int) -> int:
        """One indexing pass over at most `limit` messages (`memory.ingest.index_pending`)."""
        return index_pending(
            self.store,
            self.embedder,
            self.index,
            self.settings,
            limit,
            self._questions.take,
            self._questions.take_words,
        )

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
        scrub.scrub(self.store, stop)  # a forgotten user's words first (False: next time)
        return fts_upkeep.tidy(self.store, stop, self.settings.fts_merge_after)

    def scrub(self) -> bool:
        """Erase from the files what forgotten users left there (memory/store/scrub.py), now;
        False when a reader kept the WAL (the writer finishes it when idle). Postgres: True,
        its dead rows wait for VACUUM."""
        if not isinstance(self.store, Store):
            return True
        with self._index_lock:
            return scrub.scrub(self.store, lambda: False, wait=True)

    def vacuum(self) -> None:
        """Rewrite the SQLite file, leaving no free page with old bytes (memory/store/scrub.py);
        nothing for Postgres (run its own VACUUM FULL)."""
        if isinstance(self.store, Store):
            scrub.vacuum(self.store)

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

    def wait_for_lexical_index(self, timeout: float | None = None) -> bool:
        """Wait for a rebuild of SQLite's tantivy index under way (FTS5 answers meanwhile);
        True when it answers searches. False on Postgres or with `lexical_index: fts5`."""
        wait = getattr(self.store, "wait_for_lexical_index", None)
        return bool(wait(timeout)) if wait is not None else False


def _user_message_before(turn: Turn, text: str) -> str:
    """The text of the user's message before the latest user message `text` of the turn's
    conversation, or "" (none, or a request carrying only its new messages)."""
    said = [message_text(m) for m in turn.messages if m.get("role") == "user"]
    latest = max((i for i, t in enumerate(said) if t == text), default=0)
    return said[latest - 1] if latest else ""
