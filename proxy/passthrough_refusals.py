"""What the pass-through refuses before relaying: moim's own paths, the account's shared state.

`/v1/memory...` is moim's memory API and never goes to the provider; with proxy keys, the
provider account's shared state (files, batches, stored responses, ...) needs an admin key.
Chat at a path moim gives no memory is `proxy/unserved_paths.py`'s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import unquote

from starlette.requests import Request
from starlette.routing import Match

from proxy.auth import Caller, sees_account_state
from proxy.errors import Forbidden, MethodNotAllowed, NotFound
from proxy.held_history import owns_reply
from proxy.identity import identify

if TYPE_CHECKING:
    from proxy.state import AppState

STATELESS_ENDPOINTS = frozenset(
    ("POST", path) for path in ("/embeddings", "/completions", "/moderations", "/responses")
)


def refuse_memory_paths(request: Request, suffix: str) -> None:
    """`/v1/memory...` is moim's API: a wrong method is a 405, an unknown path a 404."""
    if suffix != "/memory" and not suffix.startswith("/memory/"):
        return
    allowed: set[str] = set()
    for route in request.app.routes:
        match, _ = route.matches(request.scope)
        if match is Match.PARTIAL:
            allowed.update(getattr(route, "methods", None) or ())
    where = f"{request.method} {request.url.path}"
    if allowed:
        raise MethodNotAllowed(
            f"{where}: the memory API allows {', '.join(sorted(allowed))} here",
            code="method_not_allowed",
            headers={"allow": ", ".join(sorted(allowed))},
        )
    raise NotFound(f"{where}: no such memory API endpoint", code="unknown_url")


async def refuse_account_endpoints(
    request: Request, suffix: str, caller: Caller, state: AppState
) -> None:
    """With proxy keys, only an admin key reaches the provider account's shared state.

    Files, batches, fine-tuning jobs, vector stores, stored responses and the like belong to
    the provider account, not to one moim user: any key holder could list, read or delete
    another user's. Stateless endpoints stay open to every key (`STATELESS_ENDPOINTS`), and a
    Responses reply moim relayed for the request's user is theirs to poll, cancel or delete
    (`/responses/{id}` and below it): a `background: true` reply reaches its user no other way.
    """
    method, config = request.method, state.config
    if sees_account_state(caller, config):
        return
    path = unquote(suffix.split("?", 1)[0]).rstrip("/")
    if (method, path) in STATELESS_ENDPOINTS or (method == "GET" and path.startswith("/models")):
        return
    if method == "POST" and path.startswith(("/audio/", "/images/")):
        return
    reply = _reply_id(path)
    if reply is not None:
        who = identify(request.headers, {}, request.path_params.get("user_id"), caller.bound_user)
        caller.check_user(who.user_id)
        if await owns_reply(state, who.user_id, reply):
            return
    raise Forbidden(
        f"{method} /v1{path} reaches the provider account's shared state (files, batches, "
        "stored responses, …): with proxy keys it needs an admin key, or set "
        "auth.account_endpoints_for_all_keys: true",
        code="account_endpoint_needs_admin",
    )


def _reply_id(path: str) -> str | None:
    """The reply id of `/responses/{id}`, `/responses/{id}/cancel`, …; else None."""
    parts = path.split("/")
    if len(parts) in (3, 4) and parts[:2] == ["", "responses"] and parts[2]:
        return parts[2]
    return None
