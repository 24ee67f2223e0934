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
from collections.abc import Callable, Sequence
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


Words = tuple[WordVector, ...]


@runtime_checkable
class WordEmbedder(Embedder, Protocol):
    """An embedder that also gives each text's word vectors, from the same model run."""

    def embed_query_words(self, text: str) -> tuple[np.ndarray, Words]:
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

    def embed_query(self, text: str) -> np.ndarray:
        vector = self._queries.get(text)
        if vector is None:
            vector = self._embed_query(text)
            self._queries.put(text, vector)
        return vector

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return self._embed_batch(texts)

    def forget_queries(self) -> None:
        """Let go of every cached query (a user forgotten: their questions go too)."""
        self._queries.clear()
        self._query_words.clear()

    def embed_query_words(self, text: str) -> tuple[np.ndarray, Words]:
        """The query's vector and its words' vectors, from one model run (both cached)."""
        vector, words = self._queries.get(text), self._query_words.get(text)
        if vector is None or words is None:
            started = time.thread_time()
            vector, words = self._run_with_words(text)
            self.cpu_seconds["query"] += time.thread_time() - started
            self.texts["query"] += 1
            self._queries.put(text, vector)
            self._query_words.put(text, words)
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
        vector: np.ndarray = _normalise(np.asarray(row, dtype=np.float32)[None, :])[0]
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
        matrix: np.ndarray = _normalise(np.vstack(rows).astype(np.float32))
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
        vector: np.ndarray = _normalise(np.asarray(row, dtype=np.float32)[None, :])[0]
        vector.setflags(write=False)
        return vector


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

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


class QuestionVectors:
    """Vectors of recent questions, per user, held until the writer indexes their messages.

    Recall embeds each request's last user message as the writer will embed it
    (`memory.ingest.turns.question_text`); the writer gets to the stored message seconds
    later, or minutes under a backlog, and takes the vector from here instead of embedding
    the text again. At most `size` are held in all (~1.5 kB each), the oldest let go first:
    a request that stores nothing (mode `read`) leaves its vector to be pushed out, and one
    pushed out is embedded again (the same vector: one text per model run). `drop` forgets
    a user's.
    """

    def __init__(self, size: int = 2048, keep: Callable[[str], bool] | None = None) -> None:
        """`keep`: which words the writer can use (`memory.recall.vocabulary.vocabulary_word`);
        the others are not held (None: every word is)."""
        self._size, self._keep = size, keep
        self._items: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
        # Of the items, when the model gave them: each word and its int8 row (`int8_rows`).
        self._words: dict[tuple[str, str], _HeldWords] = {}
        self._lock = threading.Lock()

    def put(self, user_id: str, text: str, vector: np.ndarray, words: Words | None = None) -> None:
        held = None if words is None else _HeldWords.of(text, words, self._keep)
        with self._lock:
            self._items[(user_id, text)] = vector
            self._items.move_to_end((user_id, text))
            if held is not None:
                self._words[(user_id, text)] = held
            while len(self._items) > self._size:
                key, _ = self._items.popitem(last=False)
                self._words.pop(key, None)

    def take_words(self, user_id: str, text: str) -> Words | None:
        """The words held for this user's text (call before `take`), which are let go.

        Their vectors come back from int8 rows, as the vocabulary stores them
        (`memory.recall.vocabulary`): the writer's vocabulary rows are the same bytes as
        from the model's float32 vectors, and a held question takes ~400 bytes a word
        instead of ~1.7 kB (a backlog of 1,000 turns held ~40 MB of question words). Only
        the words `keep` accepts are held, each as where it begins and ends in the text: a
        held question took ~16 kB, ~6 with the words cut to the vocabulary's (measured on
        bench/load.py's questions; docs/performance.md).
        """
        with self._lock:
            held = self._words.pop((user_id, text), None)
        return None if held is None else held.words(text)

    def take(self, user_id: str, text: str) -> np.ndarray | None:
        """The vector held for this user's text, which is let go (its words too); None when
        none is."""
        with self._lock:
            self._words.pop((user_id, text), None)
            return self._items.pop((user_id, text), None)

    def drop(self, user_id: str | None = None) -> None:
        """Let go of one user's vectors (or everyone's)."""
        with self._lock:
            if user_id is None:
                self._items.clear()
                self._words.clear()
            else:
                for key in [key for key in self._items if key[0] == user_id]:
                    del self._items[key]
                    self._words.pop(key, None)

    def __len__(self) -> int:
        return len(self._items)

    def noting(self, embedder: Embedder, user_id: str, only: str | None = None) -> Embedder:
        """`embedder`, for one recall of `user_id`: each question's vector is also held, or
        only that of the text `only` when given (the one the writer will embed as it is: a
        vector nothing takes only sits here until pushed out, with its words ~40 kB).

        Not for an embedder whose queries are embedded unlike its documents (a remote
        model with a query prefix: memory/service_embedder.py): it is returned as it is.
        """
        if not getattr(embedder, "symmetric", True):
            return embedder
        if gives_words(embedder):
            return _NotingWords(embedder, user_id, self, only)
        return _Noting(embedder, user_id, self, only)


