"""Embedding text into vectors, offline by default.

The default model is all-MiniLM-L6-v2 (384 dimensions), bundled and run in int8
(`memory/bundled_model.py`); fastembed loads it from one directory with
`specific_model_path`, so nothing is fetched from a hub. Any other fastembed model name may
be configured by users who have network.

Vectors are float32, L2-normalised, so a dot product is the cosine.

The same model run also yields a vector per word: the mean of the last hidden states of the
word's tokens, normalised (`WordVector`). Recall compares a question's words with the words
the user has said (`memory/recall/vocabulary.py`); they cost no extra run.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

import numpy as np

from memory.bundled_model import VARIANT, bundled_model_dir
from memory.errors import EmbeddingFailed
from memory.settings import BUNDLED_MODEL

T = TypeVar("T")


class Embedder(Protocol):
    """What the memory layer needs of an embedding model."""

    name: str
    dim: int

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """One normalised float32 row per text."""
        ...

    def embed_query(self, text: str) -> np.ndarray:
        """One normalised float32 vector."""
        ...


@dataclass(frozen=True, slots=True)
class WordVector:
    """One word of an embedded text and its contextual vector (normalised float32).

    `word` is the text's own characters at `start` (case kept); the vector is the mean of the
    model's last hidden states over the word's tokens, the states the text's vector pools.
    """

    word: str
    start: int
    vector: np.ndarray


@runtime_checkable
class WordEmbedder(Embedder, Protocol):
    """An embedder that also gives each text's word vectors, from the same model run."""

    def embed_query_words(self, text: str) -> tuple[np.ndarray, tuple[WordVector, ...]]:
        """The query's vector (as `embed_query`) and its words' vectors."""
        ...

    def embed_documents_words(
        self, texts: Sequence[str]
    ) -> tuple[np.ndarray, list[tuple[WordVector, ...]]]:
        """The texts' rows (as `embed_documents`) and each text's word vectors."""
        ...


