"""The `memory` package's public surface, and the direction of imports (STYLE.md point 3).

Like httpx's `test_exported_members.py`: adding or removing a public name is a decision, and
this list must change with it.
"""

import ast
from pathlib import Path

import memory

ROOT = Path(__file__).resolve().parents[2]


def imported_modules(package):
    """(file, top-level module) for every import statement in a package's sources."""
    for path in sorted((ROOT / package).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    yield path.relative_to(ROOT).as_posix(), alias.name
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                yield path.relative_to(ROOT).as_posix(), node.module


def test_memory_exports_exactly_these_names():
    assert memory.__all__ == [
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


def test_every_exported_name_exists():
    assert [name for name in memory.__all__ if not hasattr(memory, name)] == []


def test_memory_imports_nothing_from_proxy_starlette_or_httpx():
    forbidden = {"proxy", "starlette", "httpx"}
    found = [(f, m) for f, m in imported_modules("memory") if m.split(".")[0] in forbidden]
    assert found == []


def test_proxy_uses_only_the_public_names_of_memory():
    private = [(f, m) for f, m in imported_modules("proxy") if m.startswith("memory.")]
    assert private == []


def _layer_internals(tree):
    """`<x>.layer.store`, `layer.index`, `self._layer.store` …: attribute reads that reach
    past MemoryLayer's methods into its store or vector index."""
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and node.attr in ("store", "index")):
            continue
        owner = node.value
        name = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", "")
        if name in ("layer", "_layer", "memory"):
            yield node.lineno


def test_proxy_reaches_memory_only_through_the_layer_s_methods():
    found = [
        (path.relative_to(ROOT).as_posix(), line)
        for path in sorted((ROOT / "proxy").rglob("*.py"))
        for line in _layer_internals(ast.parse(path.read_text(encoding="utf-8")))
    ]
    assert found == []
