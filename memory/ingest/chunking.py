"""Split one message's text into overlapping chunks for indexing (remember step).

CALMem §4.2: a sliding window of at most 1,000 characters, consecutive chunks overlapping by
about 200, so that a sentence straddling a boundary is whole in at least one chunk. Sizes are
in characters (Python `str` indices, i.e. Unicode code points), never bytes, so multi-byte
text is never cut inside a character. The caller chunks one message at a time, which is what
keeps a chunk from ever spanning two messages.

Boundaries avoid cutting words: a chunk's end moves back to the last whitespace in its window
and the next chunk's start moves forward to the next whitespace, when there is one; text with
no whitespace (CJK, long URLs) is cut hard, but never between a letter and a combining mark
that follows it.
"""

from __future__ import annotations

import unicodedata

__all__ = ["chunk_spans", "chunk_text"]


def chunk_text(text: str, size: int = 1000, overlap: int = 200) -> list[str]:
    """Split `text` into stripped chunks of at most `size` characters.

    Consecutive chunks share about `overlap` characters (less by up to a word, since the next
    start snaps forward to a word). Every non-whitespace character of `text` is in at least
    one chunk. Text of at most `size` characters (after stripping) is one chunk, the fast
    path for most conversational turns; empty or whitespace-only text gives `[]`. The result
    depends only on the arguments.

    Raises ValueError unless `size >= 1` and `0 <= overlap < size` (otherwise the window
    could not advance).
    """
    return [text[start:end] for start, end in chunk_spans(text, size, overlap)]


def chunk_spans(text: str, size: int = 1000, overlap: int = 200) -> list[tuple[int, int]]:
    """Where `chunk_text`'s chunks lie in `text`: `(start, end)` character offsets, in order.

    `text[start:end]` is the chunk; offsets are into `text` as given (not stripped), so a
    caller can map a chunk back to its place in the message.
    """
    if size < 1:
        raise ValueError(f"chunk size must be at least 1, got {size}")
    if not 0 <= overlap < size:
        raise ValueError(f"chunk overlap must be in [0, {size}), got {overlap}")
    start, stop = _skip_space(text, 0), len(text.rstrip())
    spans: list[tuple[int, int]] = []
    while stop - start > size:
        # The cut stays past start + overlap, so the next start is always past this one.
        cut = _cut_before(text, start + size, floor=start + overlap)
        spans.append((start, start + len(text[start:cut].rstrip())))
        start = _skip_space(text, _next_start(text, cut - overlap, limit=cut, floor=start))
    if start < stop:
        spans.append((start, stop))
    return spans


def _skip_space(text: str, position: int) -> int:
    """The first position at or after `position` that is not whitespace (or the end)."""
    while position < len(text) and text[position].isspace():
        position += 1
    return position


def _cut_before(text: str, end: int, floor: int) -> int:
    """The largest position in (floor, end] that is not inside a word; else a hard cut.

    A position is a chunk's exclusive end; it is not inside a word when the character on
    either side of it is whitespace. `end < len(text)` here, so `text[end]` exists.
    """
    for position in range(end, floor, -1):
        if text[position - 1].isspace() or text[position].isspace():
            return position
    return _not_before_mark(text, end, floor)


def _next_start(text: str, start: int, limit: int, floor: int) -> int:
    """Where the next chunk begins: `start`, moved forward to a word boundary before `limit`.

    A start already at a word boundary stays; with no whitespace before `limit` (one long
    word, CJK) it is a hard start. It never moves past `limit`, the previous chunk's end, so
    no character between the two chunks is lost, nor back to `floor`, the previous start.
    """
    if text[start - 1].isspace() or text[start].isspace():
        return start
    for position in range(start, limit):
        if text[position].isspace():
            return position
    return _not_before_mark(text, start, floor)


def _not_before_mark(text: str, position: int, floor: int) -> int:
    """Move a hard cut back so it does not separate a combining mark from its base letter."""
    while position - 1 > floor and unicodedata.combining(text[position]):
        position -= 1
    return position
