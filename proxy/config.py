"""Configuration: one frozen `Config`, built once at startup.

Precedence: built-in defaults, then `config.yaml` (from `--config`, `MOIM_CONFIG`, or
`./config.yaml` when present), then the `MOIM_*` environment variables of CONTRACT.md.
Types are checked here, and a bad value names its key; so does a key moim does not know
(`proxy/config_reader.py`), with a near miss when there is one. Nothing else in moim reads the
environment; tests construct `Config(...)` directly.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from memory import Settings, TierRule, tier_rules_from_config
from proxy.config_embedder import EmbedderConfig as EmbedderConfig  # re-exported: in Config
from proxy.config_embedder import embedder_config, embedder_env
from proxy.config_keys import ProxyKey as ProxyKey  # re-exported: part of Config
from proxy.config_keys import env_keys, proxy_keys
from proxy.config_reader import ConfigError as ConfigError  # re-exported: load_config raises it
from proxy.config_reader import (
    Section,
    above_zero,
    at_least,
    http_url,
    integer,
    not_negative,
    seconds_from_env,
    typed,
    unknown_keys,
    within,
)

# The inspector's cookie secret, when configured, is at least this long (HMAC-SHA256's key).
MIN_SECRET_LENGTH = 32
# `server.max_body_bytes`: a body moim reads (a request, a reply it stores, an embedding answer).
MAX_BODY_BYTES = 32 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class ModelRoute:
    """Where one model name goes: an OpenAI-compatible base URL, or litellm."""

    model: str
    api_base: str | None = None
    api_key: str | None = None
    openai_compatible: bool = False


@dataclass(frozen=True, slots=True)
class InspectorConfig:
    """The web inspector at `/ui` (proxy/inspector/)."""

    enabled: bool = True
    # Requests kept per user for "why this block", in RAM; 0 records none.
    history: int = 10
    # Without proxy keys, answer clients beyond loopback too.
    allow_remote: bool = False
    # Signs the login cookie (HMAC-SHA256); None: a random one per process, so a restart (or
    # another replica) asks to log in again.
    secret: str | None = None


@dataclass(frozen=True, slots=True)
class Config:
    host: str = "127.0.0.1"
    port: int = 8080
    upstream_base_url: str | None = None
    upstream_api_key: str | None = None
    connect_timeout: float = 10.0
    # Completions can think for minutes before the first byte: httpx's 5 s default cuts them.
    read_timeout: float = 600.0
    memory_enabled: bool = True
    memory_tools: bool = False
    # Chat UIs' background tasks (a title, tags: `memory.ui_task`) pass through without memory.
    skip_ui_tasks: bool = True
    # Seconds a request that reads memory waits for its user's finished turns of other
    # conversations to become searchable (proxy/writer_recent.py); 0 never waits.
    recall_wait: float = 5.0
    memory: Settings = field(default_factory=Settings)
    routes: Mapping[str, ModelRoute] = field(default_factory=dict)
    keys: tuple[ProxyKey, ...] = ()
    refuse_open_bind: bool = False
    # With proxy keys, pass-through endpoints that hold the provider account's shared state
    # (files, batches, fine-tuning, vector stores, …) need an admin key unless this is true.
    account_endpoints_for_all_keys: bool = False
    # With proxy keys, /metrics needs an admin or metrics key; true opens it to anyone.
    metrics_public: bool = False
    max_body_bytes: int = MAX_BODY_BYTES
    max_messages: int = 10_000
    max_header_bytes: int = 16 * 1024
    # A request's head must arrive within header_timeout seconds; its body must not stall
    # for body_timeout seconds nor fall behind 1 KiB/s (proxy/serving.py, proxy/limits.py).
    header_timeout: float = 10.0
    body_timeout: float = 20.0
    # An idle kept-alive connection is closed after this many seconds: longer than a load
    # balancer keeps its own idle connections to moim (AWS ALB 60 s, nginx 60 s), else the
    # balancer reuses one just as moim closes it and answers 502 (proxy/serving.py).
    keep_alive_timeout: float = 75.0
    # A stop (SIGTERM) ends within this many seconds of the signal: replies under way are
    # cut at it, and turns not yet stored stay in the journal for the next start. Below
    # Kubernetes' 30 s grace period, so a pod is not killed while storing.
    shutdown_timeout: float = 25.0
    ingest_queue_size: int = 10_000
    # The optional consolidation schedule (proxy/consolidate.py): no model, no schedule.
    consolidation_model: str | None = None
    consolidation_every_minutes: float = 60.0
    consolidation_min_new_turns: int = 10  # a user is due after this many new turns
    consolidation_turns: int = 40  # user and assistant messages the model reads per call
    inspector: InspectorConfig = field(default_factory=InspectorConfig)
    # None: the bundled embedding model (`memory.embedding_model`), offline.
    embedder: EmbedderConfig | None = None
    # `journal:` / MOIM_JOURNAL; None: `<db>.journal` beside the SQLite file (with Postgres,
    # `./moim.db.journal` in the working directory).
    journal: Path | None = None

    @property
    def db_path(self) -> Path:
        return self.memory.db_path

    @property
    def journal_path(self) -> Path:
        """The journal of finished turns not yet stored (with Postgres, where turns wait
        while it is unreachable): `journal`, else beside the database."""
        return self.journal or Path(f"{self.db_path}.journal")


def load_config(path: Path | None, env: Mapping[str, str]) -> Config:
    """Defaults, then the YAML file, then environment overrides."""
    if path is None and env.get("MOIM_CONFIG"):
        path = Path(env["MOIM_CONFIG"])
    if path is None and Path("config.yaml").exists():
        path = Path("config.yaml")
    data: dict[str, Any] = {}
    if path is not None:
        try:
            loaded = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            raise ConfigError(f"cannot read config {path}: {exc}") from exc
        if loaded is not None and not isinstance(loaded, dict):
            raise ConfigError(f"{path}: top level must be a mapping")
        data = loaded or {}
    try:
        config = from_mapping(data)
    except ConfigError as exc:  # which file was read is not always plain (MOIM_CONFIG, ./)
        exc.file = Path(path).resolve() if path is not None else None
        raise
    return apply_env(config, env)


def from_mapping(yaml_data: Mapping[str, Any]) -> Config:
    """A `Config` from parsed YAML (see the commented `config.yaml` for every key).

    Every key is read through a `Section`, so once all are read any key nothing asked for is
    refused, by its path.
    """
    data = Section(yaml_data)
    server = _section(data, "server")
    upstream = _section(data, "upstream")
    mem = _section(data, "memory")
    auth = _section(data, "auth")
    windows = _section(data, "context_windows")
    schedule = _section(data, "consolidation")
    defaults = Settings()
    settings = Settings(
        **database_fields(typed(data, "db", str, "moim.db")),
        busy_timeout=above_zero(mem, "memory.", "busy_timeout", defaults.busy_timeout),
        index_slice_chunks=at_least(
            mem, "memory.", "index_slice_chunks", defaults.index_slice_chunks, 1
        ),
        embedding_model=typed(mem, "embedding_model", str, defaults.embedding_model, "memory."),
        vector_search=_choice(mem, "vector_search", ("ram", "db"), "ram"),
        lexical_index=_choice(mem, "lexical_index", ("tantivy", "fts5"), "tantivy"),
        fusion=_choice(mem, "fusion", ("scores", "rrf"), defaults.fusion),
        placement=_choice(mem, "placement", ("system", "before_last_user"), defaults.placement),
        min_similarity=typed(mem, "min_similarity", float, defaults.min_similarity, "memory."),
        min_standout=typed(mem, "min_standout", float, defaults.min_standout, "memory."),
        min_answerable=typed(mem, "min_answerable", float, defaults.min_answerable, "memory."),
        excerpt_min_similarity=typed(
            mem, "excerpt_min_similarity", float, defaults.excerpt_min_similarity, "memory."
        ),
        expansion_similarity=typed(
            mem, "expansion_similarity", float, defaults.expansion_similarity, "memory."
        ),
        later_similarity=typed(
            mem, "later_similarity", float, defaults.later_similarity, "memory."
        ),
        recency_half_life_days=typed(
            mem, "recency_half_life_days", float, defaults.recency_half_life_days, "memory."
        ),
        facts_max_tokens=typed(mem, "facts_max_tokens", int, defaults.facts_max_tokens, "memory."),
        capture_facts=typed(mem, "capture_facts", bool, True, "memory."),
        context_windows={str(k): _window(v, f"context_windows.{k}") for k, v in windows.items()},
    )
    if "tiers" in mem:
        settings = replace(settings, tier_rules=_tier_rules(mem))
    config = Config(
        host=typed(server, "host", str, "127.0.0.1", "server."),
        port=at_least(server, "server.", "port", 8080, 1, 65535),
        upstream_base_url=http_url(
            typed(upstream, "base_url", str, None, "upstream."), "upstream.base_url"
        ),
        upstream_api_key=typed(upstream, "api_key", str, None, "upstream."),
        connect_timeout=above_zero(upstream, "upstream.", "connect_timeout", 10.0),
        read_timeout=above_zero(upstream, "upstream.", "read_timeout", 600.0),
        memory_enabled=typed(mem, "enabled", bool, True, "memory."),
        memory_tools=typed(mem, "tools", bool, False, "memory."),
        skip_ui_tasks=typed(mem, "skip_ui_tasks", bool, True, "memory."),
        recall_wait=not_negative(mem, "memory.", "recall_wait", 5.0),
        memory=settings,
        routes=_routes(_section(data, "models")),
        keys=proxy_keys(auth),
        refuse_open_bind=typed(auth, "refuse_open_bind", bool, False, "auth."),
        account_endpoints_for_all_keys=typed(
            auth, "account_endpoints_for_all_keys", bool, False, "auth."
        ),
        metrics_public=typed(server, "metrics_public", bool, False, "server."),
        max_body_bytes=at_least(server, "server.", "max_body_bytes", MAX_BODY_BYTES, 1),
        max_messages=at_least(server, "server.", "max_messages", 10_000, 1),
        max_header_bytes=at_least(server, "server.", "max_header_bytes", 16 * 1024, 1),
        header_timeout=above_zero(server, "server.", "header_timeout", 10.0),
        body_timeout=above_zero(server, "server.", "body_timeout", 20.0),
        keep_alive_timeout=above_zero(server, "server.", "keep_alive_timeout", 75.0),
        shutdown_timeout=above_zero(server, "server.", "shutdown_timeout", 25.0),
        ingest_queue_size=at_least(mem, "memory.", "ingest_queue_size", 10_000, 1),
        **_consolidation(schedule),
        inspector=_inspector(_section(data, "inspector")),
        embedder=embedder_config(mem),
        journal=_journal(typed(data, "journal", str, None)),
    )
    _refuse_unknown(data)
    return config


def apply_env(config: Config, env: Mapping[str, str]) -> Config:
    """The CONTRACT's environment overrides; each beats config.yaml."""
    changes: dict[str, Any] = {}
    if env.get("MOIM_HOST"):
        changes["host"] = env["MOIM_HOST"]
    if env.get("MOIM_PORT"):
        changes["port"] = within(integer(env["MOIM_PORT"], "MOIM_PORT"), "MOIM_PORT", 1, 65535)
    if env.get("MOIM_KEEP_ALIVE_TIMEOUT"):
        changes["keep_alive_timeout"] = seconds_from_env(
            env["MOIM_KEEP_ALIVE_TIMEOUT"], "MOIM_KEEP_ALIVE_TIMEOUT"
        )
    if env.get("MOIM_SHUTDOWN_TIMEOUT"):
        changes["shutdown_timeout"] = seconds_from_env(
            env["MOIM_SHUTDOWN_TIMEOUT"], "MOIM_SHUTDOWN_TIMEOUT"
        )
    if env.get("MOIM_UPSTREAM_BASE_URL"):
        changes["upstream_base_url"] = http_url(
            env["MOIM_UPSTREAM_BASE_URL"], "MOIM_UPSTREAM_BASE_URL"
        )
    if env.get("MOIM_UPSTREAM_API_KEY"):
        changes["upstream_api_key"] = env["MOIM_UPSTREAM_API_KEY"]
    if env.get("MOIM_MEMORY"):
        value = env["MOIM_MEMORY"].strip().lower()
        if value not in ("on", "off"):
            raise ConfigError("MOIM_MEMORY must be 'on' or 'off'")
        changes["memory_enabled"] = value == "on"
    if env.get("MOIM_JOURNAL"):
        changes["journal"] = _journal(env["MOIM_JOURNAL"])
    if env.get("MOIM_CONSOLIDATION_MODEL"):
        changes["consolidation_model"] = env["MOIM_CONSOLIDATION_MODEL"]
    if env.get("MOIM_PROXY_KEYS") or env.get("MOIM_PROXY_KEYS_FILE"):
        changes["keys"] = env_keys(config.keys, env)
    embedder = embedder_env(config.embedder, env)
    if embedder is not config.embedder:
        changes["embedder"] = embedder
    config = replace(config, **changes)
    if env.get("MOIM_DB"):
        config = replace(
            config, memory=replace(config.memory, **database_fields(env["MOIM_DB"], "MOIM_DB"))
        )
    return config


