"""moim's memory layer: a library with no HTTP in it.

The proxy uses only the names below (pinned by tests/memory/test_exports.py). Importing it
changes nothing about the process: the server's tuning is in `proxy/runtime.py`.
"""

from memory.block.budget import (
    TierRule,
    fill_ratio,
    near_threshold,
    select_tier,
    tier_rules_from_config,
)
from memory.block.render import BLOCK_END, BLOCK_START, block_place, inject_block, strip_block
from memory.block.tokens import (
    context_window,
    count_message_tokens,
    count_tokens,
    message_text,
    sampled,
)
from memory.embedding import Embedder, FastEmbedder
from memory.errors import (
    EmbeddingFailed,
    MemoryLayerError,
    MigrationFailed,
    StoreUnavailable,
    describe,
)
from memory.export_items import item_problem
from memory.facts.consolidation import (
    MAX_OPERATIONS,
    ConsolidationRejected,
    GateResult,
    Operation,
    Rejection,
    gate,
    parse_operations,
)
from memory.heap import fix_mmap_threshold, limit_arenas
from memory.ingest.identity import content_hash
from memory.ingest.media import media_fingerprints, without_inline_data
from memory.ingest.turns import RECALLED_ROLES, Turn
from memory.ingest.ui_tasks import ui_task
from memory.layer import MemoryLayer, PendingRecall, RecallRequest, Recollection
from memory.records import Chunk, Excerpt, Fact, Hit, LeftOut, MemoryBlock, Message, Tier
from memory.service_embedder import EmbeddingService, ServiceEmbedder
from memory.settings import Placement, Settings
from memory.store.backend import redact_url
from memory.store.fact_limit import TooManyFacts
from memory.store.journal import Journal
from memory.store.journal_lock import JournalLock
from memory.store.marks import DueUser
from memory.store.message_rows import Stats
from memory.store.overview import SessionSummary, UserSummary
from memory.store.response_links import ResponseLink
from memory.store.sizes import StoreSizes
from memory.store.vector_rebuild import VectorRebuild

__all__ = [
    "BLOCK_END",
    "BLOCK_START",
    "Chunk",
    "ConsolidationRejected",
    "DueUser",
    "Embedder",
    "EmbeddingFailed",
    "EmbeddingService",
    "Excerpt",
    "Fact",
    "FastEmbedder",
    "GateResult",
    "Hit",
    "Journal",
    "JournalLock",
    "LeftOut",
    "MAX_OPERATIONS",
    "MemoryBlock",
    "MemoryLayer",
    "MemoryLayerError",
    "Message",
    "MigrationFailed",
    "Operation",
    "PendingRecall",
    "Placement",
    "RECALLED_ROLES",
    "RecallRequest",
    "Recollection",
    "Rejection",
    "ResponseLink",
    "ServiceEmbedder",
    "SessionSummary",
    "Settings",
    "Stats",
    "StoreSizes",
    "StoreUnavailable",
    "Tier",
    "TierRule",
    "TooManyFacts",
    "Turn",
    "UserSummary",
    "VectorRebuild",
    "block_place",
    "content_hash",
    "context_window",
    "count_message_tokens",
    "count_tokens",
    "describe",
    "fill_ratio",
    "fix_mmap_threshold",
    "gate",
    "inject_block",
    "item_problem",
    "limit_arenas",
    "media_fingerprints",
    "message_text",
    "near_threshold",
    "parse_operations",
    "redact_url",
    "sampled",
    "select_tier",
    "strip_block",
    "tier_rules_from_config",
    "ui_task",
    "without_inline_data",
]
