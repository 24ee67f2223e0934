"""What every part of `MemoryLayer` stands on: the store, the embedder and the vector index.

`LayerCore` opens (and migrates) the store, loads the embedding model on first use, opens the
writer's journal and closes it all. The facade (memory/layer.py) adds the read path to it,
and the sides it is built from the rest: facts (memory/layer_facts.py), writing and indexing
(memory/layer_write.py), listing and housekeeping (memory/layer_admin.py).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

from memory.embedding import Embedder, FastEmbedder
from memory.errors import EmbeddingFailed
from memory.facts.rules import MAX_SILENCE
from memory.index_failures import IndexFailures
from memory.ingest.reembed import Rebuilds
from memory.question_vectors import QuestionVectors
from memory.recall.vectors import VectorIndex
from memory.recall.vocabulary import Vocabulary, vocabulary_word
from memory.settings import Settings
from memory.store import fact_rows
from memory.store.backend import StoreBackend, open_store
from memory.store.journal import Journal
from memory.store.journal_lock import JournalLock
from memory.store.migrations import MigrationProgress

logger = logging.getLogger(__name__)

EmbedderFactory = Callable[[Settings], Embedder]
# After the embedder failed to load, requests go on without it for this long before one
# tries again: a remote embedder that is down must not cost every request its timeout.
LOAD_RETRY_SECONDS = 10.0


def recall_threads(cores: int | None) -> int:
    """How many recalls search at once: two a core, 2 to 8 (8 on any machine before).

    A recall's search is CPU work (the question's embedding, the scans) on one core each, so
    threads past two a core only queue at the CPU instead of in the pool. The embedder keeps
    the activations of the runs in flight in onnxruntime's arena (memory/embedding.py), so
    fewer runs at once hold less: `bench/load.py` on 2 cores, 4 threads against 8, RSS at
    most 375 and 385 MB against 395 (8 without the arena: 403 either way).
    """
    return max(2, min(8, 2 * (cores or 1)))


def _default_embedder(settings: Settings) -> Embedder:
    return FastEmbedder(
        settings.embedding_model, settings.embedding_batch_size, settings.embedding_threads
    )


class LayerCore:
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
        self._journal_lock: JournalLock | None = None
        # Read a batch at a time: a big user's rows go to int8 and a file as they come
        # (memory/recall/row_load.py), never all in floats at once.
        self.index = VectorIndex(batches=self.store.read_user_vectors)
        self.vocabulary = Vocabulary(self.store)
        self._factory = embedder_factory or _default_embedder
        self._embedder: Embedder | None = None
        # Recall's question vectors, for the writer to store rather than embed again.
        self._questions = QuestionVectors(keep=vocabulary_word)
        self._load_lock = threading.Lock()
        self._load_failed = 0.0  # time.monotonic() of the last failed load
        self._load_announced = False  # a warm-up will load the embedder (`announce_load`)
        self.rebuilds = Rebuilds(self.store, self.index, settings)
        self._index_lock = threading.Lock()
        self._index_failures = IndexFailures()  # messages no pass can index (set aside)
        # Searches begun before the request is measured (`begin_recall`).
        self._ahead = ThreadPoolExecutor(
            max_workers=recall_threads(os.cpu_count()), thread_name_prefix="moim-recall"
        )

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
                    finally:
                        self._load_announced = False
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

    def _hear_other_processes(self) -> None:
        """Drop what this process mirrors of chunks in RAM (vectors, word vectors, recent
        questions' vectors) when another process changed them, such as `moim memory import`
        beside the server: each user's reloads from the store at their next recall."""
        if self.store.take_foreign_change():
            self.index.drop()
            self.vocabulary.drop()
            self._questions.drop()

    @property
    def ready(self) -> bool:
        return self._embedder is not None

    def announce_load(self) -> None:
        """Say that a warm-up is about to load the embedder off the request path (the app's,
        at start, after the tokenizer: a second). Until it has tried, recall goes on without
        the model: a request in that second loaded it itself, on the event loop."""
        self._load_announced = True

    def _embedder_if_loaded(self) -> Embedder | None:
        """The embedder, or None while a warm-up is about to load it or another thread is.

        The first start converts the bundled model (seconds): a request that arrives then
        goes on with facts only instead of waiting. With no load under way (a layer used
        directly, without the app's warm-up) the model is loaded here, as before.
        """
        if self._embedder is None and (self._load_announced or self._load_lock.locked()):
            return None
        if self._embedder is None and time.monotonic() - self._load_failed < LOAD_RETRY_SECONDS:
            raise EmbeddingFailed("the embedding model failed to load; retrying shortly")
        return self.embedder

    # -- replicas ----------------------------------------------------------------------------

    def _expire_facts(self, user_id: str) -> None:
        """Turn the user's facts past their expiry stale before they are read, as a block does:
        a listing or a count (the API, `moim facts`, `moim stats`, the recall_facts tool) never
        shows one as current. One indexed read when none is due."""
        fact_rows.expire_facts(self.store, time.time(), user_id=user_id, max_silence=MAX_SILENCE)

    @property
    def migrations_applied(self) -> list[str]:
        """The migrations this process applied on opening the store (none: it was current)."""
        return self.store.migrations_applied

    @property
    def shared(self) -> bool:
        """True when the store is Postgres, shared with other replicas."""
        return self.settings.db_url is not None

    def open_journal(self, path: Path, lock: JournalLock | None = None) -> Journal:
        """The journal the writer appends finished turns to: the file at `path` for SQLite;
        for Postgres the `pending_turns` table, with that file for when it is unreachable.

        This process holds the file's lock until `close` (memory/store/journal_lock.py):
        `lock` when given (`moim serve` takes it before it opens the store), else taken here,
        JournalInUse when another process holds it. Opened again, the same journal.
        """
        if self._journal is not None and self._journal.path == Path(path):
            return self._journal
        lock = lock or JournalLock(Path(path))
        try:
            if self.settings.db_url is None:
                self._journal = Journal(path)
            else:
                from memory.store.pg_journal import PgJournal
                from memory.store.postgres import PgStore

                assert isinstance(self.store, PgStore)
                self._journal = PgJournal(self.store, path)
        except BaseException:
            lock.release()
            raise
        if self._journal_lock is not None:  # another path's, given up with its journal
            self._journal_lock.release()
        self._journal_lock = lock
        return self._journal

    def close(self) -> None:
        """Close the store's connections (Postgres's pool; SQLite's close with the process)
        and let go of the lexical index and of the journal's lock."""
        journal_close = getattr(self._journal, "close", None)
        if journal_close is not None:
            journal_close()
        self._journal = None
        if self._journal_lock is not None:
            self._journal_lock.release()
            self._journal_lock = None
        close = getattr(self.store, "close", None)
        if close is not None:
            close()
        close_embedder = getattr(self._embedder, "close", None)  # a service's connections
        if close_embedder is not None:
            close_embedder()
