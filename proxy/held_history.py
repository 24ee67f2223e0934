"""Whose provider-held history a Responses API request may continue, with proxy keys.

With proxy keys every user's replies live on the operator's one provider key, and the provider
continues whatever reply (`previous_response_id`) or conversation (`conversation`) a request
names, with its whole history: a user naming another user's reply id would have the model read
that user's conversation back to them. Reading that state directly (`GET /v1/responses/{id}`,
`/v1/conversations`) already needs a key that sees the provider account's shared state
(`proxy.auth.sees_account_state`); continuing it needs the same, or, for a reply, that moim
relayed it for this very user (`owns_reply`): noted in RAM when it finished, in every memory
mode (`proxy/recent_responses.py`), or linked to the user's session when its turn was stored.
Such a reply is also the user's to poll and cancel (`proxy/passthrough.py`).
A provider conversation is made through `/v1/conversations`, which such a key cannot reach, so
it is refused outright.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from proxy.errors import Forbidden, NotFound, ServiceUnavailable
from proxy.exchange import Conversation

if TYPE_CHECKING:
    from proxy.state import AppState

# How long a reply not yet stored is waited for when replicas share the store, and how often
# the store is asked meanwhile (seconds).
_REPLICA_WAIT = 5.0
_POLL = 0.25


async def check_held_history(state: AppState, user_id: str, conversation: Conversation) -> None:
    """Refuse a request continuing provider-held history that is not `user_id`'s to continue;
    for callers that do not see the provider account's shared state."""
    if conversation.thread is not None:
        raise Forbidden(
            "a provider conversation is the provider account's shared state: with proxy keys, "
            "naming one needs an admin key, or set auth.account_endpoints_for_all_keys: true",
            param="conversation",
            code="account_endpoint_needs_admin",
        )
    reply = conversation.continues
    if reply is None or await owns_reply(state, user_id, reply):
        return
    raise NotFound(  # OpenAI's answer to a reply it does not have
        f"Previous response with id {reply!r} not found.",
        param="previous_response_id",
        code="previous_response_not_found",
    )


async def owns_reply(state: AppState, user_id: str, reply: str) -> bool:
    """Whether moim relayed the Responses reply `reply` for `user_id`: noted in RAM (finished,
    or still written in the background), or linked to one of their sessions in the store."""
    if state.responses.get(user_id, reply) is not None:
        return True
    awaited = state.background.get(reply)
    if awaited is not None and awaited.user_id == user_id:
        return True
    # Replicas: the reply may have ended on another one a moment ago, its turn not yet stored
    # by that one's writer (seconds); asked again meanwhile.
    waits = int(_REPLICA_WAIT / _POLL) if state.layer.shared else 0
    for wait in range(waits + 1):
        if wait:
            await asyncio.sleep(_POLL)
        try:
            link = await asyncio.to_thread(state.layer.response_link, user_id, reply)
        except Exception as exc:  # not known to be theirs: not forwarded
            raise ServiceUnavailable(
                "the memory store is busy or unavailable, and it says whose reply "
                f"{reply!r} is; retry shortly",
                code="memory_unavailable",
            ) from exc
        if link is not None:  # noted, so recall finds it in RAM and need not read it again
            state.responses.note(user_id, reply, link)
            return True
    return False
