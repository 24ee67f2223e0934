"""Branches a conversation left: a message the user edited, a reply regenerated or continued.

Chat UIs let a user edit a message they sent, or regenerate (or continue) an answer; the
requests that follow carry the new version and not the old. moim stores what it is sent, so
both versions would be recalled, in this conversation and in others, though the user took
the old one back ("my flight is on Tuesday", edited to Wednesday). A branch is told apart
from turns a client's window dropped by where the request picks up: it carries the session's
messages up to a point, then new ones, while the session holds messages after that point
that the request does not carry. Those are left behind (memory/store/left_messages.py) when
they are one exchange and:

- the request goes on with a reply (regenerated, retried, continued) where the session holds
  only replies; or, after a reply the session holds, goes on with the user's next message
  where the session holds only other replies (answers regenerated, and the user went back to
  an earlier one: the others go); or
- it goes on with a user message that reads as an edit of the one the session holds (most of
  its characters or words the same), followed there only by replies, and not sent with the
  reply both follow in the session's first request (a few-shot prompt's worked example).

One exchange, an edit that reads as one, and a record made before the request arrived: two
conversations that open alike share a derived session, and agents fan one history out to
several requests at once; a longer or unrelated record after the point is more likely theirs.
When the client names the session (`X-Memory-Session-Id`, a chat UI's chat id), the record is
that conversation's own: all that followed the point is left (an older message edited, an
older reply regenerated); but the first reply regenerated is left only when nothing followed
it (a client that sends one id for several conversations starts each alike). A first
message edited leaves nothing: the request then carries nothing of the record, as a client
that sends only its newest question does. A message edited that came in the first request
moim saw of the session, after a reply (moim added mid-chat), reads at first as a few-shot
pipeline's next input and is left only once the chat goes on from the edit.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from difflib import SequenceMatcher
from typing import Any

from memory.block.tokens import message_text
from memory.ingest.identity import content_hash
from memory.store.backend import StoreBackend as Store
from memory.store.left_messages import (
    StoredMessage,
    latest_messages,
    opened_at,
    session_messages,
)

# How much of two user messages an edit is compared on (difflib is quadratic in the worst
# case), and how alike they must be: difflib's ratio of their characters, or their share of
# words (Jaccard).
_EDIT_CHARS = 600
_EDIT_RATIO = 0.6
_EDIT_WORDS = 0.5
_WORD = re.compile(r"\w+")


def left_behind(
    store: Store,
    user_id: str,
    session_id: str,
    conversation: Sequence[Mapping[str, Any]],
    keys: Sequence[str],
    stored: Sequence[str],
    arrived_at: float | None = None,
    said_at: float | None = None,
    named: bool = False,
) -> list[StoredMessage]:
    """The session's messages `conversation` left behind (none, mostly).

    `keys` are the conversation's message keys lined up with the session's (`resent_keys`),
    `stored` the keys the session held before it, in the order stored. `arrived_at`: when
    the request arrived; messages stored after it are not left (a request sent alongside).
    `said_at`: the time its turn is stored at (`X-Memory-Timestamp`'s, when a replay gives
    one: then not when it arrived); messages stored at it or later are not left either.
    `named`: the client named the session, so the record after the point is this
    conversation's own, however long (an older message edited, an older reply regenerated).
    """
    said = [at for at, m in enumerate(conversation) if m.get("role") not in ("system", "developer")]
    held = set(stored)
    # Where the request leaves the record: its last new message said right after one of the
    # record's (a new reply that says what a stored one said is lined up with it: "Noted.").
    new = next(
        (
            at
            for at in range(len(said) - 1, 0, -1)
            if keys[said[at]] not in held and keys[said[at - 1]] in held
        ),
        None,
    )
    if new is None:
        return []  # nothing of the session's record carried, or nothing new said
    carried = set(keys)
    place = stored.index(keys[said[new - 1]])  # a key is the session's once
    after = [key for key in stored[place + 1 :] if key not in carried]
    if not after:  # the request goes on from the end of the record: the common case
        return _edited_in_first_request(
            store, user_id, session_id, conversation, said, keys, stored, arrived_at, said_at
        )
    if len(after) > (_NAMED_AFTER_READ if named else _AFTER_READ):
        return []  # no one exchange (another run's record, in a session opened alike)
    found = session_messages(store, user_id, session_id, [stored[0], stored[place], *after])
    by_key = {m.key: m for m in found}
    opening, point = by_key.get(stored[0]), by_key.get(stored[place])
    if opening is None or point is None:
        return []  # the session went meanwhile (forgotten)
    rows = _said(by_key, after)
    if _stored_alongside(rows, arrived_at, said_at):
        return []
    prompt = bool(rows) and rows[0].created_at == point.created_at == opening.created_at
    # All that followed is the named conversation's own, but for another first reply: a
    # client that sends one session id for several conversations (an agent's, a user's id)
    # starts each alike, and a new one's reply differs (an edit must also read as one).
    first_reply = conversation[said[new]].get("role") == "assistant"
    whole = named and not (first_reply and point.created_at == opening.created_at)
    anchor = conversation[said[new - 1]]
    return rows if _left(conversation[said[new]], rows, prompt, whole, _is_reply(anchor)) else []


def _edited_in_first_request(
    store: Store,
    user_id: str,
    session_id: str,
    conversation: Sequence[Mapping[str, Any]],
    said: Sequence[int],
    keys: Sequence[str],
    stored: Sequence[str],
    arrived_at: float | None,
    said_at: float | None,
) -> list[StoredMessage]:
    """The exchange a chat's user edited when it came in the first request moim saw of the
    session (moim added mid-chat, a client that opens with a history), once the chat goes on.

    At the edit's own request such an exchange reads as a few-shot pipeline's input (its
    worked example came in the same first request) and is kept. A pipeline never sends an
    input back with its answer and a next message; a chat does: the request carries the
    record's start, skips one exchange of the first request, and carries the edited message,
    its reply and what the user said next (the edit stored after the first request: one
    said in it too is a window's cut). Read only in the record's first messages."""
    at_of = {key: at for at, key in enumerate(stored[:_FIRST_READ])}
    places = [at_of.get(keys[k]) for k in said[:_FIRST_READ]]
    for j in range(1, len(places) - 2):
        point, edit_at = places[j - 1], places[j]
        if point is None or edit_at is None:
            return []  # a message of the request not in the record's first part
        if edit_at == point + 1:
            continue
        edit, reply, then = (conversation[said[k]] for k in (j, j + 1, j + 2))
        if (
            edit_at < point
            or edit.get("role") != "user"
            or not _is_reply(reply)
            or places[j + 1] not in (None, edit_at + 1)  # its reply, stored or not yet
            or then.get("role") != "user"
        ):
            return []
        gap = list(stored[point + 1 : edit_at])
        ends = [stored[0], stored[point], stored[edit_at]]
        found = session_messages(store, user_id, session_id, [*ends, *gap])
        by_key = {m.key: m for m in found}
        rows = _said(by_key, gap)
        if not rows:
            continue  # a system prompt changed there: no exchange skipped
        opening, anchor, edited = (by_key.get(key) for key in ends)
        if opening is None or anchor is None or edited is None or rows[0].role != "user":
            return []
        if any(m.role != "assistant" for m in rows[1:]):
            return []  # more than one exchange skipped: a window's cut, not an edit
        if not rows[0].created_at == anchor.created_at == opening.created_at:
            return []  # not of the first request: the rule above saw it when it was edited
        if edited.created_at == opening.created_at:
            return []  # said in the first request too: a window's cut of it, not an edit
        if _stored_alongside(rows, arrived_at, said_at):
            return []
        return rows if reads_as_an_edit(rows[0].content, message_text(edit)) else []
    return []


def edited_away(
    store: Store, user_id: str, session_id: str, messages: Sequence[Mapping[str, Any]]
) -> list[int]:
    """Ids of the session's latest exchange the request's last message edits, before its turn
    is stored (recall hides them from the request that edits them). Read from the session's
    last few messages: cheaper than lining the whole history up, as the writer does."""
    said = [m for m in messages if m.get("role") in ("user", "assistant")]
    if len(said) < 2 or said[-1].get("role") != "user":
        return []
    latest = latest_messages(store, user_id, session_id, _LATEST)
    anchor = content_hash(said[-2])
    at = next((i for i in range(len(latest) - 1, -1, -1) if _hash_of(latest[i]) == anchor), None)
    if at is None:
        return []
    tail = latest[at + 1 :]
    if any(_hash_of(m) == content_hash(said[-1]) for m in tail):
        return []  # the request's last message is stored: it edits nothing
    point = latest[at]
    prompt = (
        bool(tail)
        and tail[0].created_at == point.created_at
        and point.created_at == opened_at(store, user_id, session_id)
    )
    return [m.id for m in tail] if _left(said[-1], tail, prompt, False, _is_reply(said[-2])) else []


# How many messages after the point `left_behind` reads at most: one exchange, and the
# messages earlier edits and regenerations left there. A longer record is not read (an agent's
# new run in a session opened alike, before every earlier run's messages: ~65,000 of them once
# passed Postgres's 65,535 parameters and failed the turn).
_AFTER_READ = 64
# In a session the client named, all that followed the point is its own: read up to this many
# (well under Postgres's 65,535 parameters; an edit further back leaves nothing).
_NAMED_AFTER_READ = 8192

# How many of the record's first messages `_edited_in_first_request` looks at: a first
# request that opened with a longer history is not read for such an edit.
_FIRST_READ = 64

# How many of the session's latest messages `edited_away` reads: one exchange after the
# message the request picks up from, with room for a few replies.
_LATEST = 8


def _said(by_key: Mapping[str, StoredMessage], keys: Sequence[str]) -> list[StoredMessage]:
    """The user and assistant messages of `keys` read (`by_key`), not left already, in order."""
    rows = [by_key[key] for key in keys if key in by_key and not by_key[key].left]
    return [m for m in rows if m.role not in ("system", "developer")]


def _stored_alongside(
    rows: Sequence[StoredMessage], arrived_at: float | None, said_at: float | None
) -> bool:
    """Whether one of `rows` was stored after the request arrived (a request sent beside it),
    or at the turn's own time or later (a replay's siblings, stored at the time the client
    gave them): no branch the request left."""
    if arrived_at is not None and any(m.created_at > arrived_at for m in rows):
        return True
    return said_at is not None and any(m.created_at >= said_at for m in rows)


def _hash_of(message: StoredMessage) -> str:
    return message.key.partition("#")[0]


def _is_reply(message: Mapping[str, Any]) -> bool:
    return message.get("role") == "assistant"


def _left(
    first: Mapping[str, Any],
    tail: Sequence[StoredMessage],
    prompt: bool,
    named: bool = False,
    after_reply: bool = False,
) -> bool:
    """Whether the record `tail` is what `first`, the first new message of the request,
    takes the place of: one exchange, or with `named` all that followed it. `after_reply`:
    the request picks up after a reply, so replies the record holds right after that one
    are the others the question got (regenerated), and the user kept this one.

    `prompt`: the user message `tail` opens with came in the session's first request, with
    the reply both follow: that reply is the client's own prompt (a few-shot example before
    each input of a pipeline, one template apart), so the inputs are requests of their own,
    not edits. A chat's edited message was said a turn after the reply it follows."""
    if not tail or (not named and any(m.role != "assistant" for m in tail[1:])):
        return False
    if first.get("role") == "assistant" or (after_reply and first.get("role") == "user"):
        if tail[0].role == "assistant":
            return True
    return (
        first.get("role") == "user"
        and tail[0].role == "user"
        and not prompt
        and reads_as_an_edit(tail[0].content, message_text(first))
    )


def reads_as_an_edit(old: str, new: str) -> bool:
    """Whether `new` reads as `old` edited: most of its characters, or of its words, kept."""
    a, b = old[:_EDIT_CHARS].casefold(), new[:_EDIT_CHARS].casefold()
    words_a, words_b = set(_WORD.findall(a)), set(_WORD.findall(b))
    if words_a and words_b and len(words_a & words_b) / len(words_a | words_b) >= _EDIT_WORDS:
        return True
    return SequenceMatcher(None, a, b, autojunk=False).ratio() >= _EDIT_RATIO
