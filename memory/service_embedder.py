"""An embedding model behind a service call: a stronger model than the bundled one, elsewhere.

The memory layer has no HTTP in it. Whoever builds the layer supplies an `EmbeddingService`,
a call that takes texts and returns one vector per text (the proxy's: an OpenAI-compatible
`/embeddings` endpoint over httpx, or litellm's `embedding`; proxy/embedding_service.py), and
`ServiceEmbedder` makes it an `Embedder`:

- texts go in batches of `batch_size`; every row must have the model's width (the first
  call's, or `dim` when the operator gave it), else EmbeddingFailed; rows are L2-normalised;
- optional prefixes, for models trained with them (e5's `query: ` / `passage: `, nomic's
  `search_query: `): the query's, or the document's, is put before each text;
- a query recently embedded is not sent again (a small cache), and when both prefixes are
  the same, the writer reuses the query's vector for the same text stored as a chunk (the
  last user message usually is both);
- a failed query opens a breaker for `cooldown` seconds: recall then goes on by keywords
  alone at once (memory/recall/retrieval.py) instead of waiting out a timeout per request.
  Documents are always tried (the writer retries with its own backoff), and a success
  closes the breaker.

The service raises EmbeddingFailed when it cannot answer; its message must hold no secret.
`seconds` and `texts` count the time spent waiting on the service and the texts sent, by
kind ("query" on the request path, "document" in the writer).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Literal, Protocol

import numpy as np

from memory.embedding import RecentVectors
from memory.errors import EmbeddingFailed

Kind = Literal["query", "document"]


class EmbeddingService(Protocol):
    """One call to an embedding model: a vector per text, in order. `kind` says what the
    texts are for (a service may give queries a short timeout and documents retries)."""

    def __call__(self, texts: Sequence[str], kind: Kind) -> Sequence[Sequence[float]]: ...


class ServiceEmbedder:
    """An `Embedder` over an `EmbeddingService`; see the module docstring."""

    def __init__(
        self,
        model: str,
        service: EmbeddingService,
        dim: int | None = None,
        batch_size: int = 64,
        query_prefix: str = "",
        document_prefix: str = "",
        cooldown: float = 5.0,
    ) -> None:
        """`model` names the vectors' space (stored with them: another one means a rebuild).
        Without `dim` the service is asked once, now, for a probe's width."""
        self._service = service
        self._batch_size = max(1, batch_size)
        self._query_prefix = query_prefix
        self._document_prefix = document_prefix
        self._cooldown = cooldown
        self._down_until = 0.0
        self._queries: RecentVectors[np.ndarray] = RecentVectors(512)
        self._lock = threading.Lock()
        self.seconds = {"query": 0.0, "document": 0.0}
        self.texts = {"query": 0, "document": 0}
        self.name = _space_name(model, query_prefix, document_prefix)
        # A query's vector may stand for the same text stored (the writer reuses recall's,
        # memory.question_vectors.QuestionVectors) only when both are embedded alike.
        self.symmetric = query_prefix == document_prefix
        self.dim = dim if dim is not None else len(self._call(["probe"], "query", False)[0])

    def close(self) -> None:
        """Let go of the service's connections (when it has any to let go of)."""
        close = getattr(self._service, "close", None)
        if close is not None:
            close()

    def forget_queries(self) -> None:
        """Let go of every cached query (a user forgotten: their questions go too)."""
        self._queries.clear()

    def embed_query(self, text: str, owner: str = "") -> np.ndarray:
        known = self._queries.get(owner, text)
        if known is not None:
            return known
        if time.monotonic() < self._down_until:
            raise EmbeddingFailed("the embedding service failed just now; retrying shortly")
        try:
            row = self._call([self._query_prefix + text], "query")
        except EmbeddingFailed:
            self._down_until = time.monotonic() + self._cooldown
            raise
        vector: np.ndarray = _normalise(row)[0]
        vector.setflags(write=False)
        self._queries.put(owner, text, vector)
        return vector

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Rows for `texts`; with equal prefixes, a text just embedded as a query with no owner
        is reused (a user's question reaches the writer through `QuestionVectors`)."""
        known = [self._queries.get("", text) if self.symmetric else None for text in texts]
        todo = [self._document_prefix + t for t, v in zip(texts, known, strict=True) if v is None]
        fresh = iter(self._batches(todo))
        rows = [next(fresh) if vector is None else vector for vector in known]
        if not rows:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.vstack(rows).astype(np.float32)

    def _batches(self, texts: list[str]) -> list[np.ndarray]:
        rows: list[np.ndarray] = []
        for start in range(0, len(texts), self._batch_size):
            rows.extend(_normalise(self._call(texts[start : start + self._batch_size], "document")))
        self._down_until = 0.0  # it answers again
        return rows

    def _call(self, texts: Sequence[str], kind: Kind, counted: bool = True) -> np.ndarray:
        """The service's rows for `texts`, checked: one per text, each of the model's width.
        `counted`: its time and texts go into `seconds` and `texts` (not the start's probe)."""
        started = time.perf_counter()
        try:
            rows = self._service(texts, kind)
        finally:
            if counted:
                with self._lock:
                    self.seconds[kind] += time.perf_counter() - started
                    self.texts[kind] += len(texts)
        try:
            matrix = np.asarray(rows, dtype=np.float32)
        except (TypeError, ValueError) as exc:
            raise EmbeddingFailed("the embedding service sent vectors of mixed widths") from exc
        width = getattr(self, "dim", None)
        if matrix.ndim != 2 or len(matrix) != len(texts) or matrix.shape[1] == 0:
            raise EmbeddingFailed(
                f"the embedding service sent {len(matrix)} vectors for {len(texts)} texts"
            )
        if width is not None and matrix.shape[1] != width:
            raise EmbeddingFailed(
                f"the embedding service sent {matrix.shape[1]}-dimension vectors, "
                f"not {width}: check memory.embedder.dimensions"
            )
        if not np.all(np.isfinite(matrix)):
            raise EmbeddingFailed("the embedding service sent a vector that is not finite")
        return matrix


def _space_name(model: str, query_prefix: str, document_prefix: str) -> str:
    """The name stored with the vectors: the model, and its prefixes when it has any (other
    prefixes make other vectors, so changing them rebuilds the vectors too)."""
    if not query_prefix and not document_prefix:
        return model
    return f"{model} (query prefix {query_prefix!r}, document prefix {document_prefix!r})"


def _normalise(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    normalised: np.ndarray = (matrix / norms).astype(np.float32)
    return normalised
