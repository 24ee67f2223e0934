"""The lexical index's text, and safe FTS5 queries against it (recall step, lexical side).

This is the one place user text is prepared for FTS5 (STYLE.md rule 10, cf. sqlite-utils'
`quote_fts`). Text is reduced to word tokens here, in Python, on both sides:

- A chunk is indexed as its terms, each stemmed (Porter) and prefixed with its owner's token:
  "u3f…_cook u3f…_dinner". Every term then belongs to one user, so a user's search touches
  only their own postings, and a term's document count (the n of BM25's IDF) is that user's
  own. The table's row count and average length are every user's (FTS5 keeps them per
  table), so another user's writes still move a user's scores a little; a borderline gate
  decision can turn on them (docs/recall-quality.md, "More acceptance probes"). (Scoping with one
  owner token ANDed into the MATCH made FTS5 count the owner's every chunk for BM25 on each
  query — 5 ms of a 14 ms search at 100k chunks — and other users' word counts shaped the
  ranking.)
- A query is the same terms, each written as a double-quoted FTS5 string and joined with
  ` OR ` (a chat turn is a bag of words, not a boolean formula; BM25 ranks documents that
  match more of them higher). FTS5's query language gives meaning to `AND`, `OR`, `NOT`,
  `NEAR(...)`, `*`, `^`, `:`, `+`, `-` and parentheses; none of the user's text reaches the
  parser as syntax.

Tokens are runs of Unicode letters and digits (not `_`: "dark_mode" is two words). Common
English words and one-character tokens are dropped from both sides: they match almost every
row and only add noise to BM25.
"""

from __future__ import annotations

import hashlib
import re
import threading
import unicodedata
from collections.abc import Collection, Iterator, Sequence
from functools import lru_cache

import snowballstemmer

__all__ = [
    "STOPWORDS",
    "fts_document",
    "fts_match",
    "fts_stems",
    "fts_terms",
    "owner_token",
    "search_terms",
    "stem",
    "turn_tail",
]

# Letters and digits, not `_` (unicode61 splits "dark_mode" into "dark" and "mode").
_TOKEN = re.compile(r"[^\W_]+")

STOPWORDS: frozenset[str] = frozenset(
    """
    a about above after again against all am an and any are aren as at be because been before
    being below between both but by can cannot could couldn did didn do does doesn doing don
    down during each few for from further had hadn has hasn have haven having he her here hers
    herself him himself his how i if in into is isn it its itself just let ll me might more
    most must my myself no nor not now of off on once only or other ought our ours ourselves
    out over own re same shall she should shouldn so some such than that the their theirs them
    themselves then there these they this those through to too under until up ve very was
    wasn we were weren what when where which while who whom whose why will with won would
    wouldn you your yours yourself yourselves also get got tell please thanks hi hello hey
    yes ok okay really
    """.split()
)


def fts_terms(text: str) -> list[str]:
    """The search terms of `text`: lowercased word tokens, in order of first appearance.

    Stopwords and one-character tokens are dropped and repeats removed. Text is NFKC
    normalised first, so a letter written with a combining accent is the same term as the
    precomposed letter. Empty when nothing is left.
    """
    return list(dict.fromkeys(_words(text)))


# Longer than any word a chunk holds (chunks are cut at 1,000 characters by default), with room
# for a suffix: such a query word matches nothing, and Porter's stemmer takes quadratic time on
# a run of "y" (1 MB: 7 minutes, holding the lock every recall and the writer stem under).
MAX_TERM_CHARS = 2_000


def search_terms(text: str, max_terms: int = 24, drop: Collection[str] = ()) -> list[str]:
    """The terms a lexical search for `text` uses: its first `max_terms`, minus `drop` and
    those longer than `MAX_TERM_CHARS`.

    Terms in `drop` are lowercase, as `fts_terms` gives them.
    """
    if max_terms < 1:
        raise ValueError(f"max_terms must be at least 1, got {max_terms}")
    terms = fts_terms(text)
    return [t for t in terms if t not in drop and len(t) <= MAX_TERM_CHARS][:max_terms]


def owner_token(user_id: str) -> str:
    """The token that marks a user's terms in the index.

    A hash, not the id itself: ids may hold characters the tokenizer splits on. Changing
    this form requires rebuilding `chunks_fts` (a new migration).
    """
    return "u" + hashlib.blake2b(user_id.encode(), digest_size=10).hexdigest()


def fts_document(user_id: str, text: str) -> str:
    """What `chunks_fts` holds for a chunk of `user_id`: its stemmed terms, owner-prefixed.

    Repeats are kept: BM25 counts them.
    """
    owner = owner_token(user_id)
    return " ".join(f"{owner}_{_stem(word)}" for word in _words(text))


def fts_match(user_id: str, terms: Sequence[str]) -> str | None:
    """A safe FTS5 `MATCH` expression for `user_id`'s chunks holding any of `terms`.

    Each stemmed, owner-prefixed term is a double-quoted FTS5 string (inner quotes doubled),
    so operators, column filters, prefix stars and parentheses are never syntax. None when
    there are no terms: the caller skips lexical search rather than running a query that
    matches nothing or everything.
    """
    stems = fts_stems(user_id, terms)
    if not stems:
        return None
    return " OR ".join(_quote(stem) for stem in stems)


def fts_stems(user_id: str, terms: Sequence[str]) -> list[str]:
    """The indexed form of `terms` for `user_id`: stemmed, owner-prefixed, each once."""
    owner = owner_token(user_id)
    return [f"{owner}_{stem}" for stem in dict.fromkeys(_stem(term) for term in terms)]


def turn_tail(text: str, chars: int) -> str:
    """The last `chars` characters of a turn, its whitespace collapsed: a reply's context."""
    return " ".join(text.split())[-chars:] if chars > 0 else ""


def word_set(text: str) -> set[str]:
    """Every word of `text` as `fts_terms` reads it, stopwords and one-letter words kept: which
    of a query's terms a text holds, at half the cost of `fts_terms`."""
    return set(_TOKEN.findall(unicodedata.normalize("NFKC", text).lower()))


def _words(text: str) -> Iterator[str]:
    """Every term of `text`, repeats included."""
    for match in _TOKEN.finditer(unicodedata.normalize("NFKC", text).lower()):
        word = match.group()
        if len(word) > 1 and word not in STOPWORDS:
            yield word


# A snowball stemmer keeps its working string on itself: one thread at a time.
_PORTER = snowballstemmer.stemmer("porter")
_PORTER_LOCK = threading.Lock()


@lru_cache(maxsize=8192)  # ~3 MB; 65,536 words held 23 MB
def _stem(word: str) -> str:
    """The word's Porter stem ("cooking" → "cook"; FTS5's `porter` tokenizer does the same)."""
    with _PORTER_LOCK:
        return str(_PORTER.stemWord(word))


def forget_stems() -> None:
    """Let go of every word held with its stem (a user forgotten: their words go too)."""
    _stem.cache_clear()


def stem(term: str) -> str:
    """A search term's indexed form, without the owner prefix ("cooking" → "cook")."""
    return _stem(term)


def _quote(term: str) -> str:
    """An FTS5 string literal: the term in double quotes, with any `"` inside doubled."""
    return '"' + term.replace('"', '""') + '"'