@dataclass(frozen=True, slots=True)
class _HeldWords:
    """A text's words as `QuestionVectors` holds them: where each begins and ends in the text
    (int32 pairs: the word is the text's characters there, as `_word_vectors` cut it), and
    their vectors as int8 rows (`int8_rows`)."""

    bounds: np.ndarray  # int32 (words, 2)
    rows: np.ndarray  # int8 (words, dim)

    @classmethod
    def of(cls, text: str, words: Words, keep: Callable[[str], bool] | None) -> _HeldWords | None:
        """The words `keep` accepts; None when a word is not the text's own characters at its
        start (then none are held, and the writer embeds the text again for them)."""
        if any(text[w.start : w.start + len(w.word)] != w.word for w in words):
            return None
        kept = [w for w in words if keep is None or keep(w.word)]
        if not kept:
            return cls(np.zeros((0, 2), dtype=np.int32), np.zeros((0, 0), dtype=np.int8))
        bounds = np.array([(w.start, w.start + len(w.word)) for w in kept], dtype=np.int32)
        return cls(bounds, int8_rows(np.stack([w.vector for w in kept])))

    def words(self, text: str) -> Words:
        vectors = _normalise(self.rows.astype(np.float32))
        return tuple(
            WordVector(text[start:end], start, vectors[n])
            for n, (start, end) in enumerate(self.bounds.tolist())
        )


def int8_rows(matrix: np.ndarray) -> np.ndarray:
    """Each row of `matrix` in int8, scaled so its largest component is ±127 (how the
    vocabulary stores word vectors; a row scaled back and encoded again gives the same
    bytes)."""
    peaks = np.abs(matrix).max(axis=1, keepdims=True)
    peaks[peaks == 0] = 1.0
    rows: np.ndarray = np.round(matrix / peaks * 127.0).astype(np.int8)
    return rows


class _Noting:
    """An embedder whose queries' vectors are also put in a `QuestionVectors`."""

    def __init__(
        self, embedder: Embedder, user_id: str, questions: QuestionVectors, only: str | None
    ) -> None:
        self.name, self.dim = embedder.name, embedder.dim
        self._embedder, self._user_id, self._questions = embedder, user_id, questions
        self._only = only

    def embed_query(self, text: str) -> np.ndarray:
        vector = self._embedder.embed_query(text)
        if self._only is None or text == self._only:
            self._questions.put(self._user_id, text, vector)
        return vector

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self._embedder.embed_documents(texts)


class _NotingWords(_Noting):
    """`_Noting` for an embedder that gives word vectors: the question's are held too."""

    def __init__(
        self, embedder: WordEmbedder, user_id: str, questions: QuestionVectors, only: str | None
    ) -> None:
        super().__init__(embedder, user_id, questions, only)
        self._words_of = embedder

    def embed_query_words(self, text: str) -> tuple[np.ndarray, Words]:
        vector, words = self._words_of.embed_query_words(text)
        if self._only is None or text == self._only:
            self._questions.put(self._user_id, text, vector, words)
        return vector, words

    def embed_documents_words(self, texts: Sequence[str]) -> tuple[np.ndarray, list[Words]]:
        return self._words_of.embed_documents_words(texts)


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


def _normalise(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    normalised: np.ndarray = matrix / norms
    return normalised
