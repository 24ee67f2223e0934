"""Step 6a, forward: send the request to its provider.

OpenAI-compatible upstreams (`MOIM_UPSTREAM_BASE_URL`, or a config route marked
`openai_compatible`) get the body as bytes over one pooled httpx client, and their answer is
relayed byte for byte. Every other provider goes through `litellm.acompletion` (and, for the
pass-through's `POST /v1/embeddings`, `litellm.aembedding`), imported on first use only (it
costs ~2.5 s and ~165 MB), whose output is re-serialised as OpenAI JSON; litellm gets the
body's OpenAI parameters only (`proxy/litellm_params.py`); the provider's address and key
come from config (see `provider_key`), never from the body.
"""

from __future__ import annotations

import base64
import functools
import json
import logging
import os
import sys
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import anyio.to_thread
import httpx
import numpy as np

from proxy import litellm_params
from proxy.config import Config
from proxy.errors import BadRequest
from proxy.header_lines import NOT_FORWARDED_WITH_MEMORY, client_lines
from proxy.litellm_redirects import follow_no_redirects
from proxy.upstream_client import send
from proxy.upstream_errors import failure, key_of

logger = logging.getLogger(__name__)
# litellm's loggers (litellm/_logging.py), and the openai SDK's, which it calls for OpenAI's
# and OpenAI-compatible providers (its DEBUG line "Request options" holds the body).
_LITELLM_LOGGERS = ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "openai")

