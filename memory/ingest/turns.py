"""Step 7, remember: store a turn's new messages verbatim, then chunk, embed and index them.

Storing and indexing are two stages. `store_turn` is one short transaction that makes the
turn durable; `index_pending` chunks and embeds whatever is not indexed yet, for any user,
so work interrupted by a crash resumes from the message log on the next start.

Idempotency: clients resend the whole history every turn, so a message is identified by a
content hash within its session (`memory.ingest.identity`) and stored once.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

import numpy as np

from memory.block.render import strip_block
from memory.block.tokens import call_arguments, count_tokens, message_text
from memory.embedding import Embedder, Words, gives_words
from memory.ingest.branches import left_behind
from memory.ingest.chunking import chunk_text
from memory.ingest.embedding_inputs import contexts_of, embedding_inputs
from memory.ingest.identity import continued_keys, resent_keys
from memory.ingest.speakers import is_an_example, split_speaker
from memory.ingest.wrapped import own_words
from memory.recall.vectors import VectorIndex
from memory.recall.vocabulary import vocabulary_terms
from memory.records import Message, Term
from memory.settings import Settings
from memory.store.backend import ChunkSlice
from memory.store.backend import StoreBackend as Store
from memory.store.left_messages import left_keys, take_back
from memory.store.store import NewMessage

logger = logging.getLogger(__name__)

# Roles whose text is recalled as excerpts. System prompts and tool results are stored
# (the log is complete) but not recalled: CONTRACT "System prompts are not recalled".
RECALLED_ROLES = frozenset({"user", "assistant"})
# A function that may hold the vector of a user's text already embedded (as a question):
# (user_id, text) → the vector, or None. The writer embeds only what it does not hold.
Known = Callable[[str, str], np.ndarray | None]
# And the words of such a text with their vectors (`memory.embedding.WordEmbedder`), when held.
KnownWords = Callable[[str, str], Words | None]


@dataclass(frozen=True, slots=True)
class Turn:
    """One request and its reply, as the proxy hands it over after the response."""

    user_id: str
    session_id: str
    model: str
    messages: tuple[Mapping[str, Any], ...]
    reply: Mapping[str, Any] | None
    created_at: float
    partial: bool = False
    extra: dict[str, Any] = field(default_factory=dict)
    # Responses API: the provider's id for the reply and the tokens its context holds after it
    # (memory/store/response_links.py). `continues`: the request named the reply it continues
    # (`previous_response_id`), so it carries only new messages: each is stored even when the
    # session already has one like it (system and developer messages, resent with every
    # request, still once).
    response_id: str | None = None
    context_tokens: int = 0
    continues: bool = False
    # When the request arrived: a turn of a user forgotten since (through another replica) is
    # not stored (`Store.forgotten_since`). None: not known (stored).
    arrived_at: float | None = None
    # `messages` as JSON text on one line, when the proxy has it (the client's own text of
    # them): the journal's line copies it rather than writing them again (~4 ms for an
    # agent's 487 kB history, on the event loop as the reply ends). Not compared: the same
    # turn either way.
    messages_json: str | None = field(default=None, compare=False, repr=False)
    # The request forced a function (`tool_choice` naming one, structured output through a
    # tool): the reply's call arguments are its answer, stored as its text to be recalled.
    answer_in_call: bool = False
    # The client named the session (`X-Memory-Session-Id`, a chat UI's chat id), rather than
    # moim deriving it from the conversation's opening: a history that goes another way after
    # a point is then that conversation's own branch (memory/ingest/branches.py).
    named_session: bool = False


class Stored(NamedTuple):
    """What storing a turn changed in its session's record (fact capture reads both)."""

    new: list[Message]  # the messages this call stored
    taken_back: list[Message]  # messages left behind earlier that the turn carries again


def store_turn(store: Store, turn: Turn) -> int:
    """Store the turn's messages not yet in its session, and the reply; count new rows."""
    return len(store_new_messages(store, turn).new)


