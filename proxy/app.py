"""The Starlette application: routes, lifespan, and the one piece of shared state.

`AppState` is everything a request may touch: the frozen config, the memory layer (store,
embedder, vector index), the background writer, the pooled httpx client for upstreams
(`proxy/upstream_client.py`), the app's Prometheus metrics (`proxy/metrics.py`), the MCP
endpoint (`proxy/mcp_server.py`), and the Responses API replies that just finished
(`proxy/recent_responses.py`). It is
built in the lifespan and kept on `app.state.moim`; there are no other globals (the metrics'
registry is the app's own, made with the app: its middleware counts into it). With
`consolidation.model` set, the lifespan also runs the consolidation schedule
(`proxy/consolidate.py`) as a task on that client, cancelled at shutdown.
Chat completions get memory (`proxy/pipeline.py`); any other `/v1/` request (and
`/u/{user}/v1/`) passes through to the provider unchanged (`proxy/passthrough.py`), after
moim's own routes, which win. `ProxyError`s become OpenAI-shaped JSON in one handler; a
`MemoryLayerError` that reaches it (only the memory API lets one through: chat fails open in
`pipeline.py`) becomes a 503 with `Retry-After`, as a locked or unreachable store is worth
retrying. A provider that breaks off mid-body breaks the client's response off too
(`proxy/break_off.py`, the outermost middleware).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import anyio.to_thread
import httpx
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.types import Receive, Scope, Send
from starlette.websockets import WebSocket

from memory import MemoryLayer, MemoryLayerError, count_tokens
from proxy import admin, facts_api, inspector
from proxy.auth import authorize_metrics, is_loopback
from proxy.break_off import BreakOff
from proxy.chat import chat
from proxy.config import Config
from proxy.consolidation_schedule import consolidate_on_schedule
from proxy.embedding_service import embedder_factory
from proxy.errors import BadRequest, NotFound, ProxyError, ServiceUnavailable, error_response
from proxy.inspector import Inspector
from proxy.limits import HeaderLimit
from proxy.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from proxy.metrics import Metrics
from proxy.passthrough import METHODS, answered_here, passthrough, retrieve_model
from proxy.replicas import recover_replicas
from proxy.request_metrics import RequestMetrics
from proxy.responses import responses
from proxy.runtime import freeze_startup_objects, tune_process
from proxy.serving import StopClock
from proxy.state import AppState, state_of
from proxy.unserved_paths import outside_v1
from proxy.upstream import close_litellm, list_models
from proxy.upstream_client import upstream_client
from proxy.writer import Writer

if TYPE_CHECKING:
    from proxy.mcp_server import McpEndpoint

logger = logging.getLogger(__name__)


def build_app(
    config: Config, layer: MemoryLayer | None = None, stop_clock: StopClock | None = None
) -> Starlette:
    """The moim ASGI app for `config` (a prepared `layer` may be passed in, e.g. by tests);
    `stop_clock` says when `moim serve` was asked to stop (its shutdown has what is left of
    `server.shutdown_timeout`)."""
    metrics = Metrics()  # before the lifespan: RequestMetrics counts into it

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        tune_process()
        memory = layer or MemoryLayer(config.memory, embedder_factory(config))
        client = upstream_client(config)
        journal = memory.open_journal(config.journal_path)  # `moim serve` opened it
        writer = Writer(memory, journal, config.ingest_queue_size)
        mcp = _mcp_endpoint(config, memory)
        app.state.moim = AppState(
            config,
            memory,
            writer,
            client,
            metrics,
            mcp=mcp,
            inspector=Inspector.from_config(config),
        )
        metrics.watch(writer, memory)
        # Load the embedding model off the request path; the writer then resumes any
        # indexing a previous process left unfinished.
        memory.announce_load()
        loading = asyncio.create_task(_warm_up(memory, writer))
        schedule = _start_schedule(config, memory, client)
        replicas = asyncio.create_task(recover_replicas(memory)) if memory.shared else None
        try:
            async with _mcp_running(mcp):
                yield
        finally:
            loading.cancel()
            if replicas is not None:
                replicas.cancel()
            if schedule is not None:  # before the client it uses is closed
                schedule.cancel()
                await asyncio.wait([schedule])
            clock = stop_clock or StopClock()
            clock.turns_lost = await writer.stop(clock.left(config.shutdown_timeout))
            await client.aclose()
            await close_litellm()

    routes = [
        Route("/v1/chat/completions", _chat, methods=["POST"]),
        Route("/chat/completions", _chat, methods=["POST"]),
        Route("/u/{user_id}/v1/chat/completions", _chat, methods=["POST"]),
        Route("/u/{user_id}/chat/completions", _chat, methods=["POST"]),
        Route("/v1/responses", _responses, methods=["POST"]),
        Route("/responses", _responses, methods=["POST"]),
        Route("/u/{user_id}/v1/responses", _responses, methods=["POST"]),
        Route("/u/{user_id}/responses", _responses, methods=["POST"]),
        Route("/v1/models", _models, methods=["GET"]),
        Route("/models", _models, methods=["GET"]),
        Route("/u/{user_id}/v1/models", _models, methods=["GET"]),
        Route("/v1/models/{model_id:path}", _model, methods=["GET"]),
        Route("/models/{model_id:path}", _model, methods=["GET"]),
        Route("/u/{user_id}/v1/models/{model_id:path}", _model, methods=["GET"]),
        Route("/health", _health, methods=["GET"]),
        Route("/health/liveliness", _health, methods=["GET"]),
        Route("/health/readiness", _readiness, methods=["GET"]),
        Route("/metrics", _metrics, methods=["GET"]),
        Route("/mcp", _Mcp()),
        Route("/u/{user_id}/mcp", _Mcp()),
        *admin.routes(),
        *facts_api.routes(),
        *_with_path_user([*admin.routes(), *facts_api.routes()]),
        *inspector.routes(config),
        # Last: whatever moim does not handle above goes to the provider as it came.
        Route("/v1/{path:path}", _passthrough, methods=METHODS),
        Route("/u/{user_id}/v1/{path:path}", _passthrough, methods=METHODS),
        Route("/openai/{path:path}", _azure_paths, methods=METHODS),
        Route("/u/{user_id}/openai/{path:path}", _azure_paths, methods=METHODS),
        WebSocketRoute("/{path:path}", _no_websockets),
    ]
    return Starlette(
        routes=routes,
        lifespan=lifespan,
        exception_handlers={
            ProxyError: _proxy_error,
            MemoryLayerError: _memory_error,
            HTTPException: _http_error,
            Exception: _internal_error,
        },
        middleware=[
            Middleware(BreakOff),  # outermost: a provider that broke off breaks the client off
            Middleware(RequestMetrics, metrics=metrics),  # it sees every answer
            Middleware(HeaderLimit, max_bytes=config.max_header_bytes),
        ],
    )


def _with_path_user(routes: list[Route]) -> list[Route]:
    """The same routes under `/u/{user_id}`, for tools that can set only a base URL."""
    return [
        Route("/u/{user_id}" + route.path, route.endpoint, methods=route.methods)
        for route in routes
    ]


def _start_schedule(
    config: Config, layer: MemoryLayer, client: httpx.AsyncClient
) -> asyncio.Task[None] | None:
    """LLM consolidation on a schedule: only with a consolidation model, and memory on."""
    if config.consolidation_model is None or not config.memory_enabled:
        return None
    return asyncio.create_task(consolidate_on_schedule(config, layer, client))


def _mcp_endpoint(config: Config, layer: MemoryLayer) -> McpEndpoint | None:
    """The `/mcp` endpoint, or None when the `mcp` SDK (the `moim[mcp]` extra) is missing."""
    try:
        from proxy.mcp_server import McpEndpoint
    except ImportError:
        logger.info("MCP at /mcp is off: the mcp package is not installed (moim[mcp])")
        return None
    return McpEndpoint(layer, config, is_loopback(config.host))


@asynccontextmanager
async def _mcp_running(endpoint: McpEndpoint | None) -> AsyncIterator[None]:
    if endpoint is None:
        yield
        return
    async with endpoint.run():
        yield


class _Mcp:
    """`/mcp`: MCP over streamable HTTP (`proxy/mcp_server.py`), 404 without the extra."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        endpoint = state_of(Request(scope)).mcp
        if endpoint is None:
            raise NotFound(
                "MCP needs the mcp package: pip install 'moim[mcp]'", code="mcp_not_installed"
            )
        await endpoint(scope, receive, send)


