"""The memory API: JSON endpoints over one user's memory (CONTRACT.md "Memory API").

Same authentication as chat, and the user comes from the same headers (or a bound key).
Every handler runs the memory layer's synchronous call in a worker thread.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from memory import Hit, TooManyFacts, item_problem
from proxy import request_json
from proxy.auth import authenticate
from proxy.errors import BadRequest, NotFound
from proxy.identity import identify
from proxy.limits import read_body
from proxy.state import state_of

if TYPE_CHECKING:
    pass


def routes() -> list[Route]:
    return [
        Route("/v1/memory/stats", stats, methods=["GET"]),
        Route("/v1/memory/flush", flush, methods=["POST"]),
        Route("/v1/memory/search", search, methods=["GET"]),
        Route("/v1/memory", forget, methods=["DELETE"]),
        Route("/v1/memory/sessions/{session_id:path}", forget_session, methods=["DELETE"]),
        Route("/v1/memory/export", export, methods=["GET"]),
        Route("/v1/memory/import", import_, methods=["POST"]),
    ]


def user_of(request: Request) -> str:
    """The user this memory request is about, after authentication."""
    state = state_of(request)
    caller = authenticate(request.headers, state.config)
    who = identify(request.headers, {}, request.path_params.get("user_id"), caller.bound_user)
    caller.check_user(who.user_id)
    return who.user_id


async def _run(func: Callable[..., Any], *args: Any) -> Any:
    return await anyio.to_thread.run_sync(func, *args)


async def stats(request: Request) -> Response:
    state = state_of(request)
    user_id = user_of(request)
    counts = await _run(state.layer.stats, user_id)
    return JSONResponse(
        {
            "user_id": user_id,
            "messages": counts.messages,
            "chunks": counts.chunks,
            "facts": counts.facts,
            "sessions": counts.sessions,
            "pending": state.writer.pending,
            # the user's messages no pass could index, set aside (memory/index_failures.py)
            "failed": await _run(state.layer.failed_messages, user_id),
        }
    )


async def flush(request: Request) -> Response:
    state = state_of(request)
    authenticate(request.headers, state.config)
    done = await state.writer.flush(timeout=120.0)
    body: dict[str, object] = {"flushed": done, "pending": state.writer.pending}
    failed = await _run(state.layer.failed_messages)  # every user's, as `pending`
    if failed:  # set aside, not indexed: said, though all else is (memory/index_failures.py)
        body["failed"] = failed
    if done:
        return JSONResponse(body)
    problem = state.writer.problem  # failing: 503 and why (not all is searchable); else late
    if problem is not None:
        body["writer"] = problem
    return JSONResponse(body, status_code=504 if problem is None else 503)


async def search(request: Request) -> Response:
    state = state_of(request)
    user_id = user_of(request)
    query = request.query_params.get("q", "")
    if not query.strip():
        raise BadRequest("query parameter 'q' is required", param="q")
    k = _positive_int(request.query_params.get("k", "10"), "k", maximum=100)
    # the user's turns that just ended are searched too (proxy/writer_recent.py)
    await state.writer.searchable(user_id, "", None, (), state.config.recall_wait)
    hits: list[Hit] = await _run(state.layer.search, user_id, query, k)
    return JSONResponse({"results": [_hit_json(h) for h in hits]})


def _hit_json(hit: Hit) -> dict[str, Any]:
    why = []
    if hit.dense_rank is not None:
        why.append(f"dense rank {hit.dense_rank}")
    if hit.lexical_rank is not None:
        why.append(f"lexical rank {hit.lexical_rank}")
    return {
        "id": hit.chunk.id,
        "text": hit.chunk.text,
        "score": round(hit.score, 6),
        "similarity": None if hit.similarity is None else round(hit.similarity, 4),
        # how it was ranked, as the inspector shows it: BM25 and the fused score before bonuses
        "lexical_score": hit.lexical_score,
        "fused_score": None if hit.fused_score is None else round(hit.fused_score, 6),
        "lexical_rank": hit.lexical_rank,
        "dense_rank": hit.dense_rank,
        "session_id": hit.chunk.session_id,
        "message_id": hit.chunk.message_id,
        "role": hit.chunk.role,
        "name": hit.chunk.name,
        "created_at": hit.chunk.created_at,
        "why": ", ".join(why),
    }


async def forget(request: Request) -> Response:
    state = state_of(request)
    user_id = user_of(request)
    await state.writer.flush(timeout=30.0)  # so no queued turn resurrects the user after
    # Their turns out of the journal first: a replay (after a spill) while the rows are
    # deleted would store them again. What else the process holds of them goes after.
    state.writer.forget(user_id)
    removed = await _run(state.layer.forget, user_id)
    state.writer.scrub_soon()  # their words leave the files when the writer is idle
    state.inspector.history.drop(user_id)
    state.responses.drop(user_id)
    state.background.drop(user_id)
    return JSONResponse({"user_id": user_id, "deleted": True, "messages": removed})


async def forget_session(request: Request) -> Response:
    """`DELETE /v1/memory/sessions/{id}`: forget one conversation of the user (`forget`'s
    steps, for its turns only); its facts stay unless `?facts=true`. 404: no such session."""
    state = state_of(request)
    user_id = user_of(request)
    session_id = request.path_params["session_id"]
    facts = _flag(request.query_params.get("facts", "false"), "facts")
    await state.writer.flush(timeout=30.0)  # so no queued turn of it comes back after
    state.writer.forget_session(user_id, session_id)
    done = await _run(state.layer.forget_session, user_id, session_id, facts)
    if done is None:
        raise NotFound(
            f"no session {session_id!r} in this user's memory",
            param="session_id",
            code="session_not_found",
        )
    state.writer.scrub_soon()
    state.inspector.history.drop(user_id)  # its blocks may quote the session: all of the user's
    state.responses.drop(user_id, session_id)
    state.background.drop(user_id, session_id)
    return JSONResponse(
        {
            "user_id": user_id,
            "session_id": session_id,
            "deleted": True,
            "messages": done.messages,
            "facts": done.facts,
        }
    )


def _flag(value: str, name: str) -> bool:
    """A query parameter's `true` or `false`; anything else is a 400 naming it."""
    if value.lower() not in ("true", "false"):
        raise BadRequest(f"'{name}' must be true or false", param=name)
    return value.lower() == "true"


