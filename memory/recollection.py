"""The records recall passes between its steps: a request's needs, a search under way, the outcome.

`MemoryLayer.begin_recall` returns a `PendingRecall`; `MemoryLayer.recall` takes a
`RecallRequest` (and that pending search) and returns a `Recollection` (memory/layer.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from memory.recall.retrieval import Retrieval
from memory.records import Hit, LeftOut, MemoryBlock, Tier


@dataclass(frozen=True, slots=True)
class RecallRequest:
    """What recall needs to know about one chat request."""

    user_id: str
    session_id: str
    model: str
    messages: Sequence[Mapping[str, Any]]
    request_tokens: int
    context_window: int
    token_budget: int | None = None
    episodic: bool = True
    # The provider holds this session's earlier turns (a Responses API request continuing a
    # reply): the model sees them though the request does not carry them, so none is recalled.
    session_in_context: bool = False


@dataclass(frozen=True, slots=True)
class PendingRecall:
    """A recall's searches under way (`MemoryLayer.begin_recall`), for `MemoryLayer.recall`."""

    user_id: str
    messages: Sequence[Mapping[str, Any]]
    now: float
    future: Future[tuple[Retrieval, set[str]]]


@dataclass(frozen=True, slots=True)
class Recollection:
    """The outcome of recall: the tier, the block (None when nothing to inject), the hits."""

    tier: Tier
    block: MemoryBlock | None
    hits: list[Hit]
    # True when excerpts were skipped because the embedding model was still loading.
    warming: bool = False
    # For the inspector: the query recall searched with ("" when it did not search), and what
    # it kept out of the block and why (memory/block/left_out.py).
    # `left_out` may be told only when read (memory.block.left_out.Told).
    query: str = ""
    left_out: Sequence[LeftOut] = ()
    # Set when recall went on by keywords alone because the embedder failed: what to tell.
    degraded: str | None = None
    # True when the abstention gate or the similarity floors kept a hit out of the block
    # (`left_out` holds it, as "abstained" or "weak"): known without telling `left_out`.
    withheld: bool = False
