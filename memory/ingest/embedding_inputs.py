"""What a stored turn is embedded as, and the question text whose vector the writer reuses.

Indexing (`memory/ingest/turns.py`), the re-embedding after a model change
(`memory/ingest/reembed.py`) and recall (`question_text`, memory/layer.py) build the model's
input here, so a chunk gets one vector whichever of them embeds it, and a user's message that
says enough alone is embedded once: as the question of the request that carried it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from memory.block.tokens import message_text
from memory.ingest.speakers import split_speaker
from memory.records import Message
from memory.settings import Settings
from memory.store.backend import StoreBackend as Store
from memory.store.fts import turn_tail

# A user message of fewer words leans on the turn before it ("yes, do that", "and in May?"):
# its vector carries that turn's tail, as a reply's always does (`embedding_text`). One of
# this many words or more is embedded alone, as the question recall embeds, and the writer
# reuses recall's vector. LoCoMo (bench/tune_recall.py, all ten, re-indexed; hit / all, the
# original labels): context for every message 0.861 / 0.724; alone from 6 words 0.853 /
# 0.721, from 12 0.855 / 0.723, from 20 0.859 / 0.729 (60 % of its user turns alone).
SHORT_USER_WORDS = 20


def embedding_inputs(
    store: Store,
    settings: Settings,
    message: Message,
    texts: Sequence[str],
    start: int,
    contexts: Mapping[int, tuple[str, str]] | None = None,
) -> tuple[list[str], str]:
    """What is embedded for `message`'s chunks `texts` (from position `start`), and the
    previous turn's tail that its first chunk's lexical row holds ("" for a later slice).

    Indexing and the re-embedding after a model change (memory/ingest/reembed.py) both
    call it, so a re-embedded chunk gets the vector a fresh index would give it. `contexts`
    holds the contexts of a pass's messages read at once (`contexts_of`); a message not in it
    has its own read.
    """
    context = ("", "")
    if start == 0 and texts:
        known = contexts.get(message.id) if contexts is not None else None
        context = known if known is not None else _context(store, message, settings)
    inputs = [
        embedding_text(message.role, message.name, text, context if start == 0 and i == 0 else None)
        for i, text in enumerate(texts)
    ]
    return inputs, context[1]


def _context(store: Store, message: Message, settings: Settings) -> tuple[str, str]:
    """The speaker and the tail of the turn before `message` in its session (or "", "").

    A reply such as "Yes, last May!" says nothing of its topic; embedded after the end of
    the turn it answers, its vector carries the topic ("did you go camping?"). LoCoMo
    (bench/tune_recall.py, 200 characters): dense-only hit +2.2 points, fused +1.1 on the
    tuning conversations and +1.8 on the held-out ones. The lexical index holds the same tail
    in a column of its own (`Store.lexical_search`). Only the first chunk of a message gets
    it; a later chunk follows its own message's text.
    """
    if settings.embedding_context_chars <= 0:
        return "", ""
    around = store.neighbours(message.user_id, [message.id], 1).get(message.id, [])
    return _tail_before(message, around, settings.embedding_context_chars)


def contexts_of(
    store: Store, messages: Sequence[Message], settings: Settings
) -> dict[int, tuple[str, str]]:
    """`_context` of each of a pass's messages, with one read of the turns around them per
    user rather than two reads a message (their sessions are known: each message carries
    its own). The writer's indexing read them a message at a time: ~0.3 ms of CPU each, a
    sixth of its own work outside the model (docs/performance.md, "Load, seventh pass")."""
    limit = settings.embedding_context_chars
    if limit <= 0:
        return {message.id: ("", "") for message in messages}
    by_user: dict[str, list[Message]] = {}
    for message in messages:
        by_user.setdefault(message.user_id, []).append(message)
    found: dict[int, tuple[str, str]] = {}
    for user_id, mine in by_user.items():
        sessions = {message.id: message.session_id for message in mine}
        around = store.neighbours(user_id, list(sessions), 1, sessions=sessions)
        for message in mine:
            found[message.id] = _tail_before(message, around.get(message.id, []), limit)
    return found


def _tail_before(message: Message, around: Sequence[Message], limit: int) -> tuple[str, str]:
    """The speaker and tail of the turn just before `message` among `around` (its session's
    turns near it, oldest first), or "", ""."""
    previous = next((m for m in reversed(around) if m.id < message.id), None)
    if previous is None:
        return "", ""
    name, content = split_speaker(previous.name, previous.content)
    text = turn_tail(content, limit)
    return (name or previous.role, text) if text else ("", "")


def embedding_text(role: str, name: str | None, text: str, context: tuple[str, str] | None) -> str:
    """What the model embeds for a chunk: `name: text`, after the previous turn's tail as
    `speaker: tail` on a line first (`context`, given for a message's first chunk) unless it
    is a user's message of `SHORT_USER_WORDS` words or more.

    The speaker's name helps "what did Ana say about …" find Ana's turns. A user's message
    that says enough alone is embedded alone, as the request that carried it asked it:
    recall embeds `question_text` of that request, the same string, and the writer reuses
    that vector instead of embedding the message again (half the writer's embedding).
    """
    own = f"{name}: {text}" if name else text
    if context is None or not context[1] or says_enough(role, text):
        return own
    return f"{context[0]}: {context[1]}\n{own}"


def says_enough(role: str, text: str) -> bool:
    """True for a user's message embedded without the turn before it (`SHORT_USER_WORDS`)."""
    return role == "user" and len(text.split()) >= SHORT_USER_WORDS


def question_text(messages: Sequence[Mapping[str, Any]], settings: Settings) -> str | None:
    """The request's last user message as the writer will embed it, when the writer embeds
    it alone (`embedding_text`): recall embeds this for its dense search, so the vector
    serves both. None otherwise (no user message, a short one, one longer than a chunk,
    whose first chunk is only a prefix of it): recall then embeds its query as before.
    """
    users = [m for m in messages if m.get("role") == "user"]
    if not users:
        return None
    name, content = split_speaker(_name(users[-1]), message_text(users[-1]))
    content = content.strip()
    if not says_enough("user", content) or len(content) > settings.chunk_size:
        return None
    return embedding_text("user", name, content, None)


def _name(message: Mapping[str, Any]) -> str | None:
    """The message's `name` when it is a string (as stored)."""
    name = message.get("name")
    return name if isinstance(name, str) else None
