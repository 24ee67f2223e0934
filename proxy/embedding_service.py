"""The embedding model as a service: `memory.embedder` in config.yaml, called over HTTP.

The memory layer embeds through an `EmbeddingService` (memory/service_embedder.py) and knows
no HTTP; this module is that call, in two kinds:

- `OpenAIEmbeddings`: `POST {api_base}/embeddings` with httpx, for any OpenAI-compatible
  server (vLLM, Ollama's `/v1`, LM Studio, text-embeddings-inference, LiteLLM's proxy, a
  provider's own `/v1`);
- `LitellmEmbeddings`: `litellm.embedding` for a `provider/model` name (`openai/…`,
  `cohere/…`, `voyage/…`, `bedrock/…`, …), imported on first use.

Both take every parameter from config (model, address, key, `dimensions`): nothing of a
client's request reaches them but the text to embed. A query (on the request path) gets one
try within `query_timeout`; a batch of documents (the writer's) gets `timeout` per try and
`retries` more tries, 0.5 s, 1 s, 2 s … apart (a `Retry-After` of at most 30 s is honoured),
when the failure may pass: no answer, 408, 409, 429 or 5xx. Any other answer fails at once,
and so does one longer than `server.max_body_bytes` (read no further: a service gone wrong
cannot fill moim's memory). Failures are EmbeddingFailed, whose message names the status or
the error's kind, never the key (a server's own message is kept with the key cut out).

`embedder_factory(config)` is what `MemoryLayer` is given: the bundled model without
`memory.embedder`, else a `ServiceEmbedder` over one of these.
"""

from __future__ import annotations

import base64
import json
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

import httpx
import numpy as np

from memory import (
    Embedder,
    EmbeddingFailed,
    FastEmbedder,
    ServiceEmbedder,
    Settings,
    redact_url,
)
from proxy.config import MAX_BODY_BYTES, Config, EmbedderConfig
from proxy.errors import error_object
from proxy.upstream import LITELLM_PREFIXES, load_litellm

logger = logging.getLogger(__name__)

# Statuses worth another try: the service is busy or failing for now.
RETRIED = frozenset({408, 409, 429, 500, 502, 503, 504})
_FIRST_PAUSE = 0.5  # seconds before the first retry, doubling
_MAX_RETRY_AFTER = 30.0
_MESSAGE_CHARS = 200


def embedder_factory(config: Config) -> Callable[[Settings], Embedder]:
    """What `MemoryLayer(embedder_factory=…)` takes for this config."""
    chosen = config.embedder
    if chosen is None:
        return lambda settings: FastEmbedder(
            settings.embedding_model, settings.embedding_batch_size, settings.embedding_threads
        )
    limit = config.max_body_bytes
    return lambda _settings: service_embedder(chosen, limit)


def service_embedder(
    config: EmbedderConfig, max_body_bytes: int = MAX_BODY_BYTES
) -> ServiceEmbedder:
    """A `ServiceEmbedder` over the service `config` names (asked for its width now unless
    `dimensions` is set); an answer over `max_body_bytes` is a failure."""
    if through_http(config):
        service: OpenAIEmbeddings | LitellmEmbeddings = OpenAIEmbeddings(config, max_body_bytes)
    else:
        service = LitellmEmbeddings(config)
    return ServiceEmbedder(
        config.model,
        service,
        dim=config.dimensions,
        batch_size=config.batch_size,
        query_prefix=config.query_prefix,
        document_prefix=config.document_prefix,
    )


def through_http(config: EmbedderConfig) -> bool:
    """True when the model is called at `api_base` directly: an address is set and the name
    is not one of litellm's `provider/…` (which litellm must translate, e.g. Ollama's own API)."""
    prefix = config.model.split("/", 1)[0] if "/" in config.model else None
    return config.api_base is not None and prefix not in LITELLM_PREFIXES


class _Retrying:
    """The tries of one call: a query once, documents `retries` more times with backoff."""

    def __init__(self, config: EmbedderConfig) -> None:
        self.config = config

    def attempts(self, kind: str) -> int:
        return 1 if kind == "query" else 1 + self.config.retries

    def timeout(self, kind: str) -> float:
        return self.config.query_timeout if kind == "query" else self.config.timeout

    def pause(self, attempt: int, retry_after: float | None = None) -> None:
        wait = _FIRST_PAUSE * 2**attempt
        if retry_after is not None:
            wait = max(wait, min(retry_after, _MAX_RETRY_AFTER))
        time.sleep(wait)

    def clean(self, text: str) -> str:
        """A message for logs and headers: one line, short, without the key."""
        line = " ".join(text.split())[:_MESSAGE_CHARS]
        key = self.config.api_key
        return line.replace(key, "***") if key else line


