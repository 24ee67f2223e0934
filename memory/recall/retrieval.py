"""Step 3a, recall: find a user's chunks relevant to the conversation's last turn.

Dense (cosine over the user's vectors) and lexical (FTS5 BM25) retrieval run on the same
query; both are filtered by `user_id` in the query itself. A speaker's name in the query is
kept out of the lexical search: every turn that greets them matches it, and BM25 then ranks
greetings over content (`memory.recall.ranking.boost_speakers` uses the name instead). Chunks whose
message is present in the current request are dropped (the model already sees them), as are
roles that are not recalled. `memory.recall.ranking` fuses what is left.

A query word the user never said is also searched as the user's nearest words
(`memory.recall.vocabulary`): a second lexical search over those words, its BM25 added to the
first's, once the query's embedding run has given the words' vectors.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Literal

import numpy as np

from memory.block.left_out import Told
from memory.embedding import Embedder, gives_words
from memory.errors import EmbeddingFailed
from memory.ingest.turns import RECALLED_ROLES
from memory.recall.abstention import COVERED_HITS, is_a_request, nothing_stands_out
from memory.recall.amounts import AMOUNT_HITS, asks_for_money
from memory.recall.candidate_rows import CandidateRows
from memory.recall.empty_turns import says_nothing
from memory.recall.identifiers import names_identifiers
from memory.recall.kept_text import KeptHits, read_kept
from memory.recall.later import later_by_keyword
from memory.recall.query import QUERY_CHARS
from memory.recall.scoring import Weights, rank
from memory.recall.user_matrix import Read
from memory.recall.vectors import VectorIndex
from memory.recall.vocabulary import UserWords, Vocabulary
from memory.recall.when import query_windows
from memory.recall.widening import past_the_gate, with_later, with_the_kind
from memory.records import Chunk, Hit, LeftOut
from memory.settings import Settings
from memory.store.backend import StoreBackend as Store
from memory.store.fts import fts_terms, search_terms

logger = logging.getLogger(__name__)

_LEXICAL = ThreadPoolExecutor(max_workers=4, thread_name_prefix="moim-lexical")


@dataclass(frozen=True, slots=True)
class Retrieval:
    """Everything recall found, before the budget cuts it down."""

    hits: Sequence[Hit]  # a large user's past the block's pool: read when read (kept_text.py)
    abstained: bool
    query: str
    # What was found but present in the request (for the inspector).
    present: tuple[LeftOut, ...] = ()
    # Why recall went on with the lexical side alone: the embedder failed (None: it did not).
    degraded: str | None = None
    # Every ranked candidate (a large user's without its text), and why those not in `hits`
    # were dropped: their `LeftOut` records are built only when read (the inspector's).
    ranked: Sequence[Hit] = ()
    dropped_for: Literal["abstained", "weak"] = "weak"
    # The ids of the hits kept but for saying nothing ('thanks!'): left out as "empty".
    empty: Collection[int] = frozenset()
    # Gives hits back with their text, in order (`CandidateRows.whole`, a chunk forgotten
    # since kept as it came); None when every candidate came with it.
    texts: Callable[[Sequence[Hit]], list[Hit]] | None = None

    @property
    def left_out(self) -> tuple[LeftOut, ...]:
        """What was found but dropped: present in the request, abstained on, weak, empty."""
        return tuple(Told(lambda: self.left_out_heads, self.texts))

    @property
    def left_out_heads(self) -> tuple[LeftOut, ...]:
        """`left_out`, a large user's candidates without their text (`texts` reads it)."""
        return self.present + _left_out(self.dropped_for, self.ranked, self.hits, self.empty)

    @property
    def withheld(self) -> bool:
        """Whether the gate or the floors dropped a candidate (`left_out` says which): `hits`
        are some of `ranked`, each once, so the counts tell without reading the records."""
        if isinstance(self.hits, KeptHits):  # nor, most often, the text of those past the pool
            return self.hits.fewer_than(len(self.ranked))
        return len(self.ranked) > len(self.hits)