class FastEmbedder:
    """A fastembed `TextEmbedding`, run in batches, with a small query cache."""

    def __init__(
        self, model: str = BUNDLED_MODEL, batch_size: int = 1, threads: int | None = 1
    ) -> None:
        # One onnxruntime thread: on 2 cores, batches ran ~2x faster than with the default
        # (all cores), and the other core stays free for the event loop and recall.
        try:
            from fastembed import TextEmbedding

            if model == BUNDLED_MODEL:
                path = str(bundled_model_dir())
                name = f"{model}+{VARIANT}"
                self._model = TextEmbedding(
                    model, specific_model_path=path, threads=threads, enable_cpu_mem_arena=False
                )
            else:
                self._model = TextEmbedding(model, threads=threads, enable_cpu_mem_arena=False)
                name = model
            probe = next(iter(self._model.embed(["probe"])))
        except Exception as exc:  # onnxruntime and fastembed raise many kinds
            raise EmbeddingFailed(f"cannot load embedding model {model}: {exc}") from exc
        self.name = name
        self.dim = int(probe.shape[0])
        self._batch_size = batch_size
        # onnxruntime sessions are thread-safe; batches take turns so they do not thrash.
        self._lock = threading.Lock()
        self._queries: RecentVectors[np.ndarray] = RecentVectors(512)
        self._query_words: RecentVectors[tuple[WordVector, ...]] = RecentVectors(512)
        # CPU seconds (of the threads that ran the model) and texts, per kind: "query" for
        # recall, "document" for indexing (bench/load.py splits moim's CPU with them).
        self.cpu_seconds = {"query": 0.0, "document": 0.0}
        self.texts = {"query": 0, "document": 0}

    def embed_query(self, text: str) -> np.ndarray:
        vector = self._queries.get(text)
        if vector is None:
            vector = self._embed_query(text)
            self._queries.put(text, vector)
        return vector

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Rows for `texts`; a text recently embedded as a query is not embedded again.

        The last user message is usually both the request's query and, once the turn is
        stored, one of the chunks to index: the model is symmetric, so its query vector is
        reused and the writer embeds only what is new (about half of each turn).
        """
        known = [self._queries.get(text) for text in texts]
        todo = [text for text, vector in zip(texts, known, strict=True) if vector is None]
        fresh = iter(self._embed_batch(todo)) if todo else iter(())
        rows = [next(fresh) if vector is None else vector for vector in known]
        if not rows:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.vstack(rows).astype(np.float32)

    def embed_query_words(self, text: str) -> tuple[np.ndarray, tuple[WordVector, ...]]:
        """The query's vector and its words' vectors, from one model run (both cached)."""
        vector, words = self._queries.get(text), self._query_words.get(text)
        if vector is None or words is None:
            started = time.thread_time()
            rows, found = self._run_with_words([text])
            self.cpu_seconds["query"] += time.thread_time() - started
            self.texts["query"] += 1
            vector, words = rows[0], found[0]
            vector.setflags(write=False)
            self._queries.put(text, vector)
            self._query_words.put(text, words)
        return vector, words

    def embed_documents_words(
        self, texts: Sequence[str]
    ) -> tuple[np.ndarray, list[tuple[WordVector, ...]]]:
        """Rows and word vectors for `texts`, one text per model run (`embedding_batch_size`
        does not apply: a run's words come from that text alone).

        A text recently embedded as a query with its words is not run again.
        """
        rows: list[np.ndarray] = []
        words: list[tuple[WordVector, ...]] = []
        for text in texts:
            vector, known = self._queries.get(text), self._query_words.get(text)
            if vector is None or known is None:
                with self._lock:
                    started = time.thread_time()
                    fresh, found = self._run_with_words([text])
                    self.cpu_seconds["document"] += time.thread_time() - started
                    self.texts["document"] += 1
                vector, known = fresh[0], found[0]
            rows.append(vector)
            words.append(known)
        if not rows:
            return np.zeros((0, self.dim), dtype=np.float32), []
        return np.vstack(rows).astype(np.float32), words

    def _run_with_words(
        self, texts: list[str]
    ) -> tuple[list[np.ndarray], list[tuple[WordVector, ...]]]:
        """One run of the model over `texts`: each text's pooled vector (as fastembed pools
        it) and its words' vectors. Relies on fastembed's ONNX model object (`onnx_embed`,
        `_post_process_onnx_output`, `tokenizer`), pinned with fastembed's version."""
        model: Any = self._model.model
        try:
            output = model.onnx_embed(texts)
            pooled = list(model._post_process_onnx_output(output))
            encodings = [model.tokenizer.encode(text) for text in texts]
        except Exception as exc:
            raise EmbeddingFailed(str(exc)) from exc
        vectors = [_normalise(np.asarray(row, dtype=np.float32)[None, :])[0] for row in pooled]
        words = [
            _word_vectors(text, encoding, np.asarray(output.model_output[i], dtype=np.float32))
            for i, (text, encoding) in enumerate(zip(texts, encodings, strict=True))
        ]
        return vectors, words

    def _embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        # Batches are padded to their longest text: embed in length order, return in input order.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        try:
            with self._lock:
                started = time.thread_time()
                ordered = list(
                    self._model.embed([texts[i] for i in order], batch_size=self._batch_size)
                )
                self.cpu_seconds["document"] += time.thread_time() - started
                self.texts["document"] += len(texts)
            rows = [ordered[0]] * len(texts)
            for position, index in enumerate(order):
                rows[index] = ordered[position]
        except Exception as exc:
            raise EmbeddingFailed(str(exc)) from exc
        matrix: np.ndarray = _normalise(np.vstack(rows).astype(np.float32))
        return matrix

    def _embed_query(self, text: str) -> np.ndarray:
        # No lock: onnxruntime runs are thread-safe, and a query must not wait behind the
        # writer's batch (~50-200 ms) on the request path.
        started = time.thread_time()
        try:
            row = next(iter(self._model.query_embed([text])))
        except Exception as exc:
            raise EmbeddingFailed(str(exc)) from exc
        self.cpu_seconds["query"] += time.thread_time() - started  # a race may lose one: a gauge
        self.texts["query"] += 1
        vector: np.ndarray = _normalise(np.asarray(row, dtype=np.float32)[None, :])[0]
        vector.setflags(write=False)
        return vector


def _word_vectors(text: str, encoding: Any, states: np.ndarray) -> tuple[WordVector, ...]:
    """Each word of `text` (the tokenizer's words: split at spaces and punctuation) with the
    normalised mean of its tokens' hidden states; words cut off by truncation are left out."""
    tokens: dict[int, list[int]] = {}
    offsets = encoding.offsets  # each read of the property builds the list anew
    for position, word_id in enumerate(encoding.word_ids):
        if word_id is not None and position < len(states):
            tokens.setdefault(word_id, []).append(position)
    if not tokens:
        return ()
    spans = list(tokens.values())
    averaging = np.zeros((len(spans), len(states)), dtype=np.float32)  # words × tokens
    for row, positions in enumerate(spans):
        averaging[row, positions] = 1.0 / len(positions)
    means = averaging @ states
    norms = np.linalg.norm(means, axis=1)
    words = []
    for row, positions in enumerate(spans):
        start, end = offsets[positions[0]][0], offsets[positions[-1]][1]
        if end > start and norms[row] > 0:
            words.append(WordVector(text[start:end], start, means[row] / norms[row]))
    return tuple(words)


class RecentVectors(Generic[T]):
    """A small thread-safe LRU of text → vector (the query cache)."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._items: OrderedDict[str, T] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, text: str) -> T | None:
        with self._lock:
            vector = self._items.get(text)
            if vector is not None:
                self._items.move_to_end(text)
            return vector

    def put(self, text: str, vector: T) -> None:
        with self._lock:
            self._items[text] = vector
            self._items.move_to_end(text)
            while len(self._items) > self._size:
                self._items.popitem(last=False)


def _normalise(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    normalised: np.ndarray = matrix / norms
    return normalised
