"""Step 6a, forward: send the request to its provider.

OpenAI-compatible upstreams (`MOIM_UPSTREAM_BASE_URL`, or a config route marked
`openai_compatible`) get the body as bytes over one pooled httpx client, and their answer is
relayed byte for byte. Every other provider goes through `litellm.acompletion`, imported on
first use only (it costs ~2.5 s and ~165 MB), whose output is re-serialised as OpenAI JSON.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import anyio.to_thread
import httpx

from proxy.config import Config
from proxy.errors import UpstreamError

logger = logging.getLogger(__name__)

# Provider prefixes litellm understands; `prefix/model` with one of these goes to litellm.
LITELLM_PREFIXES = frozenset(
    "openai azure azure_ai anthropic bedrock vertex_ai gemini mistral cohere groq ollama "
    "ollama_chat together_ai fireworks_ai deepseek xai openrouter perplexity huggingface "
    "replicate databricks watsonx sagemaker cerebras nvidia_nim hosted_vllm vllm lm_studio "
    "text-completion-openai cloudflare ai21 voyage anyscale deepinfra sambanova".split()
)
# Request headers a provider may need; nothing else of the client's is forwarded.
FORWARDED_HEADERS = ("openai-organization", "openai-project", "openai-beta", "user-agent")
# Response headers never relayed: hop-by-hop, or recomputed by our server.
DROPPED_RESPONSE_HEADERS = frozenset(
    "connection keep-alive transfer-encoding content-length content-encoding date server "
    "proxy-connection upgrade".split()
)


@dataclass(frozen=True, slots=True)
class Target:
    """Where a model name goes and what it is called there."""

    kind: Literal["openai", "litellm"]
    model: str
    base_url: str | None = None
    api_key: str | None = None


def resolve(model: str, config: Config) -> Target:
    """Route a model name: config aliases, then `provider/…` names, then the upstream URL."""
    route = config.routes.get(model)
    if route is not None:
        if route.openai_compatible and route.api_base:
            return Target("openai", route.model, route.api_base, route.api_key)
        return Target("litellm", route.model, route.api_base, route.api_key)
    prefix = model.split("/", 1)[0] if "/" in model else None
    if prefix in LITELLM_PREFIXES or not config.upstream_base_url:
        return Target("litellm", model, None, None)
    return Target("openai", model, config.upstream_base_url, config.upstream_api_key)


def provider_key(target: Target, config: Config, client_auth: str | None) -> str | None:
    """The `Authorization` value for the provider.

    Without proxy keys the client's own header passes through; with them, the client's
    header carried a proxy key, so only configured provider keys may be used.
    """
    if target.api_key:
        return f"Bearer {target.api_key}"
    if not config.keys and client_auth:
        return client_auth
    return None


async def open_openai(
    client: httpx.AsyncClient,
    target: Target,
    content: bytes,
    authorization: str | None,
    headers: Mapping[str, str],
    path: str = "/chat/completions",
) -> httpx.Response:
    """POST to an OpenAI-compatible upstream's `path` (under its base URL, e.g.
    `/chat/completions` or `/responses`); the caller closes the response."""
    assert target.base_url is not None
    outbound = {"content-type": "application/json", "accept-encoding": "identity"}
    if authorization:
        outbound["authorization"] = authorization
    for name in FORWARDED_HEADERS:
        if name in headers:
            outbound[name] = headers[name]
    request = client.build_request(
        "POST",
        target.base_url.rstrip("/") + path,
        content=content,
        headers=outbound,
    )
    return await client.send(request, stream=True)


def relayed_headers(response: httpx.Response) -> dict[str, str]:
    """The provider's response headers that the client should see."""
    return {k: v for k, v in response.headers.items() if k.lower() not in DROPPED_RESPONSE_HEADERS}


async def list_models(
    client: httpx.AsyncClient, config: Config, authorization: str | None
) -> bytes:
    """The upstream's `/models` body, or a list built from the configured routes."""
    if config.upstream_base_url:
        headers = {}
        auth = f"Bearer {config.upstream_api_key}" if config.upstream_api_key else None
        auth = auth or (authorization if not config.keys else None)
        if auth:
            headers["authorization"] = auth
        try:
            response = await client.get(
                config.upstream_base_url.rstrip("/") + "/models", headers=headers
            )
        except httpx.HTTPError as exc:
            raise unreachable(exc) from exc
        if response.status_code >= 400:
            raise UpstreamError(response.status_code, response.content, relayed_headers(response))
        return response.content
    data = [
        {"id": name, "object": "model", "created": 0, "owned_by": "moim"} for name in config.routes
    ]
    return json.dumps({"object": "list", "data": data}).encode()


