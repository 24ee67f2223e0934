"""Render the MOIM block, place it in the request, and strip it from text (inject step).

The block is plain text the model reads as context (CALMem §6.3; CONTRACT.md, "The memory
block"): a first line `BLOCK_START`, a line saying this is recalled data, the user's facts
under section lines in square brackets grouped by surface policy, then recalled excerpts
under `[Relevant past context]`, each with a header line saying where and when it is from,
and a last line `BLOCK_END`.

Everything in the block except its fixed lines comes from storage, so it is escaped
(`escape_memory_text`): no recalled text can end the block early, open a second one, or
forge a section line, nor hold a look-alike a model would read as one (full-width `＝`,
zero-width characters, combining marks, another case). That is also what lets `strip_block`
take the first `BLOCK_END` line after `BLOCK_START` as the real end, so an injected block is
never stored (DESIGN.md).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from memory.block.escape import (
    BLOCK_END,
    BLOCK_START,
    FACT_SECTIONS,
    PAST_CONTEXT,
    PREAMBLE,
    escape_memory_text,
)
from memory.records import Excerpt, Fact, Policy
from memory.settings import Placement

__all__ = [
    "BLOCK_END",
    "BLOCK_START",
    "FACT_SECTIONS",
    "PAST_CONTEXT",
    "PREAMBLE",
    "escape_memory_text",
    "block_place",
    "inject_block",
    "render_block",
    "strip_block",
]

# A block's first line, and its last with the blank line after it (`strip_block`).
_BLOCK_START_LINE = re.compile(rf"^{re.escape(BLOCK_START)}\n", re.MULTILINE)
_BLOCK_END_LINE = re.compile(rf"^{re.escape(BLOCK_END)}$(?:\n\n|\n)?", re.MULTILINE)


def render_block(
    facts: Sequence[Fact],
    excerpts: Sequence[Excerpt],
    now: float,
    session_id: str | None = None,
) -> str | None:
    """The MOIM block for these facts and excerpts, or None when both are empty.

    Facts are grouped by policy (speak, adapt, avoid), pinned first, otherwise in the given
    order; the caller passes only facts that should be shown (active, unexpired). Excerpts
    keep the given order (best first). An excerpt is labelled as from this session when its
    `this_session` is set or its `session_id` equals `session_id`. Dates are UTC, with an age
    relative to `now` (Unix seconds).
    """
    if not facts and not excerpts:
        return None
    sections = [_fact_section(facts, policy) for policy in FACT_SECTIONS]
    if excerpts:
        sections.append([PAST_CONTEXT, *_excerpt_lines(excerpts, now, session_id)])
    body = "\n\n".join("\n".join(lines) for lines in sections if lines)
    return f"{BLOCK_START}\n{PREAMBLE}\n\n{body}\n{BLOCK_END}"


def _fact_section(facts: Sequence[Fact], policy: Policy) -> list[str]:
    group = sorted((fact for fact in facts if fact.policy == policy), key=lambda f: not f.pinned)
    if not group:
        return []
    lines = (f"- {_fact_label(fact.key)}: {_one_line(fact.value)}" for fact in group)
    return [FACT_SECTIONS[policy], *(escape_memory_text(line) for line in lines)]


def _fact_label(key: str) -> str:
    """A readable key: "preference:dark_mode" → "preference (dark mode)"."""
    prefix, colon, rest = _one_line(key.replace("_", " ")).partition(":")
    if colon and prefix.strip() and rest.strip():
        return f"{prefix.strip()} ({rest.strip()})"
    return _one_line(key.replace("_", " "))


def _one_line(text: str) -> str:
    """Stored text made to fit one line: every run of whitespace, line breaks too, is a space."""
    return " ".join(text.split())


def _excerpt_lines(excerpts: Iterable[Excerpt], now: float, session_id: str | None) -> list[str]:
    lines: list[str] = []
    for excerpt in excerpts:
        lines.append(_excerpt_header(excerpt, now, session_id))
        text = escape_memory_text(excerpt.text)
        lines.extend(f"  {line}" if line else "" for line in text.split("\n"))
    return lines


def _excerpt_header(excerpt: Excerpt, now: float, session_id: str | None) -> str:
    """E.g. `• Session "ab12cd34" — 2024-05-08 (3 days ago), similarity 0.71 — Ann said:`."""
    if excerpt.this_session or (session_id is not None and excerpt.session_id == session_id):
        where = "This session, earlier"
    else:
        where = f'Session "{_one_line(excerpt.session_id)[:12]}"'
    header = f"• {where} — {_when(excerpt.created_at, now)}"
    if excerpt.similarity is not None:
        header += f", similarity {excerpt.similarity:.2f}"
    if excerpt.speaker:
        header += f" — {_one_line(excerpt.speaker)} said:"
    return escape_memory_text(header)


def _when(created_at: float, now: float) -> str:
    """`YYYY-MM-DD (age)` in UTC, the age in calendar days from `now`."""
    then = datetime.fromtimestamp(created_at, UTC).date()
    days = (datetime.fromtimestamp(now, UTC).date() - then).days
    return f"{then.isoformat()} ({_age(days)})"


def _age(days: int) -> str:
    if days <= 0:
        return "today"
    if days == 1:
        return "yesterday"
    if days < 14:
        return f"{days} days ago"
    if days < 60:
        return f"{days // 7} weeks ago"
    if days < 365:
        return f"{days // 30} months ago"
    years = days // 365
    return "1 year ago" if years == 1 else f"{years} years ago"


def inject_block(
    messages: list[dict[str, Any]],
    block: str,
    placement: Placement = "before_last_user",
) -> list[dict[str, Any]]:
    """A new message list with `block` placed in it; `messages` and its dicts are not changed.

    "before_last_user" (the default): a new system message just before the last user message,
    or at the end when there is no user message. What comes before it is the conversation as
    the previous request had it, so a provider's prompt cache keeps that prefix
    (bench/prompt_cache.py). "system" (the default until the prompt cache was measured):
    prepend the block and a blank line to the first system or developer message (as a first
    text part when its content is a list of parts), or insert a new system message first when
    there is none; the block then changes the start of every request.

    Either way a message that carries a `cache_control` breakpoint (on itself or on a part)
    is never edited, and the block never goes before one: the provider caches the prefix up
    to each breakpoint, so the block then goes in a new system message right after the last
    message carrying one.
    """
    index, message, replaces = block_place(messages, block, placement)
    placed = list(messages)
    if replaces:
        placed[index] = message
    else:
        placed.insert(index, message)
    return placed


def block_place(
    messages: Sequence[dict[str, Any]], block: str, placement: Placement = "before_last_user"
) -> tuple[int, dict[str, Any], bool]:
    """Where `inject_block` places `block`: the index, the message that goes there, and
    whether it replaces the message at that index (True) or goes in before it. A caller that
    holds the messages' JSON text writes that one message into it (`proxy/json_items.py`)."""
    after = _after_last_breakpoint(messages)
    if placement == "before_last_user":
        users = [i for i, message in enumerate(messages) if message.get("role") == "user"]
        where = max(users[-1] if users else len(messages), after)
        return where, {"role": "system", "content": block}, False
    for index, message in enumerate(messages):
        if message.get("role") in ("system", "developer"):
            if index < after:
                break
            return index, {**message, "content": _prepend(block, message.get("content"))}, True
    return after, {"role": "system", "content": block}, False