async def export(request: Request) -> Response:
    state = state_of(request)
    user_id = user_of(request)
    items = await _run(lambda: list(state.layer.export(user_id)))

    async def lines() -> Any:
        for item in items:
            yield json.dumps(item, ensure_ascii=False) + "\n"

    return StreamingResponse(lines(), media_type="application/x-ndjson")


async def import_(request: Request) -> Response:
    state = state_of(request)
    user_id = user_of(request)
    raw = await read_body(request, state.config.max_body_bytes, state.config.body_timeout)
    items = []
    # Lines end at newlines only: str.splitlines() also splits at U+2028, U+2029 and U+0085,
    # which an export (ensure_ascii=False) leaves unescaped inside a message's text.
    for number, line in enumerate(raw.decode("utf-8", errors="replace").split("\n"), start=1):
        if not line.strip():
            continue
        try:
            item = request_json.loads(line)
        except ValueError as exc:
            raise BadRequest(f"line {number} is not JSON: {exc}", code="invalid_jsonl") from None
        if (problem := item_problem(item)) is not None:
            raise BadRequest(
                f"line {number} is not an exported memory item: {problem}", code="invalid_jsonl"
            )
        items.append(item)
    try:
        imported = await _run(state.layer.import_, user_id, items)
    except TooManyFacts as exc:  # nothing was stored
        raise BadRequest(str(exc), code="too_many_facts") from None
    return JSONResponse(
        {"user_id": user_id, "imported": imported.messages, "facts": imported.facts}
    )


def _positive_int(value: str, name: str, maximum: int) -> int:
    try:
        number = int(value)
    except ValueError:
        number = 0
    if not 1 <= number <= maximum:
        raise BadRequest(f"'{name}' must be an integer from 1 to {maximum}", param=name)
    return number