def store_new_messages(store: Store, turn: Turn, maybe_stored: bool = False) -> Stored:
    """Like `store_turn`, but return the messages this call stored and those it took back.

    `maybe_stored`: the turn may be one stored before (its reply id is linked to its session
    at its time: a journal replayed after a crash). It is when it adds nothing: then its
    branch is not followed, as that would undo an edit that came after it."""
    conversation = list(turn.messages)
    if turn.reply is not None:
        conversation.append(turn.reply)
    # Clients resend the whole history: only what the session lacks is encoded and counted.
    stored = store.stored_keys(turn.user_id, turn.session_id)
    keys = (continued_keys if turn.continues else resent_keys)(conversation, stored)
    held = set(stored)
    rows = []
    for index, (message, key) in enumerate(zip(conversation, keys, strict=True)):
        if key in held:
            continue
        is_reply = turn.reply is not None and index == len(conversation) - 1
        text = message_text(message)
        if is_reply and turn.answer_in_call and not text:
            text = call_arguments(message)
        payload = dict(message)
        if message.get("role") in ("system", "developer"):
            stripped = strip_block(text)
            if stripped is not text and not stripped.strip():
                continue  # a block of moim's own (a new system message) sent back: not stored
            text = stripped
            if isinstance(payload.get("content"), str):
                payload["content"] = text
        rows.append(
            NewMessage(
                message_key=key,
                content_hash=key.split("#")[0],
                role=str(message.get("role", "user")),
                name=_name(message.get("name")),
                content=text,
                payload=json.dumps(payload, ensure_ascii=False),
                model=turn.model,
                tokens=count_tokens(text, turn.model),
                partial=turn.partial and is_reply,
                created_at=turn.created_at,
            )
        )
    ids = store.insert_messages(turn.user_id, turn.session_id, rows)
    if maybe_stored and not any(ids):
        return Stored([], [])
    taken_back = []
    if stored and not turn.continues:
        taken_back = _follow_branch(store, turn, conversation, keys, stored, any(ids))
    new = [
        Message(
            new_id,
            turn.user_id,
            turn.session_id,
            row.role,
            row.name,
            row.content,
            row.created_at,
            row.partial,
        )
        for new_id, row in zip(ids, rows, strict=True)
        if new_id
    ]
    return Stored(new, taken_back)


def _follow_branch(
    store: Store,
    turn: Turn,
    conversation: list[Mapping[str, Any]],
    keys: list[str],
    stored: list[str],
    says_more: bool,
) -> list[Message]:
    """Index again the messages of the session's record a conversation had left and carries
    once more, and set aside those it leaves now (memory/ingest/branches.py).

    Only a request that says something new (`says_more`: the user went on from that branch)
    takes left messages back: a turn stored before, stored again (a journal replayed after a
    crash, a client's late retry), would undo the edit that followed it. Returns the messages
    taken back."""
    left = left_keys(store, turn.user_id, turn.session_id) if says_more else None
    back = []
    if left:
        back = take_back(store, turn.user_id, turn.session_id, sorted(left.intersection(keys)))
    leaving = left_behind(
        store,
        turn.user_id,
        turn.session_id,
        conversation,
        keys,
        stored,
        turn.arrived_at,
        turn.created_at,
        turn.named_session,
    )
    if leaving:
        store.leave_messages(turn.user_id, [m.id for m in leaving])
    named = {key: m.get("name") for m, key in zip(conversation, keys, strict=True)}
    return [
        Message(
            m.id,
            turn.user_id,
            turn.session_id,
            m.role,
            _name(named.get(m.key)),
            m.content,
            m.created_at,
        )
        for m in back
    ]


def _name(name: Any) -> str | None:
    """A message's `name` as stored: a string, else none."""
    return name if isinstance(name, str) else None


def index_pending(
    store: Store,
    embedder: Embedder,
    index: VectorIndex,
    settings: Settings,
    limit: int = 64,
    known: Known | None = None,
    known_words: KnownWords | None = None,
) -> int:
    """Chunk, embed and index the oldest `limit` unindexed messages (at most), within
    `settings.index_slice_chunks` chunks; return how many messages were worked on (indexed
    whole, or one slice further along).

    Fairness: a message with more chunks than fit in one pass is indexed a slice per pass,
    and a message already begun waits behind the ones not yet begun. So a large message
    from one user holds up another user's turn by one slice, not by all of its chunks (a
    1 MiB message is ~1,300 chunks, about 40 s of one core). The message is marked indexed
    with its last slice; after a crash, indexing resumes at the next slice.

    A pass's slices are stored together once all are embedded (at most the pass's chunk
    budget, ~0.4 s of one core at 32), in one transaction (`Store.add_slices`), and become
    searchable together, as the lexical index's one commit a pass already made them: one
    commit a pass rather than one a message (docs/performance.md, "Load, seventh pass").
    A failure before the store leaves the whole pass for the next one. While a pass leaves
    work behind (a backlog), the lexical side commits every few passes (`Store.commit_lexical`,
    "Load, eighth pass"); the pass that empties the backlog, or the call that finds nothing,
    commits what was held back.

    `known` gives vectors already computed for a text (a user message's, embedded as the
    question of the request that carried it: `question_text`); those are not embedded again.
    """
    pending = store.unindexed_messages(limit)
    if not pending:
        store.commit_lexical()  # passes a backlog held back (its last took exactly `limit`)
        return 0
    begun = store.chunk_counts([m.id for m in pending])
    pending.sort(key=lambda m: (m.id in begun, m.id))  # messages not yet begun first
    planned = _plan(pending, begun, settings)
    starting = [part.message for part in planned if part.first and part.texts]
    contexts = contexts_of(store, starting, settings)
    parts = [
        _embedded(store, embedder, settings, part, known, known_words, contexts) for part in planned
    ]
    for part, ids in zip(parts, store.add_slices(parts), strict=True):
        if ids and part.vectors is not None:
            index.add(part.message.user_id, ids, part.vectors)
    # One tantivy commit a pass, or every few passes while this pass leaves work behind.
    backlog = len(pending) >= limit or len(planned) < len(pending) or not planned[-1].last
    store.commit_lexical(backlog)
    return len(planned)


