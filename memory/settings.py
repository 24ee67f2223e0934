"""What the memory layer needs to know, as one frozen record.

The proxy builds it from its `Config`; library users build it directly. Nothing in `memory`
reads the environment.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from memory.block.budget import DEFAULT_TIER_RULES, TierRule

Placement = Literal["system", "before_last_user"]

BUNDLED_MODEL = "sentence-transformers/all-MiniLM-L6-v2"


@dataclass(frozen=True, slots=True)
class Settings:
    """Memory-layer settings. Defaults are the embedded, offline configuration."""

    db_path: Path = Path("moim.db")
    # A `postgresql://…` URL: the shared Postgres + pgvector store for N replicas instead of
    # the SQLite file (memory/store/postgres.py). `db_path` then only names the local journal.
    db_url: str | None = None
    # Seconds a statement waits for another connection's write lock before the store gives up
    # (StoreUnavailable): the writer then retries from its journal, and the memory API says 503.
    busy_timeout: float = 10.0
    # Any fastembed model name works for users with network; the default is bundled offline.
    embedding_model: str = BUNDLED_MODEL
    # One text per model run: the bundled int8 model scales activations per run, so in a
    # batch a text's vector would depend on its batch-mates (cosine ~0.99 to itself). One at
    # a time, a text always gets the same vector, at 177 texts/s against 221 for batches of 16.
    embedding_batch_size: int = 1
    # Characters of the previous turn's end embedded before each message's first chunk, so a
    # reply carries the topic it answers (memory/ingest/embedding_inputs.py), and held in its
    # FTS row's context column. Changing it needs a re-index.
    embedding_context_chars: int = 200
    # BM25 weight of a term in that context against one in the chunk's own text (1.0). LoCoMo
    # (bench/tune_recall.py), from no context column: 0.7 gave hit +2.1 / all +1.9 points on
    # the tuning conversations (0.4: +1.9 / +1.7, 1.0: +2.0 / +1.6) and +3.2 / +3.0 held out.
    lexical_context_weight: float = 0.7
    # onnxruntime threads per model run (None: all cores).
    embedding_threads: int | None = 1
    # "ram": exact cosine over an in-RAM matrix per user (fast); "db": sqlite-vec scan (low RAM).
    vector_search: Literal["ram", "db"] = "ram"
    # With "ram", a user of this many vectors or more has every field of their chunks but the
    # text held in RAM too (48 bytes a chunk; memory/store/chunk_heads.py): recall ranks its
    # candidates from them and reads from SQLite only the text of what it keeps. 0: never.
    chunk_heads_from: int = 20_000
    tier_rules: tuple[TierRule, ...] = DEFAULT_TIER_RULES
    # Where the block goes (memory/render.py). "before_last_user" keeps the provider's prompt
    # cache: a 12-turn chat with a 3,000-token system prompt keeps 0.93 of each request
    # cacheable (memory off: 0.97), "system" 0.00, as the block changes every turn and sits at
    # the start of the prompt (bench/prompt_cache.py).
    placement: Placement = "before_last_user"
    chunk_size: int = 1000
    chunk_overlap: int = 200
    # The lexical search's engine: "tantivy", a top-k index beside the database (block-max
    # WAND, derived from SQLite and verified at start; memory/store/lexical_index.py), or
    # "fts5", which scores every posting of the query's terms (11 ms at 100k chunks).
    lexical_index: Literal["tantivy", "fts5"] = "tantivy"
    # The most chunks one indexing pass embeds. A message with more is indexed a slice per
    # pass, and the writer stores new turns and indexes messages not yet begun in between
    # (memory/ingest.py), so one large message delays others by a slice, not by all of it.
    # bench/fair_indexing.py, a short turn behind a 1 MiB message on a busy 2-core machine:
    # searchable after 2.4 s with 32 (7.2 s with 64; 138 s before slicing).
    index_slice_chunks: int = 32
    # Which retrievers recall uses: both fused (default), or one alone (for benchmarks).
    retrievers: Literal["hybrid", "dense", "lexical"] = "hybrid"
    # Candidates taken from each retriever before fusion (80 over 40: LoCoMo hit +0.9 points).
    candidates: int = 80
    # Best fused hits that may go into the block's excerpts (gathered per session).
    hit_pool: int = 40
    # Bonus for turns said by someone the query names (a fused score is in [0, 1]). With RRF
    # (then 1/2.3 of a perfect score), twice as much gained LoCoMo categories 1-4 only 0.5
    # points and cost category 5 (questions naming the wrong speaker) 12; with score fusion,
    # none at all costs 2.6 points (bench/tune_recall.py).
    speaker_weight: float = 0.4
    # Bonus for turns from a date the query names (memory.recall.when).
    date_weight: float = 0.4
    # How the two retrievers' candidates are fused (memory/recall/ranking.py): their normalised
    # scores mixed ("scores"), or reciprocal rank fusion ("rrf", k = `rrf_k`).
    fusion: Literal["scores", "rrf"] = "scores"
    # The lexical side's weight in fusion against the dense side's 1.0. LoCoMo tuning
    # conversations (bench/tune_recall.py): scores fused best at 1.0 (0.8 and 1.2: -0.4 and
    # -0.9 points hit); RRF at 1.3.
    lexical_weight: float = 1.0
    # Share of a neighbour turn's score a hit gains, for the turn just before or after it and
    # for the one two away (memory.recall.ranking.boost_neighbours says why).
    neighbour_weight: float = 0.2
    second_neighbour_weight: float = 0.05
    # Turns on each side of a passage's best hit that may fill its leftover room.
    widen_turns: int = 2
    # The writer merges the FTS index when idle once this many chunks (or 5 %) were added
    # since it was last whole (memory/store/fts_upkeep.py).
    fts_merge_after: int = 1000
    # Reciprocal rank fusion constant (Cormack et al.; True Memory §4), for `fusion: rrf`.
    rrf_k: int = 60
    # Recency re-ranking: a hit loses half its recency bonus every `recency_half_life_days`.
    recency_half_life_days: float = 30.0
    recency_weight: float = 0.05
    # MemX-style rejection: with no lexical hit, a best cosine below this recalls nothing.
    min_similarity: float = 0.35
    # The abstention gate (memory/recall/abstention.py): no excerpt when the best cosine plus
    # `standout_margin_weight` times its lead over the median of the ten best is under
    # `min_standout` (0 turns that rule off; the default since the learned gate). And the
    # learned gate: no excerpt when its probability that the question was discussed is under
    # `min_answerable` (0 turns it off). Both off: no gate. Calibration: docs/recall-quality.md.
    standout_margin_weight: float = 3.0
    min_standout: float = 0.0
    min_answerable: float = 0.48
    # A question's words the user never said are searched with the user's own nearest words
    # (memory/recall/vocabulary.py): the least cosine of such a neighbour (0 turns it off) and
    # how many each word gets. memsuite paraphrase +5 / +3 points (tuning / held out), LoCoMo
    # within ±0.5 (docs/recall-quality.md).
    expansion_similarity: float = 0.5
    expansion_words: int = 2
    # What came later on the same subject (memory/recall/later.py): for each of the best
    # `later_hits` kept hits, the dropped user turn said after it whose vector is at least
    # `later_similarity` close to the hit's (0 turns it off) and at least
    # `later_query_similarity` to the question is kept too, after the kept hits. memsuite,
    # fresh split (never tuned on): update value 0.53 → 0.59; tuning half: paraphrase 0.89 →
    # 0.92, held out update 0.92 → 0.96; LoCoMo unchanged (docs/recall-quality.md).
    later_similarity: float = 0.45
    later_hits: int = 3
    later_query_similarity: float = 0.2
    # Once the gate let a question through, the best dropped user turn among the lexical
    # search's first `later_keyword_hits` that was said after the oldest kept user turn among
    # them is kept too, whatever its cosine (memory/recall/later.py: later_by_keyword; 0
    # turns it off). fresh5 update 0.85 → 0.88; LoCoMo unchanged (docs/recall-quality.md,
    # ninth pass).
    later_keyword_hits: int = 10
    # A newer user line that names a word of an older conversation's user lines, then a name or
    # a number none of them holds, has the words past the shared one shown first
    # (memory/block/latest.py; off: False). docs/recall-quality.md, "Nineteenth pass".
    lead_with_change: bool = True
    # A keyword match whose meaning is this far from the query is not recalled either.
    min_lexical_similarity: float = 0.15
    # Once the gate let a question through (a turn stands out, or the question asks for the
    # present), a turn only the dense search found may fill its excerpts from this cosine on:
    # `min_similarity` still decides what the gate reads. fresh4 paraphrase 0.33 → 0.40,
    # abstention unchanged by construction, LoCoMo unchanged (docs/recall-quality.md, fifth
    # pass). Never below `min_lexical_similarity`; `min_similarity` or more turns it off.
    excerpt_min_similarity: float = 0.15
    facts_max_tokens: int = 400
    capture_facts: bool = True
    context_windows: dict[str, int] = field(default_factory=dict)
    default_context_window: int = 128_000
