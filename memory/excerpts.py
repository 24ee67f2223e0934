"""Step 4b, cut to size: turn ranked hits into at most N excerpts of at most M characters.

An excerpt is a passage of one earlier session. Hits from the same session are gathered into
that session's excerpt (best first, while they fit), then shown in the order they were said,
each line led by its speaker. Conversational turns are short — LoCoMo's average ~120
characters — so one 600-character excerpt can carry several relevant turns, which is what
lets a 5 × 600 block hold more evidence than five single chunks (bench/locomo.py measures it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from memory.budget import cut_excerpt
from memory.records import Excerpt, Hit, Tier

# A further hit joins an excerpt only if at least this much of it fits.
_MIN_PIECE = 80
_ELLIPSIS = "…"


@dataclass(slots=True)
class _Passage:
    session_id: str
    lines: list[tuple[float, int, str]] = field(default_factory=list)  # (time, chunk id, text)
    similarity: float | None = None
    hits: int = 0
    used: int = 0


def build_excerpts(
    hits: Sequence[Hit], tier: Tier, terms: Sequence[str], session_id: str
) -> list[Excerpt]:
    """Excerpts for the block: one per session, best session first, within the tier."""
    if tier.max_excerpts <= 0 or tier.max_chars <= 0:
        return []
    passages: dict[str, _Passage] = {}
    for hit in hits:
        chunk = hit.chunk
        passage = passages.get(chunk.session_id)
        if passage is None:
            if len(passages) >= tier.max_excerpts:
                continue
            passage = passages[chunk.session_id] = _Passage(chunk.session_id)
        room = tier.max_chars - passage.used - (1 if passage.lines else 0)
        if passage.lines and room < _MIN_PIECE:
            continue
        label = f"{chunk.name or chunk.role}: "
        text = cut_excerpt(chunk.text, max(room - len(label), 1), terms)
        if text in ("", _ELLIPSIS):
            continue
        line = label + text
        passage.lines.append((chunk.created_at, chunk.id, line))
        passage.used += len(line) + (1 if len(passage.lines) > 1 else 0)
        passage.hits += 1
        if hit.similarity is not None:
            passage.similarity = max(passage.similarity or -1.0, hit.similarity)
    return [_excerpt(p, session_id) for p in passages.values()]


def _excerpt(passage: _Passage, session_id: str) -> Excerpt:
    lines = sorted(passage.lines)
    return Excerpt(
        text="\n".join(text for _, _, text in lines),
        session_id=passage.session_id,
        created_at=lines[0][0],
        similarity=passage.similarity,
        this_session=passage.session_id == session_id,
        speaker=None,
    )