async def _warm_up(layer: MemoryLayer, writer: Writer) -> None:

    # The tokenizer first (under a second): every request counts tokens, while recall goes
    # on without the embedding model until it is loaded (seconds on a first start). The
    # model is loaded whatever the tokenizer does: recall waits for it (`announce_load`).
    try:
        await anyio.to_thread.run_sync(lambda: count_tokens("warm", "gpt-4o"))
    except Exception:
        logger.exception("the tokenizer failed to load")
    try:
        await anyio.to_thread.run_sync(lambda: layer.embedder)
    except MemoryLayerError as exc:  # its line says why: a service unreachable, a bad model
        logger.error("embedding model failed to load (%s); memory will fail open", exc)
    except Exception:
        logger.exception("embedding model failed to load; memory will fail open")
    freeze_startup_objects()
    await writer.start()


async def _no_websockets(websocket: WebSocket) -> None:
    """A WebSocket handshake (the Realtime API's `/v1/realtime`) is refused with a 400 in
    OpenAI's shape saying why: moim proxies HTTP only. (Without it, the handshake got a bare
    403.) A server without the denial-response extension closes the handshake instead."""
    refusal = BadRequest(
        "moim does not proxy WebSockets (the Realtime API): connect to the provider directly",
        code="websockets_unsupported",
    )
    await websocket.send_denial_response(error_response(refusal))