def database_fields(target: str, name: str = "db") -> dict[str, Any]:
    """Settings fields for `db:` / MOIM_DB / `moim memory copy`: a SQLite path (or
    `sqlite:///path`, as `moim memory copy` takes it), or a Postgres URL; another
    `scheme://` is refused by `name` (without the URL: it may hold a password).

    With Postgres, `db_path` stays the default and names the local journal file beside the
    working directory (turns wait there while the database is unreachable).
    """
    if target.startswith(("postgresql://", "postgres://")):
        return {"db_url": target, "db_path": Path("moim.db")}
    path = target.removeprefix("sqlite://")
    if path in ("", ":memory:"):
        # SQLite gives each connection its own empty in-memory database: the writer's thread
        # would store into one, recall read another, and everything go at the stop
        raise ConfigError(
            f"{name}: {path or 'an empty path'} cannot hold moim's memory: give a SQLite file's "
            "path (a temporary directory's for a throwaway store) or a postgresql:// URL"
        )
    if target.startswith("sqlite://"):
        return {"db_path": Path(path), "db_url": None}
    if (scheme := _URL_SCHEME.match(target)) is not None:
        raise ConfigError(
            f"{name}: {scheme[0]} is not a store moim knows: give a SQLite file's path "
            "(or sqlite:///path) or a postgresql:// URL"
        )
    return {"db_path": Path(target), "db_url": None}


