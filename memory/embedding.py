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
from typing import Any, Generic, Protocol, TypeGuard, TypeVar, runtime_checkable

import numpy as np

from memory.bundled_model import VARIANT, bundled_model_dir
from memory.errors import EmbeddingFailed
from memory.settings import BUNDLED_MODEL

T = TypeVar("T")

# Recent questions whose word vectors `FastEmbedder` keeps (see its query caches).
QUERY_WORDS_HELD = 128


class Embedder(Protocol):
    """What the memory layer needs of an embedding model."""

    name: str
    dim: int

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """One normalised float32 row per text."""
        ...

    def embed_query(self, text: str, owner: str = "") -> np.ndarray:
        """One normalised float32 vector. `owner`: the user asking; a cached vector answers
        only the same owner's question again (one cache for all users would tell a user, by
        how long a request took, that another had just asked the same words)."""
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


Words = tuple[WordVector, ...]


@runtime_checkable
class WordEmbedder(Embedder, Protocol):
    """An embedder that also gives each text's word vectors, from the same model run."""

    def embed_query_words(self, text: str, owner: str = "") -> tuple[np.ndarray, Words]:
        """The query's vector (as `embed_query`) and its words' vectors."""
        ...

    def embed_documents_words(self, texts: Sequence[str]) -> tuple[np.ndarray, list[Words]]:
        """The texts' rows (as `embed_documents`) and each text's word vectors."""
        ...


_GIVES_WORDS: dict[type, bool] = {}


def gives_words(embedder: object) -> TypeGuard[WordEmbedder]:
    """`isinstance(embedder, WordEmbedder)`, remembered per class: a runtime protocol check
    walks the protocol's members (~25 µs), and each recall asked it three times."""
    kind = type(embedder)
    known = _GIVES_WORDS.get(kind)
    if known is None:
        known = _GIVES_WORDS[kind] = isinstance(embedder, WordEmbedder)
    return known


