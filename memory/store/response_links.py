"""Which session a Responses API reply belongs to, so the conversation it starts stays one.

A Responses API client may send only its new input and name the reply it continues
(`previous_response_id`): the provider keeps the history, and the request alone no longer says
which conversation it is in. When a turn with a reply id is stored, that id is linked to the
turn's session, with the tokens the provider's context then holds (its `usage.total_tokens`),
so a request continuing it is stored in the same session and measured against the context the
model really sees. One row per user and reply id in `response_links` (migration
`m009_response_links`); `Store.delete_user` deletes them with the rest of the user.

Like all SQL it lives in `memory/store/`, beside `store.py` (kept under STYLE.md's 400
lines); it uses the store's connections.
"""

from __future__ import annotations

from dataclasses import dataclass

from memory.store.backend import StoreBackend as Store


@dataclass(frozen=True, slots=True)
class ResponseLink:
    """The session a reply belongs to, and the tokens of the provider's context after it."""

    session_id: str
    tokens: int


def link_response(
    store: Store, user_id: str, response_id: str, link: ResponseLink, now: float
) -> None:
    """Link the user's reply `response_id` to its session. An id linked before names this
    reply from now on: a provider that gives its ids out again (a stand-in answering
    `resp_1` each time, a local server whose count restarts) continues its newest."""
    with store.write() as db:
        db.execute(
            "INSERT INTO response_links (user_id, response_id, session_id, tokens, created_at) "
            "VALUES (?, ?, ?, ?, ?) ON CONFLICT (user_id, response_id) DO UPDATE SET "
            "session_id = excluded.session_id, tokens = excluded.tokens, "
            "created_at = excluded.created_at",
            (user_id, response_id, link.session_id, link.tokens, now),
        )


def linked_turn(
    store: Store, user_id: str, response_id: str, session_id: str, created_at: float
) -> bool:
    """Whether the turn that linked `response_id` is the one of `session_id` at `created_at`:
    stored already (a journal replayed after a crash), not another turn with the id again."""
    rows = store.read(
        "SELECT 1 FROM response_links WHERE user_id = ? AND response_id = ? "
        "AND session_id = ? AND created_at = ?",
        (user_id, response_id, session_id, created_at),
    )
    return bool(rows)


def linked_response(store: Store, user_id: str, response_id: str) -> ResponseLink | None:
    """The link of the user's reply `response_id`, or None when moim never stored it."""
    rows = store.read(
        "SELECT session_id, tokens FROM response_links WHERE user_id = ? AND response_id = ?",
        (user_id, response_id),
    )
    return ResponseLink(str(rows[0][0]), int(rows[0][1])) if rows else None
