"""moim's memory layer: a library with no HTTP in it.

The proxy uses only the names below (pinned by tests/memory/test_exports.py).
"""

import os

# One BLAS thread for the vector scans, set before numpy loads (when moim loads it first):
# recall already runs its lexical search in parallel, and a two-thread OpenBLAS gemv on two
# busy cores measured 7.9 ms for a 10k x 384 scan against 0.7 ms with one thread.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from memory.budget import TierRule, fill_ratio, select_tier, tier_rules_from_config
from memory.consolidation import (
    MAX_OPERATIONS,
    ConsolidationRejected,
    GateResult,
    Operation,
    Rejection,
    apply_operations,
    gate,
    parse_operations,
)
from memory.consolidation_marks import DueUser
from memory.embedding import Embedder, FastEmbedder
from memory.errors import EmbeddingFailed, MemoryLayerError, MigrationFailed, StoreUnavailable
from memory.heap import limit_arenas
from memory.ingest import Turn, content_hash
from memory.journal import Journal
from memory.layer import MemoryLayer, RecallRequest, Recollection
from memory.records import Chunk, Excerpt, Fact, Hit, MemoryBlock, Message, Tier
from memory.render import BLOCK_END, BLOCK_START, inject_block, strip_block
from memory.response_links import ResponseLink
from memory.settings import Placement, Settings
from memory.store import Stats
from memory.tokens import context_window, count_message_tokens, count_tokens, message_text

__all__ = [
    "BLOCK_END",
    "BLOCK_START",
    "Chunk",
    "ConsolidationRejected",
    "DueUser",
    "Embedder",
    "EmbeddingFailed",
    "Excerpt",
    "Fact",
    "FastEmbedder",
    "GateResult",
    "Hit",
    "Journal",
    "MAX_OPERATIONS",
    "MemoryBlock",
    "MemoryLayer",
    "MemoryLayerError",
    "Message",
    "MigrationFailed",
    "Operation",
    "Placement",
    "RecallRequest",
    "Recollection",
    "Rejection",
    "ResponseLink",
    "Settings",
    "Stats",
    "StoreUnavailable",
    "Tier",
    "TierRule",
    "Turn",
    "apply_operations",
    "content_hash",
    "context_window",
    "count_message_tokens",
    "count_tokens",
    "fill_ratio",
    "gate",
    "inject_block",
    "limit_arenas",
    "message_text",
    "parse_operations",
    "select_tier",
    "strip_block",
    "tier_rules_from_config",
]
