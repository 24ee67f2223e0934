"""moim's memory layer: a library with no HTTP in it.

The proxy uses only the names below (pinned by tests/memory/test_exports.py).
"""

from memory.budget import TierRule, fill_ratio, select_tier, tier_rules_from_config
from memory.embedding import Embedder, FastEmbedder
from memory.errors import EmbeddingFailed, MemoryLayerError, MigrationFailed, StoreUnavailable
from memory.ingest import Turn, content_hash
from memory.journal import Journal
from memory.layer import MemoryLayer, RecallRequest, Recollection
from memory.records import Chunk, Excerpt, Fact, Hit, MemoryBlock, Message, Tier
from memory.render import BLOCK_END, BLOCK_START, inject_block, strip_block
from memory.settings import Settings
from memory.store import Stats
from memory.tokens import context_window, count_message_tokens, count_tokens, message_text

__all__ = [
    "BLOCK_END",
    "BLOCK_START",
    "Chunk",
    "Embedder",
    "EmbeddingFailed",
    "Excerpt",
    "Fact",
    "FastEmbedder",
    "Hit",
    "Journal",
    "MemoryBlock",
    "MemoryLayer",
    "MemoryLayerError",
    "Message",
    "MigrationFailed",
    "RecallRequest",
    "Recollection",
    "Settings",
    "Stats",
    "StoreUnavailable",
    "Tier",
    "TierRule",
    "Turn",
    "content_hash",
    "context_window",
    "count_message_tokens",
    "count_tokens",
    "fill_ratio",
    "inject_block",
    "message_text",
    "select_tier",
    "strip_block",
    "tier_rules_from_config",
]
