"""The facts part of the memory API (CONTRACT.md "Memory API"): one user's semantic memory.

    GET    /v1/memory/facts                 active facts (`?status=superseded|stale|archived|all`)
    POST   /v1/memory/facts                 upsert by key: {"key", "value", "category",
                                            optional "policy", "pinned", "ttl_seconds"}
    DELETE /v1/memory/facts/{key}           archive (forget); a fact id works as well
    GET    /v1/memory/facts/{key}/history   every value the key ever had, oldest first
    POST   /v1/memory/facts/{key}/pin       pinned facts never expire and come first
    POST   /v1/memory/facts/{key}/unpin

Same authentication as chat, and the user comes from the same headers (`admin.user_of`).
Bad input is a `BadRequest` (400) naming the field, an unknown key a `NotFound` (404); the
app's one handler renders both in OpenAI's error shape. The memory layer's calls are
synchronous and run in a worker thread.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from memory import Fact, TooManyFacts
from proxy import admin, request_json
from proxy.errors import BadRequest, NotFound
from proxy.limits import read_body
from proxy.state import state_of

if TYPE_CHECKING:
    from memory import MemoryLayer

_STATUSES = ("active", "superseded", "stale", "archived", "all")
_FIELD = re.compile(r"^'(\w+)'")


def routes() -> list[Route]:
    return [
        Route("/v1/memory/facts", list_facts, methods=["GET"]),
        Route("/v1/memory/facts", set_fact, methods=["POST"]),
        Route("/v1/memory/facts/{key}", forget_fact, methods=["DELETE"]),
        Route("/v1/memory/facts/{key}/history", history, methods=["GET"]),
        Route("/v1/memory/facts/{key}/pin", pin, methods=["POST"]),
        Route("/v1/memory/facts/{key}/unpin", unpin, methods=["POST"]),
    ]


def fact_json(fact: Fact) -> dict[str, Any]:
    """A fact as the API shows it."""
    return {
        "id": fact.id,
        "key": fact.key,
        "value": fact.value,
        "category": fact.category,
        "policy": fact.policy,
        "pinned": fact.pinned,
        "status": fact.status,
        "confidence": fact.confidence,
        "source": fact.source,
        "created_at": fact.created_at,
        "updated_at": fact.updated_at,
        "expires_at": fact.expires_at,
    }


def _layer(request: Request) -> MemoryLayer:
    layer = state_of(request).layer
    return layer


async def _call(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run a layer call in a thread; its ValueError (a bad field) becomes a 400."""
    try:
        return await anyio.to_thread.run_sync(functools.partial(func, *args, **kwargs))
    except ValueError as exc:
        field = _FIELD.match(str(exc))
        code = "too_many_facts" if isinstance(exc, TooManyFacts) else None
        raise BadRequest(str(exc), param=field.group(1) if field else None, code=code) from None


def _found(fact: Fact | None, key: str) -> Fact:
    if fact is None:
        raise NotFound(f"no current fact '{key}' for this user", param="key", code="fact_not_found")
    return fact


async def list_facts(request: Request) -> Response:
    user_id = admin.user_of(request)
    status = request.query_params.get("status", "active")
    if status not in _STATUSES:
        raise BadRequest(f"'status' must be one of {', '.join(_STATUSES)}", param="status")
    facts = await _call(_layer(request).list_facts, user_id, None if status == "all" else status)
    return JSONResponse({"facts": [fact_json(f) for f in facts]})


async def set_fact(request: Request) -> Response:
    user_id = admin.user_of(request)
    config = state_of(request).config
    raw = await read_body(request, config.max_body_bytes, config.body_timeout)
    try:
        body = request_json.loads(raw)
    except ValueError as exc:
        raise BadRequest(f"the body is not valid JSON: {exc}", code="invalid_json") from None
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object", code="invalid_json")
    for field in ("key", "value"):
        if not isinstance(body.get(field), str):
            raise BadRequest(f"'{field}' is required and must be a string", param=field)
    for field in ("category", "policy"):
        if field in body and not isinstance(body[field], str):
            raise BadRequest(f"'{field}' must be a string", param=field)
    fact = await _call(
        _layer(request).set_fact,
        user_id,
        body["key"],
        body["value"],
        category=body.get("category"),
        policy=body.get("policy"),
        pinned=body.get("pinned"),
        ttl_seconds=body.get("ttl_seconds"),
        source="api",
    )
    return JSONResponse(fact_json(fact))


async def forget_fact(request: Request) -> Response:
    user_id = admin.user_of(request)
    key = request.path_params["key"]
    fact = _found(await _call(_layer(request).forget_fact, user_id, key), key)
    return JSONResponse({**fact_json(fact), "deleted": True})


async def history(request: Request) -> Response:
    user_id = admin.user_of(request)
    key = request.path_params["key"]
    facts: list[Fact] = await _call(_layer(request).fact_history, user_id, key)
    if not facts:
        raise NotFound(f"no fact '{key}' for this user", param="key", code="fact_not_found")
    return JSONResponse({"key": facts[0].key, "facts": [fact_json(f) for f in facts]})


async def pin(request: Request) -> Response:
    return await _pin(request, True)


async def unpin(request: Request) -> Response:
    return await _pin(request, False)


async def _pin(request: Request, pinned: bool) -> Response:
    user_id = admin.user_of(request)
    key = request.path_params["key"]
    fact = _found(await _call(_layer(request).pin_fact, user_id, key, pinned), key)
    return JSONResponse(fact_json(fact))
