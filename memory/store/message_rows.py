"""The rows of `messages` as both backends write and read them, and a user's counts.

`NewMessage` is a message about to be stored (memory/ingest/identity.py computes its keys);
`message_values` is its columns in the order both backends' INSERTs name them, and
`message_from_row` reads a `Message` back from the columns `MESSAGE_COLUMNS` lists.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memory.ingest.speakers import EXAMPLE_SPEAKERS
from memory.records import Message

# The columns `message_from_row` reads, in its order.
MESSAGE_COLUMNS = "id, user_id, session_id, role, name, content, created_at, partial"


@dataclass(frozen=True, slots=True)
class NewMessage:
    """A message about to be stored (see `memory.ingest.turns` for how keys are computed)."""

    message_key: str
    content_hash: str
    role: str
    name: str | None
    content: str
    payload: str
    model: str | None
    tokens: int
    partial: bool
    created_at: float


@dataclass(frozen=True, slots=True)
class Stats:
    """One user's counts: messages, chunks, active facts and sessions."""

    user_id: str
    messages: int
    chunks: int
    facts: int
    sessions: int


def message_from_row(row: Sequence[Any]) -> Message:
    """A Message from the first eight columns (id … created_at, partial) of a row."""
    return Message(
        id=row[0],
        user_id=row[1],
        session_id=row[2],
        role=row[3],
        name=row[4],
        content=row[5],
        created_at=row[6],
        partial=bool(row[7]),
    )


def message_values(user_id: str, session_id: str, m: Any) -> tuple[Any, ...]:
    """One message's `messages` columns, in the order both backends' INSERTs name them."""
    return (
        user_id,
        session_id,
        m.message_key,
        m.content_hash,
        m.role,
        m.name,
        m.content,
        m.payload,
        m.model,
        m.tokens,
        int(m.partial),
        m.created_at,
    )


# Example dialogue (memory/ingest/speakers.py: stored, never recalled) is not shown beside a
# recalled turn either: the condition neighbours' reads add, in both stores' SQL.
NOT_AN_EXAMPLE = (
    "lower(trim(coalesce(name, ''))) NOT IN "
    f"({', '.join(repr(name) for name in sorted(EXAMPLE_SPEAKERS))})"
)
