"""One step of re-embedding the chunks after the embedding model changed.

`memory/store/vector_rebuild.py` keeps the rebuild's state and says why it exists. A step reads
the next chunks (in user order), embeds each as indexing would have (`embedding_inputs`: the
chunk after its speaker's name, a message's first chunk after the previous turn's tail),
stores the vectors and moves the cursor in one transaction, and appends them to the in-RAM
index of users already loaded. The writer runs steps when no new turn waits to be indexed,
so new turns are never held up behind a rebuild.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np

from memory.embedding import Embedder
from memory.ingest.embedding_inputs import embedding_inputs
from memory.recall.vectors import VectorIndex
from memory.records import Message
from memory.settings import Settings
from memory.store import vector_rebuild
from memory.store.backend import StoreBackend as Store
from memory.store.vector_rebuild import PendingChunk, VectorRebuild

logger = logging.getLogger(__name__)


def reembed_step(
    store: Store, embedder: Embedder, index: VectorIndex, settings: Settings, limit: int
) -> int | None:
    """Re-embed up to `limit` chunks; return how many were done, 0 once the rebuild is over
    (or there is none), None when another process did this step first."""
    rebuild = vector_rebuild.state(store)
    if rebuild is None:
        return 0
    chunks = vector_rebuild.pending(store, rebuild, limit)
    inputs = [_input(store, settings, chunk) for chunk in chunks]
    vectors = embedder.embed_documents(inputs) if inputs else None
    saved = vector_rebuild.save(store, rebuild, chunks, vectors)
    if saved is None:
        return None
    if vectors is not None:
        _add_to_index(index, chunks, saved, vectors)
    return len(chunks)


def _input(store: Store, settings: Settings, chunk: PendingChunk) -> str:
    message = Message(
        chunk.message_id,
        chunk.user_id,
        chunk.session_id,
        chunk.role,
        chunk.name,  # the speaker as indexing stored it (a text label already split off)
        chunk.text,
        chunk.created_at,
    )
    inputs, _ = embedding_inputs(store, settings, message, [chunk.text], chunk.position)
    return inputs[0]


def _add_to_index(
    index: VectorIndex,
    chunks: Sequence[PendingChunk],
    saved: Sequence[PendingChunk],
    vectors: np.ndarray,
) -> None:
    """Append the stored vectors to the RAM index, per user (loaded users only)."""
    row_of = {chunk.id: row for row, chunk in enumerate(chunks)}
    by_user: dict[str, list[int]] = {}
    for chunk in saved:
        by_user.setdefault(chunk.user_id, []).append(chunk.id)
    for user_id, ids in by_user.items():
        index.add(user_id, ids, vectors[[row_of[i] for i in ids]])


class Rebuilds:
    """The process's view of the rebuild: whether one may be under way, which users are
    ready for dense recall, and the steps. Postgres replicas share the rebuild; each one's
    writer runs steps, and each notices the end when a step of its own finds nothing left.
    """

    def __init__(self, store: Store, index: VectorIndex, settings: Settings) -> None:
        self._store = store
        self._index = index
        self._settings = settings
        self.active = vector_rebuild.state(store) is not None

    def started(self) -> VectorRebuild | None:
        """After `ensure_vectors` changed the model: the rebuild, if one began."""
        rebuild = vector_rebuild.state(self._store)
        self.active = rebuild is not None
        self._index.drop()  # any vector held in RAM is of the old model
        return rebuild

    def ready(self, user_id: str) -> bool:
        """True when the user's vectors are all of the current model (dense recall may
        run); a read of the rebuild's row and one index probe while a rebuild is under way."""
        if not self.active:
            return True
        rebuild = vector_rebuild.state(self._store)
        if rebuild is None:
            self.active = False
            return True
        return vector_rebuild.user_ready(self._store, user_id, rebuild)

    def step(self, embedder: Embedder) -> int:
        """Re-embed one batch (`index_slice_chunks` chunks); 0 when nothing is left."""
        if not self.active:
            return 0
        done = reembed_step(
            self._store, embedder, self._index, self._settings, self._settings.index_slice_chunks
        )
        if done == 0:
            self.active = False
            logger.warning("vector rebuild finished: every chunk has its new-model vector")
        return 1 if done is None else done  # another replica's step: look again

    def progress(self) -> VectorRebuild | None:
        """The rebuild under way (how far it is), or None."""
        if not self.active:
            return None
        return vector_rebuild.state(self._store)
