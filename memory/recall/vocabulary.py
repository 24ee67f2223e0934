"""Step 3a, recall: a question's words the user never said, expanded with the user's own.

Lexical search needs the user's words: "Who is taking our old settee?" finds nothing where
the user wrote "sofa", and a paraphrase question is, by construction, in other words. MiniLM
reads each word in its sentence (the last hidden states that the sentence vector pools), so
the model run that embeds a chunk also gives a vector for each of its words, and the run
that embeds a question one for each of its words, at no extra cost
(`memory.embedding.WordEmbedder`). The user's vocabulary is every stem of their chunks with
the vector of its first occurrence (the `vocabulary` table, filled at indexing). A question
word whose stem the user never used is searched together with the user's nearest words
(cosine of the two contextual vectors at least `min_similarity`, `per_word` of them):
"notebook" → "laptop", "mother" → "mum", "discover" → "found", "floor" → "upstairs".

Measured (bench/memsuite_tune.py, long suite; bench/tune_recall.py, LoCoMo; in
docs/recall-quality.md): paraphrase +5 points on the tuning half and +3 held out at 0.5 and
two neighbours, LoCoMo within ±0.5. Only words the user never said are expanded, so a
question in the user's own words searches exactly as before.

Vectors are stored as int8, each scaled by its largest component (a cosine does not see a
vector's scale), 384 bytes a word. `Vocabulary` keeps each user's matrix in RAM, checks the
table's size and newest id on each use (one indexed read), adds new rows and reloads after
deletions; it holds the `max_users` most recently used users.
"""

from __future__ import annotations

import threading
import unicodedata
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from memory.embedding import WordVector, int8_rows
from memory.records import Term
from memory.store.backend import StoreBackend as Store
from memory.store.fts import STOPWORDS, stem


def vocabulary_terms(words: Iterable[WordVector], start: int = 0) -> list[Term]:
    """The vocabulary rows of a chunk: each alphabetic search term among `words` that begins
    at or after `start` (the chunk's own text in its embedding input), once per stem."""
    first: dict[str, tuple[str, np.ndarray]] = {}  # stem: the word and its vector
    for word in words:
        if word.start < start:
            continue
        text = _term(word.word)
        if text is not None:
            first.setdefault(stem(text), (text, word.vector))
    if not first:
        return []
    # Encoded in one int8 matrix: each row's bytes as the row alone gives (a row's own scale).
    rows = int8_rows(np.stack([vector for _, vector in first.values()]))
    return [
        Term(key, text, bytes(row.tobytes()))
        for (key, (text, _)), row in zip(first.items(), rows, strict=True)
    ]


def vocabulary_word(word: str) -> bool:
    """Whether `vocabulary_terms` can keep this word (an alphabetic search term): a question
    held for the writer (`memory.question_vectors.QuestionVectors`) holds only such words."""
    return _term(word) is not None


def _term(word: str) -> str | None:
    """The search term a word is (as memory.store.fts reads text), if alphabetic; else None."""
    text = unicodedata.normalize("NFKC", word).lower()
    if len(text) < 2 or text in STOPWORDS or not text.isalpha():
        return None
    return text