async def _chat(request: Request) -> Response:
    return await chat(request, state_of(request), request.path_params.get("user_id"))


async def _responses(request: Request) -> Response:
    return await responses(request, state_of(request), request.path_params.get("user_id"))


async def _models(request: Request) -> Response:
    """The upstream's model list as it answers it (passed through: the client's organization
    and project headers, its query; the provider's headers), else the models moim routes."""
    state = state_of(request)
    if state.config.upstream_base_url:
        return await passthrough(request, state)
    listed = list_models(state.config)
    return answered_here(request, state, lambda: Response(listed, media_type="application/json"))


async def _model(request: Request) -> Response:
    return await retrieve_model(request, state_of(request))


async def _passthrough(request: Request) -> Response:
    return await passthrough(request, state_of(request))


async def _azure_paths(request: Request) -> Response:
    raise outside_v1(request.method, request.url.path)


async def _health(request: Request) -> Response:
    """200 while the server is up; "degraded", with the reason, while the lexical index beside
    the database is rebuilt after it failed under moim (FTS5 answers meanwhile)."""
    lexical = await anyio.to_thread.run_sync(state_of(request).layer.lexical_problem)
    if lexical is None:
        return JSONResponse({"status": "ok"})
    return JSONResponse({"status": "degraded", "lexical_index": lexical})


async def _readiness(request: Request) -> Response:
    """200 once the model is loaded and the journal replayed, while the writer works; 503
    with the reason otherwise (`writer` says what is failing: proxy/writer_health.py). A
    Postgres store every replica shares being unreachable is 200, "degraded", with the reason:
    503 would drain every replica at once, and chat goes on without memory meanwhile.

    While chunks are re-embedded for a new embedding model, `vector_rebuild` says how far
    that is; it does not make the process unready (recall goes on by keywords meanwhile)."""
    state = state_of(request)
    loaded, recovered = state.layer.ready, state.writer.recovered
    problem, local = state.writer.problem, state.writer.local_problem
    ready = loaded and recovered and local is None
    status = "failing" if local else "starting"
    lexical = await anyio.to_thread.run_sync(state.layer.lexical_problem)
    body: dict[str, object] = {
        "status": ("degraded" if problem or lexical else "ok") if ready else status,
        "embedder": loaded,
        "recovered": recovered,
    }
    if problem is not None:
        body["writer"] = problem
    if lexical is not None:
        body["lexical_index"] = lexical
    rebuild = await anyio.to_thread.run_sync(_rebuild_progress, state.layer)
    if rebuild is not None:
        body["vector_rebuild"] = rebuild
    return JSONResponse(body, status_code=200 if ready else 503)


def _rebuild_progress(layer: MemoryLayer) -> dict[str, object] | None:
    """The re-embedding under way after a change of model, for readiness; None without one
    (or when the store cannot say: readiness reports the writer's failures already)."""
    try:
        rebuild = layer.vector_rebuild()
    except MemoryLayerError:
        return None
    if rebuild is None:
        return None
    return {
        "from": rebuild.old_model,
        "to": rebuild.new_model,
        "done": rebuild.done,
        "total": rebuild.total,
    }


async def _metrics(request: Request) -> Response:
    state = state_of(request)
    authorize_metrics(request.headers, state.config)
    return Response(await state.metrics.exposition(), media_type=METRICS_CONTENT_TYPE)


async def _proxy_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ProxyError)
    return error_response(exc)


async def _memory_error(request: Request, exc: Exception) -> Response:
    """A memory-layer failure on the memory API, e.g. SQLite's "database is locked": 503."""
    state_of(request).metrics.memory_errors.labels("memory_api", type(exc).__name__).inc()
    logger.warning(
        "memory API %s %s: store unavailable: %s: %s",
        request.method,
        request.url.path,
        type(exc).__name__,
        exc,
    )
    error = ServiceUnavailable(
        "the memory store is busy or unavailable; retry shortly", code="memory_unavailable"
    )
    return await _proxy_error(request, error)


async def _internal_error(request: Request, exc: Exception) -> Response:
    """A failure moim did not foresee (a bug): a 500 in OpenAI's shape, which SDKs read as a
    server error (and retry), where Starlette's default is a plain-text body they cannot parse.
    Starlette still re-raises it after this answer, so the server logs its traceback."""
    return error_response(ProxyError("internal error in moim: see its log", code="internal_error"))


async def _http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own refusals (an unknown route, a wrong method) in OpenAI's shape."""
    assert isinstance(exc, HTTPException)
    error = ProxyError(str(exc.detail), code=str(exc.status_code), headers=exc.headers)
    error.status = exc.status_code
    error.type = "not_found_error" if exc.status_code == 404 else "invalid_request_error"
    return error_response(error)