class OpenAIEmbeddings(_Retrying):
    """`POST {api_base}/embeddings`, OpenAI's request and answer, over a pooled httpx client."""

    def __init__(self, config: EmbedderConfig, max_body_bytes: int = MAX_BODY_BYTES) -> None:
        super().__init__(config)
        assert config.api_base is not None
        self._limit = max_body_bytes
        self._url = config.api_base.rstrip("/") + "/embeddings"
        self._headers = {"content-type": "application/json"}
        if config.api_key:
            self._headers["authorization"] = f"Bearer {config.api_key}"
        self._client = httpx.Client(
            timeout=httpx.Timeout(config.timeout, connect=min(config.timeout, 5.0)),
            limits=httpx.Limits(max_connections=16, max_keepalive_connections=8),
        )

    def close(self) -> None:
        """Close the pooled connections."""
        self._client.close()

    def __call__(self, texts: Sequence[str], kind: str) -> list[list[float]]:
        body: dict[str, Any] = {"model": self.config.model, "input": list(texts)}
        if self.config.dimensions is not None:
            body["dimensions"] = self.config.dimensions
        why, retry_after = "no attempt", None
        for attempt in range(self.attempts(kind)):
            if attempt:
                self.pause(attempt - 1, retry_after)
            retry_after = None
            try:
                with self._client.stream(
                    "POST", self._url, json=body, headers=self._headers, timeout=self.timeout(kind)
                ) as response:
                    content = _at_most(response, self._limit)
            except httpx.HTTPError as exc:
                why = f"no answer ({type(exc).__name__})"
                continue
            if content is None:
                over = f"over {self._limit} bytes (server.max_body_bytes)"
                why = f"status {response.status_code}, {over}"
                break
            if response.status_code == 200:
                return _rows(content, len(texts))
            why = f"status {response.status_code}: {self.clean(_error_message(content))}"
            if response.status_code not in RETRIED:
                break
            retry_after = _retry_after(response)
        raise EmbeddingFailed(f"embedding service at {redact_url(self._url)}: {why}")


class LitellmEmbeddings(_Retrying):
    """`litellm.embedding` for a `provider/model` name, its address and key from config."""

    def __call__(self, texts: Sequence[str], kind: str) -> list[list[float]]:
        litellm = load_litellm()
        params: dict[str, Any] = {"model": self.config.model, "input": list(texts)}
        if self.config.api_base:
            params["api_base"] = self.config.api_base
        if self.config.api_key:
            params["api_key"] = self.config.api_key
        if self.config.dimensions is not None:
            params["dimensions"] = self.config.dimensions
        why = "no attempt"
        for attempt in range(self.attempts(kind)):
            if attempt:
                self.pause(attempt - 1)
            try:
                response = litellm.embedding(**params, timeout=self.timeout(kind))
            except Exception as exc:  # litellm maps every provider error onto its own classes
                status = getattr(exc, "status_code", None)
                why = f"{type(exc).__name__}: {self.clean(str(exc))}"
                if isinstance(status, int) and status < 500 and status not in RETRIED:
                    break
                continue
            items = sorted(response.model_dump()["data"], key=lambda item: item["index"])
            return [_vector(item["embedding"]) for item in items]
        raise EmbeddingFailed(f"embedding model {self.config.model} (litellm): {why}")


def _at_most(response: httpx.Response, limit: int) -> bytes | None:
    """The body of `response`, or None past `limit` bytes (the rest is not read)."""
    held = bytearray()
    for piece in response.iter_bytes():
        held += piece
        if len(held) > limit:
            return None
    return bytes(held)


def _rows(content: bytes, count: int) -> list[list[float]]:
    """The vectors of an OpenAI embeddings answer, in input order."""
    try:
        data = json.loads(content)["data"]
        items = sorted(data, key=lambda item: int(item["index"]))
        rows = [_vector(item["embedding"]) for item in items]
    except (ValueError, KeyError, TypeError) as exc:
        raise EmbeddingFailed(f"the embedding service's answer is not OpenAI's: {exc!r}") from exc
    if len(rows) != count:
        raise EmbeddingFailed(f"the embedding service sent {len(rows)} vectors for {count} texts")
    return rows


def _vector(embedding: Any) -> list[float]:
    """A vector as floats, or as base64 little-endian float32 (OpenAI's `base64` format)."""
    if isinstance(embedding, str):
        return [float(x) for x in np.frombuffer(base64.b64decode(embedding), dtype="<f4")]
    return [float(x) for x in embedding]


def _error_message(content: bytes) -> str:
    """The message of the service's error object (`proxy.errors.error_object`), else its body."""
    error = error_object(content)
    if error is not None and isinstance(error.get("message"), str):
        return str(error["message"])
    return str(error) if error else content.decode("utf-8", "replace")


def _retry_after(response: httpx.Response) -> float | None:
    try:
        return float(response.headers.get("retry-after", ""))
    except ValueError:
        return None
