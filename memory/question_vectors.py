"""The vectors of recent questions, held for the writer (`QuestionVectors`).

Recall embeds each request's last user message; the writer stores that message seconds or
minutes later and takes its vector (and its words' vectors) from here instead of running the
model on the text again. `QuestionVectors.noting` wraps the embedder recall uses so that
whatever it embeds for a question is held.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from memory.embedding import (
    Embedder,
    WordEmbedder,
    Words,
    WordVector,
    gives_words,
    int8_rows,
    normalise,
)


class QuestionVectors:
    """Vectors of recent questions, per user, held until the writer indexes their messages.

    Recall embeds each request's last user message as the writer will embed it
    (`memory.ingest.embedding_inputs.question_text`); the writer gets to the stored message seconds
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
        vectors = normalise(self.rows.astype(np.float32))
        return tuple(
            WordVector(text[start:end], start, vectors[n])
            for n, (start, end) in enumerate(self.bounds.tolist())
        )


class _Noting:
    """An embedder whose queries' vectors are also put in a `QuestionVectors`."""

    def __init__(
        self, embedder: Embedder, user_id: str, questions: QuestionVectors, only: str | None
    ) -> None:
        self.name, self.dim = embedder.name, embedder.dim
        self._embedder, self._user_id, self._questions = embedder, user_id, questions
        self._only = only

    def embed_query(self, text: str, owner: str = "") -> np.ndarray:
        vector = self._embedder.embed_query(text, owner=self._user_id)
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

    def embed_query_words(self, text: str, owner: str = "") -> tuple[np.ndarray, Words]:
        vector, words = self._words_of.embed_query_words(text, owner=self._user_id)
        if self._only is None or text == self._only:
            self._questions.put(self._user_id, text, vector, words)
        return vector, words

    def embed_documents_words(self, texts: Sequence[str]) -> tuple[np.ndarray, list[Words]]:
        return self._words_of.embed_documents_words(texts)
