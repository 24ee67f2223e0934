"""Turn user text into a safe SQLite FTS5 query (recall step, lexical side).

This is the one place user text is prepared for an FTS5 `MATCH` (STYLE.md rule 10, cf.
sqlite-utils' `quote_fts`). FTS5's query language gives meaning to `AND`, `OR`, `NOT`,
`NEAR(...)`, `*`, `^`, `:`, `+`, `-` and parentheses; raw user text handed to `MATCH` is
either a syntax error or a different query than the user meant. So nothing of the user's
text reaches the parser as syntax: the text is reduced to word tokens, and each token is
written as a double-quoted FTS5 string, joined with ` OR ` (a chat turn is a bag of words,
not a boolean formula, and BM25 ranks documents that match more of them higher).

Tokens are runs of Unicode letters and digits, which is what FTS5's `unicode61` tokenizer
treats as token characters (it splits on `_` and punctuation too). Common English words and
one-character tokens are dropped: they match almost every row and only add noise to BM25.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Collection

__all__ = ["STOPWORDS", "fts_query", "fts_terms"]

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
    terms: list[str] = []
    seen: set[str] = set()
    for match in _TOKEN.finditer(unicodedata.normalize("NFKC", text).lower()):
        term = match.group()
        if len(term) > 1 and term not in STOPWORDS and term not in seen:
            seen.add(term)
            terms.append(term)
    return terms


def fts_query(text: str, max_terms: int = 24, drop: Collection[str] = ()) -> str | None:
    """A safe FTS5 `MATCH` expression for `text`: its first `max_terms` terms, ORed.

    Each term is a double-quoted FTS5 string (inner quotes doubled), so operators, column
    filters, prefix stars and parentheses in the user's text are plain words or dropped.
    Terms in `drop` (lowercase, as `fts_terms` gives them) are left out too. None when
    `text` has no term left (only stopwords or punctuation): the caller skips lexical
    search rather than running a query that matches nothing or everything.
    """
    if max_terms < 1:
        raise ValueError(f"max_terms must be at least 1, got {max_terms}")
    terms = [term for term in fts_terms(text) if term not in drop][:max_terms]
    if not terms:
        return None
    return " OR ".join(_quote(term) for term in terms)


def _quote(term: str) -> str:
    """An FTS5 string literal: the term in double quotes, with any `"` inside doubled."""
    return '"' + term.replace('"', '""') + '"'