_URL_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def _journal(value: str | None) -> Path | None:
    """`journal:` / MOIM_JOURNAL: the journal file's path, None when unset or blank."""
    return Path(value) if value and value.strip() else None


def _section(data: Section, key: str) -> Section:
    value = data.get(key)
    if value is None:
        value = {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"{key}: must be a mapping")
    return data.child(value, key)


def _refuse_unknown(section: Section) -> None:
    """Refuse the keys of `section` (and of its children) that nothing asked for."""
    unknown = unknown_keys(section)
    if unknown:
        raise ConfigError("\n".join(unknown))


def _tier_rules(mem: Section) -> tuple[TierRule, ...]:
    """`memory.tiers`; a row's unknown key is named before the rows are judged."""
    rows = mem["tiers"]
    for index, row in enumerate(rows if isinstance(rows, list) else []):
        if isinstance(row, Mapping):
            section = mem.child(row, f"tiers[{index}]")
            section.expect("below", "excerpts", "chars")  # memory/budget.py reads them
            _refuse_unknown(section)
    try:
        return tier_rules_from_config(rows)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"memory.tiers: {exc}") from exc


def _choice(data: Mapping[str, Any], key: str, options: tuple[str, ...], default: str) -> Any:
    value = data.get(key, default)
    if value not in options:
        raise ConfigError(f"memory.{key}: expected one of {', '.join(options)}, got {value!r}")
    return value


