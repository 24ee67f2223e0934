"""Replies a client regenerated: the answer it replaced is not recalled into its conversation.

A client that regenerates its last answer (or retries a request whose reply it never got)
sends the same history again and gets a new reply; both replies are stored, the question
followed by the first, then the second. The requests that follow carry the question and the
second only, so the first would come back as "This session, earlier", as a turn the client's
window dropped does, and the model would take it for something it said. It is told apart from
a dropped turn by where the request picks up: the request carries its question (lined up by
the message before it too, so a "yes" said again is not taken for an earlier one), and after
the question either nothing (the regenerating request itself) or another of the replies
stored right after it. A client that trims its window from the front drops the question with
the reply; one that keeps its first turn and its latest ones goes on, after the question, with
a turn stored later: those replies stay recallable.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from memory.ingest.branches import edited_away
from memory.ingest.identity import content_hash
from memory.records import Hit
from memory.store.backend import StoreBackend as Store


def replaced_replies(
    store: Store,
    user_id: str,
    session_id: str,
    messages: Sequence[Mapping[str, Any]],
    hits: Sequence[Hit],
) -> set[int]:
    """Ids of the messages among `hits` that are replies of this session the client replaced,
    and of the session's messages the request's last one edits (memory/ingest/branches.py:
    stored as left behind once its turn is, but not yet)."""
    if not any(h.chunk.session_id == session_id for h in hits):
        return set()
    edited = set(edited_away(store, user_id, session_id, messages))
    replies = {
        h.chunk.message_id
        for h in hits
        if h.chunk.session_id == session_id and h.chunk.role == "assistant"
    }
    if not replies:
        return edited
    said = [content_hash(m) for m in messages if m.get("role") not in ("system", "developer")]
    replaced = edited
    for reply_id in replies:
        before, answers = store.answers_of(user_id, session_id, reply_id)
        if before and before[0][0] == "user" and _answered_again(said, before, answers):
            replaced.add(reply_id)
    return replaced


def _answered_again(said: list[str], before: list[tuple[str, str]], answers: list[str]) -> bool:
    """Whether the request asks the stored question again, or goes on with another of the
    `answers` stored to it (those it does not carry are then replaced)."""
    question = before[0][1]
    preceding = before[1][1] if len(before) > 1 else None
    for at in range(len(said) - 1, -1, -1):
        if said[at] != question:
            continue
        if at > 0 and preceding is not None and said[at - 1] != preceding:
            continue  # the same words said at another place of the conversation
        after = said[at + 1] if at + 1 < len(said) else None
        return after is None or after in answers
    return False