def retrieve(
    store: Store,
    index: VectorIndex,
    embedder: Embedder | None,
    settings: Settings,
    user_id: str,
    query: str,
    exclude_hashes: Collection[str],
    now: float,
    limit: int | None = None,
    gate: bool = True,
    question: str | None = None,
    vocabulary: Vocabulary | None = None,
    shown: int | None = None,
) -> Retrieval:
    """Fused, re-ranked hits of `user_id` for `query`, excluding messages already present.

    `gate` applies the abstention gate (`memory.recall.abstention`): recall for a block uses
    it, a search (the memory API, the search tool) lists what matched without it. `question`
    is the text embedded for the dense search, when not `query` itself (recall embeds the
    last user message as the writer will: `memory.ingest.embedding_inputs.question_text`).

    With no `embedder` (the user's vectors are being rebuilt for a new model), or when it
    fails (EmbeddingFailed: a remote embedder unreachable), the lexical side alone ranks:
    BM25 orders the hits, and the cosine floors and the gate, which need cosines, pass them.
    With a `vocabulary`, the words of the embedded text that the user never said are searched
    as the user's nearest words too (`memory.recall.vocabulary`). `shown`: how many hits the
    caller reads now (the block's pool); a large user's past them get their text when read.
    """
    query = query[:QUERY_CHARS]  # a search's too (the memory API, the tools, MCP)
    if not query.strip():
        return Retrieval([], True, query)
    in_ram = embedder is not None and settings.vector_search == "ram"
    vectors = index.count(user_id) if in_ram else 0
    if in_ram and vectors == 0:
        return Retrieval([], True, query)  # nothing stored: skip the embedding and the searches
    # A large user's candidates come without their text until kept (candidate_rows.py).
    large = 0 < settings.chunk_heads_from <= vectors
    rows = CandidateRows(store, user_id, exclude_hashes, large)
    wanted = settings.candidates if limit is None else max(limit, settings.candidates)
    terms = search_terms(query) if settings.retrievers != "dense" else []
    # The lexical side (BM25, its chunk rows, the name-less search again) runs on another
    # thread while this one embeds the query and scans the vectors: SQLite, onnxruntime and
    # numpy all release the GIL, so the two sides overlap on two cores.
    searching = (
        _LEXICAL.submit(_lexical_side, store, rows, settings, user_id, query, terms, wanted)
        if terms
        else None
    )
    # The user's vocabulary is read there too, while the question is embedded here.
    known = (
        _LEXICAL.submit(vocabulary.known, user_id)
        if vocabulary is not None and _expanding(settings) and gives_words(embedder)
        else None
    )
    vector, degraded, extra, expanded = None, None, list[str](), False
    dense: list[tuple[int, float]] = []
    read: Read = {}  # a large user's float16 rows this recall read, for the later turns
    try:
        if embedder is not None:
            embedded = query if question is None else question
            vector, degraded, extra = _embed_query(
                embedder, embedded, vocabulary, settings, user_id, known
            )
            expanded = bool(extra)  # the learned gate reads it (memory.recall.abstention)
            extra = extra if terms else []
        if vector is not None and settings.retrievers != "lexical":
            dense = _dense(store, index, settings, user_id, vector, wanted, read)
    finally:
        side = searching.result() if searching is not None else _Lexical([], {}, set(), set())
    lexical, chunks = side.hits, side.chunks
    chunks.update(rows.read([i for i, _ in dense if i not in chunks]))
    first = side.first | {i for i, _ in dense}  # what the first searches found
    named = _speakers([c for i, c in chunks.items() if i in first]) & set(fts_terms(query))
    if terms and named != side.named:  # a name only the dense side's turns carry
        lexical = store.lexical_search(
            user_id, search_terms(query, drop=named), wanted, settings.lexical_context_weight
        )
        chunks.update(rows.read([i for i, _ in lexical if i not in chunks]))
    extra = [word for word in extra if word not in named]
    if extra:  # BM25 is a sum over terms: the neighbours' scores add to the query's own
        more = store.lexical_search(user_id, extra, wanted, settings.lexical_context_weight)
        lexical = _summed(lexical, more, wanted)
        chunks.update(rows.read([i for i, _ in lexical if i not in chunks]))
    found = {*(i for i, _ in dense), *(i for i, _ in lexical)}  # not the name search's
    visible = {
        i: c
        for i, c in chunks.items()
        if i in found and c.message_hash not in exclude_hashes and c.role in RECALLED_ROLES
    }
    present = tuple(
        LeftOut("present", chunk=c)
        for i, c in chunks.items()
        if i in found and c.message_hash in exclude_hashes and c.role in RECALLED_ROLES
    )
    similarities = dict(dense)
    if vector is not None:
        missing = [i for i in visible if i not in similarities]
        similarities.update(_similarities(store, index, settings, user_id, vector, missing, read))
    ranked = rank(
        visible, dense, lexical, similarities, now, query, query_windows(query), _weights(settings)
    )
    hits, kept = ranked.hits, ranked.kept
    texts = functools.partial(rows.whole, keep_gone=True) if rows.partial else None
    if names_identifiers(query):  # the gate reads the kept hits' text; a code under the floor
        kept = with_the_kind(query, ranked, rows.whole(kept), rows)
    elif rows.partial and gate and settings.min_answerable > 0:  # and so does the learned one
        head = AMOUNT_HITS if asks_for_money(query) else COVERED_HITS  # (amounts.py reads 5)
        kept = [*rows.whole(kept[:head]), *kept[head:]]  # its best few
    rules = (settings.min_standout, settings.min_answerable) if gate else (0.0, 0.0)
    # A request is not dropped whole for a weak best cosine: what bears on it ('I refuse to
    # use pesticides' for 'What should I do about slugs?') is often a turn of 0.2-0.3.
    dropped = ranked.abstained and not (gate and is_a_request(query))
    # an acknowledgement ('Noted.', 'Thanks!') is no evidence: its cosine to a short question
    # can be the best of all, and the gate would read the question as answered
    said = [h for h in kept if not (h.chunk.text and says_nothing(h.chunk.text))]
    if dropped or nothing_stands_out(
        query, ranked.measured, said, settings.standout_margin_weight, *rules, expanded
    ):
        return Retrieval([], True, query, present, degraded, hits, "abstained", texts=texts)
    if gate:  # the gate let the question through: the floor for its excerpts is lower
        kept = past_the_gate(settings, ranked, kept)
    if vector is not None:  # the later turns on the kept hits' subjects
        kept = with_later(store, index, settings, user_id, ranked, kept, read)
    if gate and settings.later_keyword_hits > 0:  # and the later turn found by the same words
        keyword = {i for i, _ in lexical[: settings.later_keyword_hits]}
        kept = later_by_keyword(kept, ranked, keyword)
    found_hits, empty = read_kept(kept, rows.whole, says_nothing, shown if rows.partial else None)
    return Retrieval(
        found_hits, not found_hits, query, present, degraded, hits, "weak", empty, texts
    )