class FastEmbedder:
    """A fastembed `TextEmbedding`, run in batches, with a small query cache."""

    def __init__(
        self, model: str = BUNDLED_MODEL, batch_size: int = 1, threads: int | None = 1
    ) -> None:
        # One onnxruntime thread: on 2 cores, batches ran ~2x faster than with the default
        # (all cores), and the other core stays free for the event loop and recall.
        # onnxruntime's memory arena keeps the activations of the runs in flight at once and
        # reuses them. Without it, a run of a long text mapped ~20 MB of fresh pages (glibc
        # maps blocks of 1 MiB or more on their own, memory/heap.py) and faulted each one in:
        # 8 threads in-process, 5,600 page faults and 45.7 ms of CPU a 40-250-word text
        # against 19 and 30.4 with the arena; `bench/load.py`, 1,270-1,390 faults a request
        # against 440-540, and RSS flat where it rose and fell by ~25 MB between the writer's
        # trims (docs/performance.md, "Load, sixth pass"). Vectors are the same to the bit.
        # A batch of texts would keep a whole batch's activations (long texts: 456 MB against
        # 295 without the arena), so the arena is on only for one text a run, the default.
        arena = batch_size == 1
        try:
            from fastembed import TextEmbedding

            if model == BUNDLED_MODEL:
                path = str(bundled_model_dir())
                name = f"{model}+{VARIANT}"
                self._model = TextEmbedding(
                    model, specific_model_path=path, threads=threads, enable_cpu_mem_arena=arena
                )
            else:
                self._model = TextEmbedding(model, threads=threads, enable_cpu_mem_arena=arena)
                name = model
            probe = next(iter(self._model.embed(["probe"])))
        except Exception as exc:  # onnxruntime and fastembed raise many kinds
            raise EmbeddingFailed(f"cannot load embedding model {model}: {exc}") from exc
        self.name = name
        self.dim = int(probe.shape[0])
        self._bundled = model == BUNDLED_MODEL
        self._batch_size = batch_size
        # onnxruntime sessions are thread-safe; batches take turns so they do not thrash.
        self._lock = threading.Lock()
        self._queries: RecentVectors[np.ndarray] = RecentVectors(512)
        # A question's words take ~80 kB (46 words of 1.5 kB vectors, a 250-character
        # question): 512 of them held 40 MB. Recall embeds with words whenever the vocabulary
        # is on, so this bounds its cache hits too: a retry or a regenerated answer within
        # the last 128 distinct questions.
        self._query_words: RecentVectors[Words] = RecentVectors(QUERY_WORDS_HELD)
        # CPU seconds (of the threads that ran the model) and texts, per kind: "query" for
        # recall, "document" for indexing (bench/load.py splits moim's CPU with them).
        self.cpu_seconds = {"query": 0.0, "document": 0.0}
        self.texts = {"query": 0, "document": 0}

    def embed_query(self, text: str, owner: str = "") -> np.ndarray:
        vector = self._queries.get(owner, text)
        if vector is None:
            vector = self._embed_query(text)
            self._queries.put(owner, text, vector)
        return vector

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return self._embed_batch(texts)

    def forget_queries(self) -> None:
        """Let go of every cached query (a user forgotten: their questions go too)."""
        self._queries.clear()
        self._query_words.clear()

    def embed_query_words(self, text: str, owner: str = "") -> tuple[np.ndarray, Words]:
        """The query's vector and its words' vectors, from one model run (both cached)."""
        vector, words = self._queries.get(owner, text), self._query_words.get(owner, text)
        if vector is None or words is None:
            started = time.thread_time()
            vector, words = self._run_with_words(text)
            self.cpu_seconds["query"] += time.thread_time() - started
            self.texts["query"] += 1
            self._queries.put(owner, text, vector)
            self._query_words.put(owner, text, words)
        return vector, words

    def embed_documents_words(self, texts: Sequence[str]) -> tuple[np.ndarray, list[Words]]:
        """Rows and word vectors for `texts`, one text per model run (`embedding_batch_size`
        does not apply: a run's words come from that text alone)."""
        rows: list[np.ndarray] = []
        words: list[Words] = []
        for text in texts:
            with self._lock:
                started = time.thread_time()
                vector, found = self._run_with_words(text)
                self.cpu_seconds["document"] += time.thread_time() - started
                self.texts["document"] += 1
            rows.append(vector)
            words.append(found)
        if not rows:
            return np.zeros((0, self.dim), dtype=np.float32), []
        return np.vstack(rows).astype(np.float32), words

    def _run_with_words(self, text: str) -> tuple[np.ndarray, Words]:
        """One run of the model over `text`: its vector (as fastembed pools it) and its
        words' vectors. Relies on fastembed's ONNX model object, as `_run_one` does."""
        model: Any = self._model.model
        try:
            encoding = model.tokenizer.encode(text)
            if self._bundled:
                row, states = _run_one_states(model, encoding)
            else:
                output = model.onnx_embed([text])
                row = next(iter(model._post_process_onnx_output(output)))
                states = np.asarray(output.model_output[0], dtype=np.float32)
        except Exception as exc:
            raise EmbeddingFailed(str(exc)) from exc
        vector: np.ndarray = normalise(np.asarray(row, dtype=np.float32)[None, :])[0]
        vector.setflags(write=False)
        return vector, _word_vectors(text, encoding, states)

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
        matrix: np.ndarray = normalise(np.vstack(rows).astype(np.float32))
        return matrix

    def _embed_query(self, text: str) -> np.ndarray:
        # No lock: onnxruntime runs are thread-safe, and a query must not wait behind the
        # writer's batch (~50-200 ms) on the request path.
        started = time.thread_time()
        try:
            if self._bundled:
                row = _run_one(self._model.model, text)
            else:  # fastembed's own way: some models prefix or pool queries their own way
                row = next(iter(self._model.query_embed([text])))
        except Exception as exc:
            raise EmbeddingFailed(str(exc)) from exc
        self.cpu_seconds["query"] += time.thread_time() - started  # a race may lose one: a gauge
        self.texts["query"] += 1
        vector: np.ndarray = normalise(np.asarray(row, dtype=np.float32)[None, :])[0]
        vector.setflags(write=False)
        return vector