# Provider prefixes litellm understands; `prefix/model` with one of these goes to litellm.
LITELLM_PREFIXES = frozenset(
    "openai azure azure_ai anthropic bedrock vertex_ai gemini mistral cohere groq ollama "
    "ollama_chat together_ai fireworks_ai deepseek xai openrouter perplexity huggingface "
    "replicate databricks watsonx sagemaker cerebras nvidia_nim hosted_vllm vllm lm_studio "
    "text-completion-openai cloudflare ai21 voyage anyscale deepinfra sambanova".split()
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
    header carried a proxy key, so only configured provider keys may be used. A base URL
    holding a gateway's credentials (`user:password@`) sends them as Basic auth in place of
    either (httpx does): that value is the one returned, so what masks the sent key in a
    provider's error (`proxy.upstream_errors.without_key`) masks them.
    """
    if target.kind == "openai" and target.base_url and (basic := basic_auth(target.base_url)):
        return basic
    if target.api_key:
        return f"Bearer {target.api_key}"
    if not config.keys and client_auth:
        return client_auth
    return None


@functools.lru_cache(maxsize=64)
def basic_auth(base_url: str) -> str | None:
    """The `Authorization` httpx sends for a URL with `user:password@` (None without): Basic,
    of the user and password percent-decoded, UTF-8 (as `httpx.BasicAuth`)."""
    url = httpx.URL(base_url)
    if not (url.username or url.password):
        return None
    pair = f"{url.username}:{url.password}".encode()
    return "Basic " + base64.b64encode(pair).decode()


async def open_openai(
    client: httpx.AsyncClient,
    target: Target,
    content: bytes,
    authorization: str | None,
    header_lines: Iterable[tuple[bytes, bytes]],
    path: str = "/chat/completions",
    query: str = "",
) -> httpx.Response:
    """POST to an OpenAI-compatible upstream's `path` (under its base URL, e.g.
    `/chat/completions` or `/responses`), with the client's raw `query` string (an Azure
    client's `?api-version=…`); the caller closes the response. A stale pooled connection is
    retried once on a new one (`proxy.upstream_client.send`).

    `header_lines` are the client's, as ASGI gives them: each forwarded line goes out as the
    bytes the client sent (as a str, httpx would encode it as ASCII, and a "Café" in a
    User-Agent was a 500), in its order, a name sent twice as two lines (a dict of them kept
    only the first)."""
    assert target.base_url is not None
    outbound = [(b"content-type", b"application/json"), (b"accept-encoding", b"identity")]
    if authorization:
        outbound.append((b"authorization", authorization.encode("latin-1")))
    outbound += client_lines(header_lines, NOT_FORWARDED_WITH_MEMORY)
    url = endpoint_url(target.base_url, path)
    if query:
        url = url.copy_with(query=query.encode("latin-1"))
    request = client.build_request("POST", url, content=content, headers=outbound)
    return await send(client, request)


@functools.lru_cache(maxsize=256)
def endpoint_url(base_url: str, path: str) -> httpx.URL:
    """The parsed URL of `path` under `base_url`. Parsing one is most of what httpx's
    `build_request` costs (~30 of ~90 µs a request, ahead of the forward), and an upstream's
    endpoints are few: each is parsed once. `httpx.URL` is immutable, so one is shared."""
    return httpx.URL(base_url.rstrip("/") + path)


def body_chunks(response: httpx.Response) -> AsyncIterator[bytes]:
    """The provider's body as it arrives: its bytes as sent, or decompressed when it was
    compressed after all (moim asks for `identity`, a provider may not listen), since the
    `Content-Encoding` is not relayed (moim's collector reads the events, too)."""
    return response.aiter_bytes() if compressed(response) else response.aiter_raw()


def compressed(response: httpx.Response) -> bool:
    """Whether the provider compressed its body (moim asks it for `identity`)."""
    encoding: str = response.headers.get("content-encoding", "identity")
    return encoding.lower() != "identity"


def list_models(config: Config) -> bytes:
    """The models moim routes itself (config routes), as OpenAI's list: the answer to
    `GET /v1/models` without an upstream (with one, the upstream's list is passed through)."""
    data = [model_object(name, config) for name in config.routes]
    return json.dumps({"object": "list", "data": data}).encode()


def model_object(name: str, config: Config) -> dict[str, Any]:
    """OpenAI's model object for a name moim routes itself (a config alias or litellm's)."""
    owner = "moim" if name in config.routes else name.split("/", 1)[0] if "/" in name else "litellm"
    return {"id": name, "object": "model", "created": 0, "owned_by": owner}


# -- litellm ---------------------------------------------------------------------------------


def load_litellm() -> Any:
    """litellm, imported on first use, offline (its bundled cost map), quiet, no telemetry."""
    # Read the bundled cost map instead of fetching it from the network at import time.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("LITELLM_TELEMETRY", "False")
    import litellm

    litellm.telemetry = False
    litellm.suppress_debug_info = True  # no "Give Feedback / Get Help" banner on stdout
    # Their DEBUG lines hold each request's messages: they stay out of the logs even when moim
    # runs with `--log-level debug` (these loggers log from WARNING up, or above if set so).
    for name in _LITELLM_LOGGERS:
        quiet = logging.getLogger(name)
        quiet.setLevel(max(quiet.getEffectiveLevel(), logging.WARNING))
    follow_no_redirects()  # a provider's 307 elsewhere would take its key there
    return litellm


async def call_litellm(
    target: Target, body: Mapping[str, Any], authorization: str | None, timeout: float
) -> Any:
    """`litellm.acompletion` with the body's OpenAI parameters; raises UpstreamError on errors.

    The provider's address is the target's (config) and its key `authorization`, never the
    body's: see `proxy/litellm_params.py` for what of the body is passed on.
    """
    # The first import takes seconds: never on the event loop.
    litellm = await anyio.to_thread.run_sync(load_litellm)
    params = litellm_params.forwarded(body)
    params["model"] = target.model
    if target.base_url:
        params["api_base"] = target.base_url
    key = key_of(authorization)
    if key:
        params["api_key"] = key
    params["timeout"] = timeout
    # With `tools`, litellm would first load its MCP gateway (a litellm-proxy feature that
    # needs the `mcp` package and may connect to servers named in the tools); moim has none.
    params["_skip_mcp_handler"] = True
    try:
        return await litellm.acompletion(**params)
    except Exception as exc:  # litellm maps every provider error onto its own classes
        raise failure(exc, litellm, authorization) from exc


async def embed_litellm(
    target: Target, body: Mapping[str, Any], authorization: str | None, timeout: float, alias: bool
) -> bytes:
    """`litellm.aembedding` for an embeddings request, answered as OpenAI's JSON.

    Only OpenAI's embeddings parameters are passed on; any other field is refused before
    litellm is asked (`proxy/litellm_params.py`; `alias`: the model name is a config route).
    litellm is always asked for floats, which every provider gives; `encoding_format: base64`
    is then made here, as OpenAI sends it: little-endian float32.
    """
    litellm_params.refuse_unsafe(body, alias, litellm_params.EMBEDDING_PARAMS)
    if "input" not in body:
        raise BadRequest("'input' is required", param="input", code="invalid_input")
    encoding = body.get("encoding_format", "float")
    if encoding not in ("float", "base64"):
        raise BadRequest("'encoding_format' must be 'float' or 'base64'", param="encoding_format")
    litellm = await anyio.to_thread.run_sync(load_litellm)
    params = litellm_params.forwarded(body, litellm_params.EMBEDDING_PARAMS - {"encoding_format"})
    params.update(model=target.model, timeout=timeout)
    if target.base_url:
        params["api_base"] = target.base_url
    key = key_of(authorization)
    if key:
        params["api_key"] = key
    try:
        response = await litellm.aembedding(**params)
    except Exception as exc:  # litellm maps every provider error onto its own classes
        raise failure(exc, litellm, authorization) from exc
    payload = response.model_dump(exclude_none=True)
    if encoding == "base64":
        for item in payload.get("data") or []:
            vector = np.asarray(item["embedding"], dtype="<f4")
            item["embedding"] = base64.b64encode(vector.tobytes()).decode()
    return json.dumps(payload, ensure_ascii=False).encode()


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
