"""Everything moim does not remember: any other `/v1/` request, relayed to the provider.

Embeddings, legacy completions, moderations, files, audio, images, batches, ... (and the
Responses API, while moim has no memory for it) go to the upstream as they came: the method,
the path after `/v1` (raw, percent-escapes kept), the query string, the headers less hop-by-hop
ones and moim's own, and the body, streamed as it arrives. The answer comes back the same way:
status, headers less hop-by-hop ones, and the body byte for byte, streamed (SSE, downloads).
Nothing of it is stored, but for one case: a poll of a Responses API reply written in the
background, which moim noted when it was queued (`proxy/background.py`), stores the reply.

Chat's rules apply: proxy keys (`auth.keys`) are checked, and the provider key then comes from
config only (a browser's CORS preflight goes unauthenticated, with no provider key:
`proxy.auth.is_preflight`); the body limit (`server.max_body_bytes`); `x-request-id` on every
answer. A JSON body naming a `model` is routed as chat routes it: a config alias goes to its
own base URL, the model renamed; a name litellm must translate goes through
`litellm.aembedding` for `POST /v1/embeddings`, and anything else for it is refused with a 400
naming the path. Other bodies (multipart uploads, audio, none) go to the upstream URL; with
none configured the answer is a 404 that says so. What is refused before relaying (the memory
API's paths, the account's shared state without an admin key, chat at a path without memory)
is in `proxy/passthrough_refusals.py` and `proxy/unserved_paths.py`.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import anyio
import httpx
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from proxy import request_json
from proxy.auth import Caller, authenticate, is_preflight
from proxy.errors import (
    BadRequest,
    NotFound,
    PayloadTooLarge,
    ProxyError,
    RequestTimeout,
)
from proxy.exchange import renamed
from proxy.header_lines import (
    HOP_BY_HOP,
    NOT_FORWARDED,
    client_lines,
    provider_lines,
    without_account,
)
from proxy.json_items import Located
from proxy.limits import decoded, read_body
from proxy.passthrough_refusals import refuse_account_endpoints, refuse_memory_paths
from proxy.responses import watch_poll
from proxy.streaming import EndCallback, EventCollector, not_stored, relay
from proxy.unserved_paths import refuse_chat_without_memory
from proxy.upstream import (
    Target,
    compressed,
    embed_litellm,
    model_object,
    provider_key,
    resolve,
)
from proxy.upstream_client import send
from proxy.upstream_errors import unreachable

if TYPE_CHECKING:
    from proxy.state import AppState

logger = logging.getLogger(__name__)

METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]
# Response headers our server sets itself (uvicorn adds its own `date` and `server`).
NOT_RELAYED = HOP_BY_HOP | {b"date", b"server"}
# A stored poll compressed anyway is relayed as read, decompressed (gzip bytes stored nothing).
RECODED = frozenset({b"content-encoding", b"content-length"})


# Endpoints that keep nothing on the provider account (besides /models, /audio/*, /images/*).
async def passthrough(request: Request, state: AppState) -> Response:
    """Relay one request that moim does not handle; errors carry `x-request-id` too."""
    request_id = request.headers.get("x-request-id") or uuid.uuid4().hex
    route = "none"
    try:
        preflight = is_preflight(request.method, request.headers) and not _has_body(request)
        if state.config.keys and preflight:  # a browser's question: no credentials (auth.py)
            caller = Caller(None, None)
        else:
            caller = authenticate(request.headers, state.config)
        suffix = upstream_path(request)
        refuse_memory_paths(request, suffix)
        refuse_chat_without_memory(request, suffix, state.config.memory_enabled)
        await refuse_account_endpoints(request, suffix, caller, state)
        route, response = await _route(request, state, caller.authorization, suffix)
    except ProxyError as exc:
        exc.headers.update(_untouched(request_id))
        _log(request, request_id, route, exc.status)
        raise  # the app's one handler renders it
    except ClientDisconnect:  # the client left while sending its body: nobody to answer
        _log(request, request_id, route, 499)
        return Response(status_code=400)
    response.headers.update(_untouched(request_id))
    _log(request, request_id, route, response.status_code)
    return response


def _untouched(request_id: str) -> dict[str, str]:
    """What a pass-through says of memory: nothing recalled, injected or stored, as for a
    chat request with `X-Memory-Mode: off` (docs/CONTRACT.md's vocabulary, not a new one)."""
    return {"x-request-id": request_id, "x-memory-mode": "off"}


async def retrieve_model(request: Request, state: AppState) -> Response:
    """`GET /v1/models/{id}`: moim's own answer for names it routes, else the upstream's."""
    model_id = request.path_params["model_id"]
    target = resolve(model_id, state.config)
    if model_id not in state.config.routes and target.kind != "litellm":
        return await passthrough(request, state)
    return answered_here(request, state, lambda: JSONResponse(model_object(model_id, state.config)))


def answered_here(request: Request, state: AppState, answer: Callable[[], Response]) -> Response:
    """moim's own answer on a pass-through route (a model it routes, the model list without an
    upstream): authenticated as a pass-through is, its answer and errors saying the same of
    memory (`x-memory-mode: off`, `x-request-id`), as the upstream's answer there would."""
    request_id = request.headers.get("x-request-id") or uuid.uuid4().hex
    try:
        authenticate(request.headers, state.config)
        response = answer()
    except ProxyError as exc:
        exc.headers.update(_untouched(request_id))
        raise
    response.headers.update(_untouched(request_id))
    return response


def upstream_path(request: Request) -> str:
    """The raw path after the client's `/v1` (or `/u/{user}/v1`), to append to a base URL.

    Percent-escapes are kept as the client wrote them. A path whose raw form does not decode
    to the path that was routed, or with `.` or `..` segments, is refused: resolved against
    the base URL it could reach paths outside it, with the provider key from config.
    """
    decoded: str = request.scope["path"]
    raw: bytes = request.scope.get("raw_path") or decoded.encode()
    user = request.path_params.get("user_id")
    if user is not None:
        decoded = decoded.removeprefix(f"/u/{user}")
        raw = raw[raw.index(b"/", 3) :]
    decoded, raw = decoded.removeprefix("/v1"), raw.removeprefix(b"/v1")
    suffix = raw.decode("latin-1")
    if unquote(suffix) != decoded or {".", ".."} & set(decoded.split("/")):
        raise BadRequest(
            f"the path {request.url.path!r} cannot be passed on: no '.' or '..' segments, "
            "and nothing percent-encoded before the endpoint's own path",
            code="invalid_path",
        )
    return suffix


async def _route(
    request: Request, state: AppState, client_auth: str | None, suffix: str
) -> tuple[str, Response]:
    """Where the request goes, and the answer: (route name for the log, response)."""
    config = state.config
    content: bytes | AsyncIterator[bytes] | None = None
    target = Target("openai", "", config.upstream_base_url, config.upstream_api_key)
    recoded = False  # the body is moim's JSON now, no longer the client's compressed bytes
    if _has_body(request) and _is_json(request):
        # read as it came (compressed, maybe), decompressed only to be parsed
        content = await read_body(request, config.max_body_bytes, config.body_timeout, False)
        encoding = request.headers.get("content-encoding")
        sent = decoded(content, encoding, config.max_body_bytes) if encoding else content
        body, located = _parse(sent)
        model = _model_of(body)
        if model is not None:
            target = resolve(model, config)
            if target.kind == "litellm":
                answer = await _through_litellm(request, suffix, state, target, body, client_auth)
                return "litellm", answer
            if target.model != model:  # a config alias names another model upstream
                content = renamed(sent, located, body, target.model)
                recoded = True
    elif _has_body(request):
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > config.max_body_bytes:
            raise PayloadTooLarge(
                f"request body is over {config.max_body_bytes} bytes", code="payload_too_large"
            )
        content = _limited(request.stream(), config.max_body_bytes, config.body_timeout)
    if target.base_url is None:
        raise NotFound(
            f"{request.method} {request.url.path}: moim has no upstream to pass this to; "
            "set upstream.base_url (MOIM_UPSTREAM_BASE_URL)",
            code="no_upstream",
        )
    authorization = provider_key(target, config, client_auth)
    url = target.base_url.rstrip("/") + suffix
    if request.scope["query_string"]:
        url += "?" + request.scope["query_string"].decode("latin-1")
    if is_preflight(request.method, request.headers):  # a browser's question: no credentials,
        authorization = None  # not the provider key, nor those of the base URL (Basic auth)
        url = str(httpx.URL(url).copy_with(userinfo=b""))
    headers = _outbound_headers(request, authorization, bool(config.keys), content, recoded)
    poll = watch_poll(state, request.method, suffix, request.scope["query_string"])
    limit = config.max_body_bytes
    answer = await _send(
        state.client, request.method, url, headers, content, poll, limit, authorization
    )
    return "upstream", answer


async def _through_litellm(
    request: Request,
    suffix: str,
    state: AppState,
    target: Target,
    body: dict[str, Any],
    client_auth: str | None,
) -> Response:
    """Embeddings for a model litellm translates; nothing else can go that way."""
    if request.method != "POST" or suffix != "/embeddings":
        raise BadRequest(
            f"{request.method} {request.url.path} cannot be sent for model {body['model']!r}: "
            "it goes through litellm, which moim uses for chat completions and embeddings only; "
            "other endpoints need an OpenAI-compatible upstream (upstream.base_url, or a models: "
            "route with openai_compatible: true)",
            param="model",
            code="unsupported_endpoint",
        )
    authorization = provider_key(target, state.config, client_auth)
    alias = body["model"] in state.config.routes
    data = await embed_litellm(target, body, authorization, state.config.read_timeout, alias)
    return Response(data, media_type="application/json")


async def _send(
    client: httpx.AsyncClient,
    method: str,
    url: str,
    headers: list[tuple[bytes, bytes]],
    content: bytes | AsyncIterator[bytes] | None,
    poll: tuple[EventCollector, EndCallback] | None = None,
    limit: int = 1 << 25,
    key: str | None = None,
) -> Response:
    """Open the upstream request and stream its answer back, byte for byte.

    A body read whole can be sent twice, so a stale pooled connection is retried once on a new
    one (`proxy.upstream_client.send`); a body streamed as it arrives cannot. `poll`: the
    request polls a reply written in the background, read on the side when the answer is a 200,
    up to `limit` bytes (`server.max_body_bytes`; past it the reply is not stored). The relay
    masks `key`, the provider key moim sent, wherever the answer quotes it (an error's message,
    an error event mid-stream), in the body decompressed should the provider compress it.
    """
    outbound = client.build_request(method, url, headers=headers, content=content)
    try:
        if isinstance(content, AsyncIterator):
            upstream = await client.send(outbound, stream=True)
        else:
            upstream = await send(client, outbound)
    except httpx.HTTPError as exc:
        raise unreachable(exc) from exc
    collector, on_end = poll if poll is not None and upstream.status_code == 200 else _NOTHING
    source, dropped = upstream.aiter_raw(), NOT_RELAYED
    if (collector is not None or key) and compressed(upstream):  # read as chat reads it
        source, dropped = upstream.aiter_bytes(), NOT_RELAYED | RECODED
    response = StreamingResponse(
        relay(source, collector, on_end, upstream.aclose, limit, key=key),
        status_code=upstream.status_code,
    )
    lines = provider_lines(upstream)
    response.raw_headers = [(name, value) for name, value in lines if name not in dropped]
    return response


_NOTHING: tuple[EventCollector | None, EndCallback] = (None, not_stored)  # no turn to store


def _outbound_headers(
    request: Request,
    authorization: str | None,
    proxy_keys: bool,
    content: bytes | AsyncIterator[bytes] | None,
    recoded: bool = False,
) -> list[tuple[bytes, bytes]]:
    """The client's headers as the provider should see them, duplicates and order kept
    (`recoded`: the body is one moim wrote, not compressed whatever the client's was)."""
    dropped = set(NOT_FORWARDED)
    if recoded:
        dropped.add(b"content-encoding")
    dropped.add(b"authorization")
    if proxy_keys:  # the client's x-api-key may be a proxy key (proxy/auth.py)
        dropped.add(b"x-api-key")
    headers = client_lines(without_account(request.scope["headers"], proxy_keys), dropped)
    headers.append((b"accept-encoding", b"identity"))
    if authorization:
        headers.append((b"authorization", authorization.encode("latin-1")))
    declared = request.headers.get("content-length")
    if declared is not None and content is not None and not isinstance(content, bytes):
        headers.append((b"content-length", declared.encode()))  # streamed: sized, not chunked
    return headers


def _has_body(request: Request) -> bool:
    declared = request.headers.get("content-length")
    return "transfer-encoding" in request.headers or (declared is not None and declared != "0")


def _is_json(request: Request) -> bool:
    kind = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    return kind == "application/json"


def _parse(raw: bytes) -> tuple[Any, Located | None]:
    """The body's JSON, and where an object's values lie in its text (a config alias's model
    name is written there)."""
    try:
        return request_json.loads_locating(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise BadRequest("request body is not valid JSON", code="invalid_json") from None


def _model_of(body: Any) -> str | None:
    """The body's `model`, which routes it; None when there is none to route by."""
    if not isinstance(body, dict) or "model" not in body:
        return None
    if not isinstance(body["model"], str) or not body["model"].strip():
        raise BadRequest("'model' must be a non-empty string", param="model", code="invalid_model")
    return body["model"]


async def _limited(
    chunks: AsyncIterator[bytes], limit: int, timeout: float
) -> AsyncIterator[bytes]:
    """The body as it arrives, refused past `limit` bytes (a declared length is checked first)
    or when no byte has come for `timeout` seconds (`server.body_timeout`, as for chat)."""
    size = 0
    while True:
        try:
            with anyio.fail_after(timeout):
                chunk = await anext(chunks)
        except StopAsyncIteration:
            return
        except TimeoutError:
            raise RequestTimeout(
                f"the request body stopped arriving after {size} bytes"
                f" (server.body_timeout: {timeout:g} s)"
            ) from None
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(f"request body is over {limit} bytes", code="payload_too_large")
        yield chunk


def _log(request: Request, request_id: str, route: str, status: int) -> None:
    logger.info(
        "request_id=%s method=%s path=%s route=%s status=%s",
        request_id,
        request.method,
        request.url.path,
        route,
        status,
    )