class RecentVectors(Generic[T]):
    """A small thread-safe LRU of (owner, text) → vector (the query cache).

    Keyed by the owner too: a vector cached for one user's question does not answer
    another's, whose request would otherwise be ~4 ms quicker (and say so in
    `x-memory-overhead-ms`) when someone else had just asked the same words. Texts over
    `MAX_HELD_CHARS` are not held: the key is the text, and a question may be a pasted
    document of megabytes, which 511 others then had to push out. Such a text is embedded
    again when asked again (the model reads only its first 256 tokens).
    """

    MAX_HELD_CHARS = 4_000

    def __init__(self, size: int) -> None:
        self._size = size
        self._items: OrderedDict[tuple[str, str], T] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, owner: str, text: str) -> T | None:
        key = (owner, text)
        with self._lock:
            vector = self._items.get(key)
            if vector is not None:
                self._items.move_to_end(key)
            return vector

    def put(self, owner: str, text: str, vector: T) -> None:
        if len(text) > self.MAX_HELD_CHARS:
            return
        key = (owner, text)
        with self._lock:
            self._items[key] = vector
            self._items.move_to_end(key)
            while len(self._items) > self._size:
                self._items.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


def int8_rows(matrix: np.ndarray) -> np.ndarray:
    """Each row of `matrix` in int8, scaled so its largest component is ±127 (how the
    vocabulary stores word vectors; a row scaled back and encoded again gives the same
    bytes)."""
    peaks = np.abs(matrix).max(axis=1, keepdims=True)
    peaks[peaks == 0] = 1.0
    rows: np.ndarray = np.round(matrix / peaks * 127.0).astype(np.int8)
    return rows


def _run_one(model: Any, text: str) -> np.ndarray:
    """The bundled model's vector of one text, as fastembed's `query_embed` computes it.

    fastembed's steps, called directly: its tokenizer's `encode` (`encode_batch`, which
    fastembed calls, hands even one text to a pool of threads and waits for it), one run of
    its onnxruntime session, its own pooling. ~0.1 ms less of ~3.5, with a thread hand-off
    less; tests/memory/test_embedding.py pins the vectors equal to fastembed's.
    """
    row, _ = _run_one_states(model, model.tokenizer.encode(text))
    return row


def _run_one_states(model: Any, encoding: Any) -> tuple[np.ndarray, np.ndarray]:
    """`_run_one` for an encoding already made: the pooled row and the last hidden states."""
    from fastembed.common.onnx_model import OnnxOutputContext

    ids = np.array([encoding.ids], dtype=np.int64)
    mask = np.array([encoding.attention_mask], dtype=np.int64)
    wanted = {node.name for node in model.model.get_inputs()}
    given = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
    inputs = {name: value for name, value in given.items() if name in wanted}
    output = model.model.run(model.ONNX_OUTPUT_NAMES, inputs)[0]
    pooled = model._post_process_onnx_output(OnnxOutputContext(output, mask, ids))
    return np.asarray(pooled)[0], np.asarray(output[0], dtype=np.float32)


def _word_vectors(text: str, encoding: Any, states: np.ndarray) -> Words:
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
    # One matrix for all the words, each vector a row of it: one allocation a text, freed
    # at once, rather than one of 1.5 kB a word (held in the query caches, they fragmented
    # the heap). The same division, so the same bits.
    unit = means / np.where(norms > 0, norms, 1.0)[:, None]
    words = []
    for row, positions in enumerate(spans):
        start, end = offsets[positions[0]][0], offsets[positions[-1]][1]
        if end > start and norms[row] > 0:
            words.append(WordVector(text[start:end], start, unit[row]))
    return tuple(words)


def normalise(matrix: np.ndarray) -> np.ndarray:
    """Each row scaled to unit length (a row of zeros stays zeros)."""
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    normalised: np.ndarray = matrix / norms
    return normalised
