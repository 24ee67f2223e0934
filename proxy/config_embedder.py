"""`memory.embedder` in config.yaml, and the MOIM_EMBEDDER_* variables over it: an embedding
model served elsewhere instead of the bundled one."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from proxy.config_reader import (
    ConfigError,
    Section,
    above_zero,
    at_least,
    http_url,
    typed,
    within,
)


@dataclass(frozen=True, slots=True)
class EmbedderConfig:
    """`memory.embedder`: an embedding model served elsewhere, instead of the bundled one
    (proxy/embedding_service.py calls it; memory/service_embedder.py uses it)."""

    # `provider/model` (litellm's names) goes through litellm; any other name is sent to
    # `api_base`, an OpenAI-compatible base URL (`…/v1`), with httpx.
    model: str
    api_base: str | None = None
    api_key: str | None = field(default=None, repr=False)
    # The vectors' width; sent as the request's `dimensions` (models that can shorten their
    # vectors take it). Unset: learned from a probe at start, so the service must answer then.
    dimensions: int | None = None
    batch_size: int = 64  # texts per call
    timeout: float = 30.0  # seconds per call from the writer, which retries
    query_timeout: float = 2.0  # seconds a request waits for its query's vector
    retries: int = 3  # more tries of a writer's call that failed for a reason that may pass
    query_prefix: str = ""  # put before each query (e5: "query: ")
    document_prefix: str = ""  # put before each chunk (e5: "passage: ")


def embedder_config(mem: Section) -> EmbedderConfig | None:
    """`memory.embedder`, or None (the bundled model) when absent."""
    if mem.get("embedder") is None:
        return None
    if not isinstance(mem["embedder"], Mapping):
        raise ConfigError("memory.embedder: must be a mapping (model, api_base, …)")
    section = mem.child(mem["embedder"], "embedder")
    prefix = "memory.embedder."
    model = typed(section, "model", str, None, prefix)
    if not model or not model.strip():
        raise ConfigError("memory.embedder.model: required (the embedding model's name)")
    dimensions = typed(section, "dimensions", int, None, prefix)
    if dimensions is not None:
        within(dimensions, prefix + "dimensions", 1, 65536)
    return EmbedderConfig(
        model=model.strip(),
        api_base=http_url(
            typed(section, "api_base", str, None, prefix) or None, prefix + "api_base"
        ),
        api_key=typed(section, "api_key", str, None, prefix) or None,
        dimensions=dimensions,
        batch_size=at_least(section, prefix, "batch_size", 64, 1, 2048),
        timeout=above_zero(section, prefix, "timeout", 30.0),
        query_timeout=above_zero(section, prefix, "query_timeout", 2.0),
        retries=at_least(section, prefix, "retries", 3, 0, 10),
        query_prefix=typed(section, "query_prefix", str, "", prefix),
        document_prefix=typed(section, "document_prefix", str, "", prefix),
    )


def embedder_env(embedder: EmbedderConfig | None, env: Mapping[str, str]) -> EmbedderConfig | None:
    """MOIM_EMBEDDER_MODEL, MOIM_EMBEDDER_API_BASE, MOIM_EMBEDDER_API_KEY over
    `memory.embedder` (the model names one when the file has none)."""
    changes: dict[str, Any] = {
        field: env[name].strip()
        for field, name in (
            ("model", "MOIM_EMBEDDER_MODEL"),
            ("api_base", "MOIM_EMBEDDER_API_BASE"),
            ("api_key", "MOIM_EMBEDDER_API_KEY"),
        )
        if env.get(name, "").strip()
    }
    if not changes:
        return embedder
    http_url(changes.get("api_base"), "MOIM_EMBEDDER_API_BASE")
    if embedder is None:
        if "model" not in changes:
            raise ConfigError(
                "MOIM_EMBEDDER_API_BASE and MOIM_EMBEDDER_API_KEY need a model: "
                "set MOIM_EMBEDDER_MODEL or memory.embedder.model"
            )
        return EmbedderConfig(**changes)
    return replace(embedder, **changes)