def _consolidation(schedule: Mapping[str, Any]) -> dict[str, Any]:
    """The `consolidation:` section as `Config` fields; bounds checked, the key named."""
    prefix = "consolidation."
    return {
        "consolidation_model": typed(schedule, "model", str, None, prefix) or None,
        "consolidation_every_minutes": above_zero(schedule, prefix, "every_minutes", 60.0),
        "consolidation_min_new_turns": at_least(schedule, prefix, "min_new_turns", 10, 1),
        "consolidation_turns": at_least(schedule, prefix, "turns", 40, 1, 1000),
    }


def _inspector(section: Mapping[str, Any]) -> InspectorConfig:
    """The `inspector:` section; a short secret is refused (its value is never shown)."""
    prefix = "inspector."
    secret = typed(section, "secret", str, None, prefix)
    if secret is not None and len(secret) < MIN_SECRET_LENGTH:
        raise ConfigError(f"inspector.secret: must be at least {MIN_SECRET_LENGTH} characters")
    return InspectorConfig(
        enabled=typed(section, "enabled", bool, True, prefix),
        history=at_least(section, prefix, "history", 10, 0, 1000),
        allow_remote=typed(section, "allow_remote", bool, False, prefix),
        secret=secret,
    )


def _window(value: Any, name: str) -> int:
    """A model's context window in tokens: 0 or less would make every request look full."""
    return within(integer(value, name), name, 1)


def _routes(models: Section) -> dict[str, ModelRoute]:
    routes = {}
    for name, spec in models.items():
        if isinstance(spec, str):
            spec = {"model": spec}
        if not isinstance(spec, Mapping) or not isinstance(spec.get("model"), str):
            raise ConfigError(f"models.{name}: expected a mapping with a 'model' string")
        spec = models.child(spec, str(name))
        routes[str(name)] = ModelRoute(
            model=spec["model"],
            api_base=typed(spec, "api_base", str, None, f"models.{name}."),
            api_key=typed(spec, "api_key", str, None, f"models.{name}."),
            openai_compatible=typed(spec, "openai_compatible", bool, False, f"models.{name}."),
        )
    return routes