@dataclass(frozen=True, slots=True)
class _Slice:
    """The chunks of one message to index in this pass: from position `start`; `last` when
    they are its final ones."""

    message: Message
    start: int
    texts: list[str]
    last: bool

    @property
    def first(self) -> bool:
        return self.start == 0


def _plan(pending: list[Message], begun: Mapping[int, int], settings: Settings) -> list[_Slice]:
    """Each message's next slice, in order, until the pass's chunk budget is spent (the first
    message always gets at least one chunk). Roles that are not recalled, and example
    dialogue (`is_an_example`), have no chunks; a user message wrapped in retrieved documents
    is indexed as its query (`own_words`)."""
    budget = max(1, settings.index_slice_chunks)
    planned: list[_Slice] = []
    for stored in pending:
        if budget <= 0:
            break
        text = own_words(stored.content) if stored.role == "user" else stored.content
        name, content = split_speaker(stored.name, text)
        message = replace(stored, name=name)  # a speaker label indexes as the name
        texts: list[str] = []
        if message.role in RECALLED_ROLES and not is_an_example(stored.name):
            texts = chunk_text(content, settings.chunk_size, settings.chunk_overlap)
        start = begun.get(message.id, 0)
        part = texts[start : start + budget]
        budget -= len(part)
        planned.append(_Slice(message, start, part, start + len(part) >= len(texts)))
    return planned


def _embedded(
    store: Store,
    embedder: Embedder,
    settings: Settings,
    part: _Slice,
    known: Known | None,
    known_words: KnownWords | None = None,
    contexts: Mapping[int, tuple[str, str]] | None = None,
) -> ChunkSlice:
    """One message's slice embedded: its chunks, their vectors and words, ready to store."""
    message, texts = part.message, part.texts
    inputs, before = embedding_inputs(store, settings, message, texts, part.start, contexts)
    vectors, terms = (
        _embed(embedder, message.user_id, inputs, texts, known, known_words)
        if inputs
        else (None, [])
    )
    return ChunkSlice(message, texts, vectors, before, part.start, part.last, terms)


def _embed(
    embedder: Embedder,
    user_id: str,
    inputs: list[str],
    texts: list[str],
    known: Known | None,
    known_words: KnownWords | None = None,
) -> tuple[np.ndarray, list[list[Term]]]:
    """Rows for `inputs`: those `known` holds, the others embedded (in one call); and, when
    the embedder gives word vectors, each chunk's words for the user's vocabulary (those of
    its own text `texts[i]`, which ends its input). A held vector whose words are not held is
    embedded again for them."""
    if not gives_words(embedder):
        return _vectors(embedder, user_id, inputs, known), []
    held_words = [known_words(user_id, t) if known_words is not None else None for t in inputs]
    held = [known(user_id, t) if known is not None else None for t in inputs]
    todo = [
        text
        for text, vector, words in zip(inputs, held, held_words, strict=True)
        if vector is None or words is None
    ]
    rows, found = embedder.embed_documents_words(todo) if todo else (None, [])
    fresh = iter(zip(rows if rows is not None else (), found, strict=True))
    vectors, terms = [], []
    for text, given, vector, words in zip(inputs, texts, held, held_words, strict=True):
        if vector is None or words is None:
            vector, words = next(fresh)
        vectors.append(vector)
        terms.append(vocabulary_terms(words, len(text) - len(given)))
    return np.vstack(vectors), terms


def _vectors(embedder: Embedder, user_id: str, texts: list[str], known: Known | None) -> np.ndarray:
    """Rows for `texts`: those `known` holds, the others embedded (in one call)."""
    held = [known(user_id, text) if known is not None else None for text in texts]
    todo = [text for text, vector in zip(texts, held, strict=True) if vector is None]
    if len(todo) == len(texts):
        return embedder.embed_documents(texts)
    fresh = iter(embedder.embed_documents(todo) if todo else ())
    return np.vstack([next(fresh) if vector is None else vector for vector in held])