def _after_last_breakpoint(messages: Sequence[dict[str, Any]]) -> int:
    """The index after the last message with a `cache_control` breakpoint, or 0 if none."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        content = message.get("content")
        parts = content if isinstance(content, list) else []
        if "cache_control" in message or any(
            isinstance(part, dict) and "cache_control" in part for part in parts
        ):
            return index + 1
    return 0


def _prepend(block: str, content: Any) -> Any:
    if isinstance(content, str):
        return f"{block}\n\n{content}"
    if isinstance(content, list):
        return [{"type": "text", "text": block}, *content]
    return block


def strip_block(text: str) -> str:
    """`text` without any injected MOIM block (and the blank line that followed it).

    A block runs from a line that is exactly `BLOCK_START` to the first line after it that
    is exactly `BLOCK_END`; recalled text inside was escaped, so that line is the real end.
    Text without a complete block is returned unchanged, as the same object.
    Once a first line has no last line after it, no later one has: the search stops there.
    (One regex, first line to last, searched again to the end of the text from each first
    line, which made a message of many first lines quadratic: 1.7 s for 100 KB of them.)
    """
    if BLOCK_START not in text:
        return text
    kept: list[str] = []
    position = 0
    while start := _BLOCK_START_LINE.search(text, position):
        end = _BLOCK_END_LINE.search(text, start.end())
        if end is None:
            break
        kept.append(text[position : start.start()])
        position = end.end()
    if not kept:
        return text
    kept.append(text[position:])
    return "".join(kept)