def _decode(rows: Sequence[bytes]) -> np.ndarray:
    """The unit float32 rows of int8 vectors."""
    if not rows:
        return np.zeros((0, 0), dtype=np.float32)
    matrix = np.frombuffer(b"".join(rows), dtype=np.int8).reshape(len(rows), -1)
    matrix = matrix.astype(np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    unit: np.ndarray = matrix / norms
    return unit


def _best(cosines: np.ndarray, n: int) -> np.ndarray:
    """The rows of the `n` highest cosines, best first (ties: the lower row), in O(rows)."""
    if len(cosines) > n:
        top = np.argpartition(-cosines, n - 1)[:n]
    else:
        top = np.arange(len(cosines))
    return top[np.lexsort((top, -cosines[top]))]


@dataclass(frozen=True, slots=True)
class UserWords:
    """One user's vocabulary in RAM, as of the table's `mark` (size, newest id)."""

    mark: tuple[int, int]
    stems: dict[str, int]  # stem → row in `matrix`
    words: list[str]
    matrix: np.ndarray

    def extended(self, mark: tuple[int, int], new: Sequence[Term]) -> UserWords:
        stems = dict(self.stems)
        words = list(self.words)
        for term in new:
            stems[term.stem] = len(words)
            words.append(term.word)
        added = _decode([t.vector for t in new])
        matrix = np.vstack([self.matrix, added]) if len(self.words) else added
        return UserWords(mark, stems, words, matrix)


_EMPTY = UserWords((0, 0), {}, [], np.zeros((0, 0), dtype=np.float32))


# The RAM the cached vocabularies may take together: a word is a float32 row (1.5 kB), so a
# user of 3k words holds 4.5 MB, and 256 such users would hold over a GB. The users recalled
# least lately go first; the one just read stays, whatever its size.
MAX_BYTES = 64 << 20


class Vocabulary:
    """Each user's vocabulary vectors in RAM, fresh as of the store on each use: at most
    `max_users` users and `max_bytes` of vectors, the least recently used dropped first."""

    def __init__(self, store: Store, max_users: int = 256, max_bytes: int = MAX_BYTES) -> None:
        self._store = store
        self._max_users = max_users
        self._max_bytes = max_bytes
        self._users: OrderedDict[str, UserWords] = OrderedDict()
        self._bytes = 0  # the cached matrices' size
        self._lock = threading.Lock()

    def expansions(
        self,
        user_id: str,
        words: Sequence[WordVector],
        min_similarity: float,
        per_word: int,
        known: UserWords | None = None,
    ) -> list[str]:
        """The user's words nearest to each of `words` that the user never said, best first.

        A word is expanded when its stem is not in the user's vocabulary; each of its
        `per_word` nearest words at a cosine of `min_similarity` or more is returned once.
        Empty when the user has no vocabulary or every word is the user's own. `known` is
        the user's vocabulary when the caller read it already (`known`), else it is read here.
        """
        asked = {stem(t): (t, w) for w in words if (t := _term(w.word)) is not None}
        if not asked or per_word <= 0:
            return []
        known = self.known(user_id) if known is None else known
        unseen = [w for s, (_, w) in asked.items() if s not in known.stems]
        if not unseen or not known.words:
            return []
        found: dict[str, float] = {}
        cosines = known.matrix @ np.stack([w.vector for w in unseen]).T  # terms × unseen
        for column in range(cosines.shape[1]):
            for row in _best(cosines[:, column], per_word):
                cosine = float(cosines[row, column])
                word = known.words[int(row)]
                if cosine >= min_similarity and stem(word) not in asked:
                    found[word] = max(found.get(word, cosine), cosine)
        return sorted(found, key=lambda w: -found[w])

    def known(self, user_id: str) -> UserWords:
        """The user's vocabulary as the store holds it now (read again only if it changed).

        Recall reads it on another thread while the question is embedded: the mark's read is
        ~0.1 ms that the embedding no longer waits for (memory/recall/retrieval.py).
        """
        mark = self._store.vocabulary_mark(user_id)
        with self._lock:
            cached = self._users.get(user_id, _EMPTY)
        if cached.mark == mark:
            fresh = cached
        elif mark[0] - cached.mark[0] > 0 and mark[1] > cached.mark[1] >= 0 and cached.words:
            new = self._store.vocabulary(user_id, cached.mark[1])
            if len(new) == mark[0] - cached.mark[0]:  # only added rows: extend the matrix
                fresh = cached.extended(mark, new)
            else:
                fresh = _EMPTY.extended(mark, self._store.vocabulary(user_id))
        else:
            fresh = _EMPTY.extended(mark, self._store.vocabulary(user_id))
        with self._lock:
            self._bytes += fresh.matrix.nbytes - self._users.pop(user_id, _EMPTY).matrix.nbytes
            self._users[user_id] = fresh
            while len(self._users) > 1 and (
                len(self._users) > self._max_users or self._bytes > self._max_bytes
            ):
                self._bytes -= self._users.popitem(last=False)[1].matrix.nbytes
        return fresh

    @property
    def cached_bytes(self) -> int:
        """What the cached vocabularies' vectors take in RAM."""
        return self._bytes

    def drop(self, user_id: str | None = None) -> None:
        """Forget the cached vocabulary of one user (None: of all)."""
        with self._lock:
            if user_id is None:
                self._users.clear()
                self._bytes = 0
            else:
                self._bytes -= self._users.pop(user_id, _EMPTY).matrix.nbytes