def _embed_query(
    embedder: Embedder,
    text: str,
    vocabulary: Vocabulary | None,
    settings: Settings,
    user_id: str,
    known: Future[UserWords] | None = None,
) -> tuple[np.ndarray | None, str | None, list[str]]:
    """The query's vector and the user's words to search beside its own (none without a
    vocabulary or an embedder that gives word vectors); or (None, why, []) when the embedder
    failed: recall then goes on with the lexical side alone (fail open), and the caller says
    so. `known` is the user's vocabulary being read on another thread."""
    try:
        if vocabulary is None or not _expanding(settings) or not gives_words(embedder):
            return embedder.embed_query(text), None, []
        vector, words = embedder.embed_query_words(text)
    except EmbeddingFailed as exc:
        logger.warning("query embedding failed, recalling by keywords only: %s", exc)
        return None, "embedder unavailable: keyword recall only", []
    extra = vocabulary.expansions(
        user_id,
        words,
        settings.expansion_similarity,
        settings.expansion_words,
        _read(known),
    )
    return vector, None, extra


def _read(known: Future[UserWords] | None) -> UserWords | None:
    """The vocabulary read meanwhile; None (`expansions` reads it) when that read has not
    started: under load the lexical pool may still be busy with other recalls' searches."""
    if known is None or (not known.done() and known.cancel()):
        return None
    return known.result()  # done, or being read now (~0.1 ms)


