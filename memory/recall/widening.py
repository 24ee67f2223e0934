"""Hits kept beyond ranking's floors: what the floors drop but the block needs.

The cosine floors (`memory.recall.ranking.drop_weak`) keep noise out of what the abstention
gate reads. Three kinds of turn under them are still the answer: the turn that gives the
identifier a question asks for by its kind, said amid small talk (`with_the_kind`, before the
gate: it is the gate's evidence); once the gate lets the question through, a weaker turn only
the dense search found (`past_the_gate`: a paraphrase shares no word with the question); and
the later turns on the kept hits' subjects (`with_later`: what came after, said in passing).
"""

from __future__ import annotations

from memory.recall.candidate_rows import CandidateRows
from memory.recall.identifiers import asks_for_a_kind, giving_the_kind
from memory.recall.later import later_on_same_subject, may_come_later
from memory.recall.scoring import Ranked
from memory.recall.user_matrix import Read
from memory.recall.vectors import VectorIndex
from memory.records import Hit
from memory.settings import Settings
from memory.store.backend import StoreBackend as Store

# Lexical hits under the floor read for the identifier a question asks for by its kind.
KIND_TRIED = 10


def with_the_kind(query: str, ranked: Ranked, kept: list[Hit], rows: CandidateRows) -> list[Hit]:
    """`kept` (read whole), with the lexical hits under the floor that give the identifier the
    question asks for by its kind (`identifiers.giving_the_kind`), in their ranked place (the
    order `scoring.rank` gives: by score, then the newer chunk)."""
    if not asks_for_a_kind(query):
        return kept
    ids = {h.chunk.id for h in kept}
    weak = [h for h in ranked.hits_where(lambda c, s: c.id not in ids) if h.lexical_rank]
    given = giving_the_kind(query, rows.whole(weak[:KIND_TRIED]))
    if not given:
        return kept
    return sorted([*kept, *given], key=lambda h: (-h.score, -h.chunk.id))


def past_the_gate(settings: Settings, ranked: Ranked, kept: list[Hit]) -> list[Hit]:
    """`kept`, with the dense-only candidates under `min_similarity` whose cosine reaches
    `excerpt_min_similarity`, best first.

    The floor is what the gate reads: a question whose related turns are all weak must not
    have them lifted by noise, so the gate weighs the hits above it. Once the gate has let the
    question through, a weaker turn only the dense search found is most often the answer in
    other words (a paraphrase shares no word with it); the budget still keeps the best five.
    """
    floor = max(settings.excerpt_min_similarity, settings.min_lexical_similarity)
    if floor >= settings.min_similarity or len(kept) == len(ranked.hits):
        return kept  # off, or nothing was dropped
    kept_ids = {h.chunk.id for h in kept}
    return ranked.hits_where(lambda c, s: c.id in kept_ids or (s is not None and s >= floor))


def with_later(
    store: Store,
    index: VectorIndex,
    settings: Settings,
    user_id: str,
    ranked: Ranked,
    kept: list[Hit],
    read: Read,
) -> list[Hit]:
    """`kept`, then the later turns on its best hits' subjects (memory.recall.later). Only
    the dropped candidates that may be one (`may_come_later`: a user's turn close enough to
    the question) are built as records and have their vectors read; a large user's rows are
    those the searches read (`read`), not read again."""
    if settings.later_similarity <= 0 or settings.later_hits <= 0 or len(kept) == len(ranked.hits):
        return kept  # off, or nothing was dropped
    kept_ids = {h.chunk.id for h in kept}
    least = settings.later_query_similarity
    pool = ranked.hits_where(lambda c, s: c.id not in kept_ids and may_come_later(c, s, least))
    if not pool:
        return kept
    ids = [h.chunk.id for h in kept[: settings.later_hits]] + [h.chunk.id for h in pool]
    vectors = (
        index.vectors(user_id, ids, read)
        if settings.vector_search == "ram"
        else store.vectors(user_id, ids)
    )
    return later_on_same_subject(
        kept,
        pool,
        vectors,
        settings.later_similarity,
        settings.later_hits,
        settings.later_query_similarity,
    )
