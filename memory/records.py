"""The records that pass between the steps of a request.

Each step of the flow in DESIGN.md takes and returns these frozen dataclasses; dicts stay at
the JSON edge (the request body is forwarded as the dict it arrived as, plus the block).
Times are Unix seconds (float, UTC).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

Role = Literal["system", "developer", "user", "assistant", "tool"]
Policy = Literal["speak", "adapt", "avoid"]
FactStatus = Literal["active", "superseded", "stale", "archived"]


@dataclass(frozen=True, slots=True)
class Message:
    """One stored message, verbatim. `content` is the text; `payload` the original JSON."""

    id: int
    user_id: str
    session_id: str
    role: str
    name: str | None
    content: str
    created_at: float
    partial: bool = False


@dataclass(frozen=True, slots=True)
class Chunk:
    """A slice of one message's text (a chunk never spans two messages)."""

    id: int
    message_id: int
    user_id: str
    session_id: str
    role: str
    name: str | None
    text: str
    created_at: float
    # content hash of the source message, to tell whether it is present in a request
    message_hash: str = ""
    # the source message's place among the user and assistant turns of its session (1, 2, …)
    turn: int | None = None


@dataclass(frozen=True, slots=True)
class Term:
    """A word of a user's vocabulary (`memory.recall.vocabulary`): its stem (the lexical
    index's term), the word as written where first seen, and its contextual vector there
    (int8 bytes). `id` is the row's, once stored."""

    stem: str
    word: str
    vector: bytes
    id: int = 0


@dataclass(frozen=True, slots=True)
class Hit:
    """A recalled chunk with how it was found.

    `score` is the fused, re-ranked score (higher is better; fusion gives [0, 1], bonuses add).
    `similarity` is the cosine between query and chunk in [-1, 1], None if not computed.
    Ranks are 1-based positions in each retriever's list, None when absent from it.
    `lexical_score` is BM25 as the lexical search gave it (higher is better), None when absent
    from its list; `fused_score` is what fusion gave, before re-ranking's bonuses. Both are for
    showing how a hit was ranked (the inspector, the search API): ranking reads neither, and
    two hits that differ only in them are equal.
    """

    chunk: Chunk
    score: float
    similarity: float | None
    dense_rank: int | None
    lexical_rank: int | None
    lexical_score: float | None = field(default=None, compare=False)
    fused_score: float | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class Excerpt:
    """What the block shows of a hit: text cut to the tier's size, and where it came from."""

    text: str
    session_id: str
    created_at: float
    similarity: float | None
    this_session: bool
    speaker: str | None = None
    # When its newest line was said (None: `created_at`), and its place in relevance order
    # (0 = most relevant): the block shows excerpts newest first, a budget cuts by relevance.
    latest_at: float | None = None
    rank: int = 0
    # The recalled chunks it shows (turns added around them to fill its room are not listed).
    chunk_ids: tuple[int, ...] = ()
    # Per line of `text`, the chunk it shows (0: a turn added around them; empty: not known),
    # so a step that cuts lines (memory/block/latest.py) lists only the chunks still shown.
    line_chunks: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Fact:
    """A structured fact about a user (semantic memory)."""

    id: int
    user_id: str
    key: str
    value: str
    category: str
    policy: Policy = "speak"
    pinned: bool = False
    status: FactStatus = "active"
    confidence: float = 1.0
    source: str = "api"
    source_message_id: int | None = None
    expires_at: float | None = None
    created_at: float = 0.0
    updated_at: float = 0.0


@dataclass(frozen=True, slots=True)
class Tier:
    """A budget tier (CALMem §6.2): how many excerpts of how many characters."""

    level: int
    max_excerpts: int
    max_chars: int


@dataclass(frozen=True, slots=True)
class MemoryBlock:
    """The rendered MOIM block and what went into it."""

    text: str
    # Its tokens in the request model's encoding (`tokens`), counted when first read.
    counted: Counted
    excerpts: int
    facts: int
    fact_ids: tuple[int, ...] = ()
    # The excerpts in the block, in the order it shows them.
    recalled: tuple[Excerpt, ...] = ()

    @property
    def tokens(self) -> int:
        """The block's tokens in the request model's encoding."""
        return self.counted.value


class Counted:
    """A count made the first time it is read, then kept.

    A block's tokens decide nothing when the request sets no token budget: they are reported
    (`x-memory-tokens-injected`, the metrics, the inspector) once the answer comes, so the
    count (~0.45 ms for a block of new lines) need not hold the request up on its way to the
    provider. A thread that reads it while another counts waits for that count instead of
    making its own: the event loop, building the response's headers while the thread that
    recalled is still counting, made the same count again beside it (30-45% of the requests
    with a block in `bench/ab_latency.py`'s setup, where the stand-in provider answers in ~2
    ms; ~0.5 ms of the loop's CPU each).
    """

    __slots__ = ("_count", "_lock", "_value")

    def __init__(self, count: int | Callable[[], int]) -> None:
        self._value: int | None = count if isinstance(count, int) else None
        self._count: Callable[[], int] | None = None if isinstance(count, int) else count
        self._lock = None if isinstance(count, int) else threading.Lock()

    @property
    def value(self) -> int:
        value = self._value
        if value is None:
            assert self._count is not None and self._lock is not None
            with self._lock:  # the first reader counts; one that comes meanwhile waits for it
                value = self._value
                if value is None:
                    value = self._value = self._count()
        return value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Counted) and self.value == other.value

    def __hash__(self) -> int:
        return hash(self.value)

    def __repr__(self) -> str:
        return f"Counted({self.value})"


# Why recall kept something out of the block (`LeftOut.reason`):
#   present   its message is in the request: the model already sees it
#   abstained nothing matched the query's words and the best meaning match was weak
#   weak      one weak signal only (memory/recall/ranking.py, `drop_weak`)
#   empty     it says nothing ("thanks!", "ok great": memory/recall/empty_turns.py)
#   pool      ranked below the best `Settings.hit_pool` hits that excerpts are cut from
#   excerpts  no room left in the tier's excerpts (how many, how long: the fill ratio's tier)
#   repeated  its words are in the request or another line of its excerpts (memory/block/shown.py)
#   context_budget  the request's token cap (X-Memory-Context-Budget) did not leave room
#   facts_budget    past `Settings.facts_max_tokens`, the facts section's cap
#   silent    its category's silence limit passed (an old open loop or event)
LeftOutReason = Literal[
    "present",
    "replaced",
    "abstained",
    "weak",
    "empty",
    "pool",
    "excerpts",
    "repeated",
    "context_budget",
    "facts_budget",
    "silent",
]


@dataclass(frozen=True, slots=True)
class LeftOut:
    """A chunk or fact recall held but kept out of the block, and why.

    For the inspector's "why this block": recall decides nothing by these. A ranked chunk
    comes as its `hit` (with its scores), one dropped before ranking as its `chunk`, a fact
    as its `fact`; exactly one is set. An excerpt the token cap dropped comes as its hits.
    """

    reason: LeftOutReason
    hit: Hit | None = None
    chunk: Chunk | None = None
    fact: Fact | None = None