def unreachable(exc: httpx.HTTPError) -> UpstreamError:
    """The error a client gets when the provider could not be reached or answer in time."""
    if isinstance(exc, httpx.TimeoutException):
        return UpstreamError(504, upstream_error("upstream timed out", "upstream_timeout"))
    message = f"upstream unreachable: {type(exc).__name__}"
    return UpstreamError(502, upstream_error(message, "upstream_unreachable"))


def upstream_error(message: str, code: str) -> bytes:
    """An OpenAI-shaped error body for a provider moim could not talk to."""
    return json.dumps(
        {"error": {"message": message, "type": "upstream_error", "param": None, "code": code}}
    ).encode()


# -- litellm ---------------------------------------------------------------------------------


def _litellm() -> Any:
    # Read the bundled cost map instead of fetching it from the network at import time.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("LITELLM_TELEMETRY", "False")
    import litellm

    litellm.telemetry = False
    return litellm


async def call_litellm(
    target: Target, body: Mapping[str, Any], authorization: str | None, timeout: float
) -> Any:
    """`litellm.acompletion` with the client's body; raises UpstreamError on provider errors."""
    # The first import takes seconds: never on the event loop.
    litellm = await anyio.to_thread.run_sync(_litellm)
    params = {k: v for k, v in body.items() if k not in ("model",)}
    params["model"] = target.model
    if target.base_url:
        params["api_base"] = target.base_url
    key = authorization.removeprefix("Bearer ").strip() if authorization else None
    if key:
        params["api_key"] = key
    params.setdefault("timeout", timeout)
    try:
        return await litellm.acompletion(**params)
    except Exception as exc:  # litellm maps every provider error onto its own classes
        status = getattr(exc, "status_code", None)
        status = status if isinstance(status, int) and 400 <= status < 600 else 502
        kind = type(exc).__name__
        if _missing_key(exc):
            status, kind = 401, "authentication_error"
        message = getattr(exc, "message", None) or str(exc)
        error = {"error": {"message": message, "type": kind, "param": None, "code": str(status)}}
        raise UpstreamError(status, json.dumps(error).encode()) from exc


def _missing_key(exc: BaseException) -> bool:
    """True when the error is the OpenAI SDK refusing to start without an API key.

    litellm reports that as a 500 (other providers' missing keys are already 401s): its
    cause is the SDK's bare `OpenAIError`, raised before anything was sent.
    """
    seen: BaseException | None = exc
    for _ in range(8):  # bounded: a chain of causes may loop back on itself
        if seen is None:
            return False
        kind = type(seen)
        if kind.__module__ == "openai" and kind.__name__ == "OpenAIError":
            return "api_key" in str(seen)
        seen = seen.__cause__ or seen.__context__
    return False


async def close_litellm() -> None:
    """Close litellm's pooled clients, if litellm was ever loaded."""
    litellm = sys.modules.get("litellm")
    if litellm is not None and hasattr(litellm, "close_litellm_async_clients"):
        try:
            await litellm.close_litellm_async_clients()
        except Exception:  # shutting down: nothing left to tell the client
            logger.debug("closing litellm clients failed", exc_info=True)


async def litellm_sse(stream: Any) -> AsyncIterator[bytes]:
    """A litellm stream as OpenAI server-sent events, ending with `[DONE]`."""
    async for chunk in stream:
        payload = chunk.model_dump(exclude_none=True) if hasattr(chunk, "model_dump") else chunk
        yield b"data: " + json.dumps(payload, ensure_ascii=False).encode() + b"\n\n"
    yield b"data: [DONE]\n\n"


def litellm_json(response: Any) -> bytes:
    payload = (
        response.model_dump(exclude_none=True) if hasattr(response, "model_dump") else response
    )
    return json.dumps(payload, ensure_ascii=False).encode()