def _expanding(settings: Settings) -> bool:
    """Whether recall searches the user's words nearest the question's (see `_embed_query`)."""
    return settings.expansion_similarity > 0 and settings.expansion_words > 0


def _summed(
    first: list[tuple[int, float]], second: list[tuple[int, float]], k: int
) -> list[tuple[int, float]]:
    """Two lexical searches over disjoint terms as one: each id's scores added, best `k`."""
    scores = dict(first)
    for chunk_id, score in second:
        scores[chunk_id] = scores.get(chunk_id, 0.0) + score
    return sorted(scores.items(), key=lambda item: (-item[1], item[0]))[:k]


def _weights(settings: Settings) -> Weights:
    return Weights(
        lexical_weight=settings.lexical_weight,
        fusion=settings.fusion,
        rrf_k=settings.rrf_k,
        half_life_days=settings.recency_half_life_days,
        recency_weight=settings.recency_weight,
        neighbours=(settings.neighbour_weight, settings.second_neighbour_weight),
        speaker_weight=settings.speaker_weight,
        date_weight=settings.date_weight,
        min_similarity=settings.min_similarity,
        min_lexical_similarity=settings.min_lexical_similarity,
    )


def _left_out(
    reason: Literal["abstained", "weak"],
    hits: Sequence[Hit],
    kept: Sequence[Hit],
    empty: Collection[int],
) -> tuple[LeftOut, ...]:
    """The hits not in `kept`, as left out for `reason`, or as "empty" when in `empty`."""
    kept_ids = {h.chunk.id for h in kept}
    return tuple(
        LeftOut("empty" if h.chunk.id in empty else reason, hit=h)
        for h in hits
        if h.chunk.id not in kept_ids
    )


def _speakers(chunks: Collection[Chunk]) -> set[str]:
    """The search terms of the speakers' names among these chunks ("Mary-Ann" → mary, ann)."""
    return {term for name in {c.name for c in chunks if c.name} for term in fts_terms(name)}


@dataclass(frozen=True, slots=True)
class _Lexical:
    """The lexical side of a recall: its hits, their chunk rows, the names left out."""

    hits: list[tuple[int, float]]
    chunks: dict[int, Chunk]
    named: set[str]
    first: set[int]  # the ids the search with the names found


def _lexical_side(
    store: Store,
    rows: CandidateRows,
    settings: Settings,
    user_id: str,
    query: str,
    terms: list[str],
    k: int,
) -> _Lexical:
    """BM25's top `k`, their rows, and the search again without the speakers' names the
    rows show (see the module docstring). The dense side's rows may name someone more; the
    caller then searches once again."""
    weight = settings.lexical_context_weight
    hits = store.lexical_search(user_id, terms, k, weight)
    chunks = rows.read([i for i, _ in hits])
    named = _speakers(chunks.values()) & set(fts_terms(query))
    first = set(chunks)
    if named:
        hits = store.lexical_search(user_id, search_terms(query, drop=named), k, weight)
        chunks.update(rows.read([i for i, _ in hits if i not in chunks]))
    return _Lexical(hits, chunks, named, first)


def _dense(
    store: Store,
    index: VectorIndex,
    settings: Settings,
    user_id: str,
    vector: np.ndarray,
    k: int,
    read: Read,
) -> list[tuple[int, float]]:
    if settings.vector_search == "db":
        return store.dense_search(user_id, vector, k)
    return index.search(user_id, vector, k, read)


def _similarities(
    store: Store,
    index: VectorIndex,
    settings: Settings,
    user_id: str,
    vector: np.ndarray,
    ids: list[int],
    read: Read,
) -> dict[int, float]:
    """Cosines for lexical-only candidates, so every hit can show its similarity."""
    if not ids:
        return {}
    if settings.vector_search == "ram":
        return index.similarities(user_id, vector, ids, read)
    found = store.vectors(user_id, ids)
    return {i: float(v @ vector) for i, v in found.items()}
