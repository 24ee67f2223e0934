"""The `moim` command: thin verbs over the library.

moim serve [--config PATH] [--host H] [--port P]
moim migrate | reindex | stats --user U
moim memory stats|export|import|delete --user U
moim facts list|set|delete|history|pin|unpin --user U
moim consolidate [--user U] [--model M] [--turns N]
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import os
import sys
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import click

from proxy.config import Config, ConfigError, load_config

CONFIG_OPTION = click.option(
    "--config",
    "config_path",
    type=click.Path(path_type=Path),
    default=None,
    help="config.yaml to read (default: $MOIM_CONFIG, else ./config.yaml if present).",
)
USER_OPTION = click.option(
    "--user",
    "user_id",
    default="default",
    show_default=True,
    help="The memory namespace (user id).",
)


def _config(config_path: Path | None) -> Config:
    try:
        return load_config(config_path, os.environ)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from exc


def _layer(config: Config) -> Any:
    from memory import MemoryLayer

    return MemoryLayer(config.memory)


@click.group()
@click.version_option(package_name="moim")
def main() -> None:
    """moim: long-term memory for any OpenAI-compatible LLM application."""


@main.command()
@CONFIG_OPTION
@click.option("--host", default=None, help="Address to bind (default 127.0.0.1).")
@click.option("--port", type=int, default=None, help="Port to bind (default 8080).")
@click.option("--log-level", default="info", show_default=True, help="Python log level.")
def serve(config_path: Path | None, host: str | None, port: int | None, log_level: str) -> None:
    """Start the proxy."""
    import uvicorn

    from proxy.app import build_app
    from proxy.limits import parser_limit

    config = _config(config_path)
    config = replace(config, host=host or config.host, port=port or config.port)
    if not _is_loopback(config.host) and not config.keys:
        if config.refuse_open_bind:
            raise click.ClickException(
                f"refusing to bind {config.host} without proxy keys (auth.refuse_open_bind)"
            )
        click.secho(
            f"WARNING: moim is listening on {config.host} with no proxy keys: anyone who can "
            "reach this port can read and write every user's memory. Set auth.keys.",
            fg="red",
            err=True,
            bold=True,
        )
    logging.basicConfig(
        level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s"
    )
    click.echo(f"moim on http://{config.host}:{config.port}/v1  (db {config.db_path})", err=True)
    uvicorn.run(
        build_app(config),
        host=config.host,
        port=config.port,
        log_level=log_level,
        access_log=False,
        h11_max_incomplete_event_size=parser_limit(config.max_header_bytes),
    )


@main.command()
@CONFIG_OPTION
def migrate(config_path: Path | None) -> None:
    """Create or upgrade the database schema."""
    config = _config(config_path)
    _layer(config)  # opening the store applies pending migrations
    click.echo(f"{config.db_path}: schema up to date")


@main.command()
@CONFIG_OPTION
def reindex(config_path: Path | None) -> None:
    """Rebuild chunks, full-text and vector indexes from the stored messages."""
    layer = _layer(_config(config_path))
    _ = layer.embedder  # load the model before the bar starts
    bar: Any = None

    def progress(done: int, total: int) -> None:
        nonlocal bar
        if bar is None:
            bar = click.progressbar(length=max(total, 1), label="re-indexing messages")
            bar.__enter__()
        bar.update(done - bar.pos)

    done = layer.reindex(progress)
    if bar is not None:
        bar.__exit__(None, None, None)
    click.echo(f"re-indexed {done} messages")


@main.command()
@CONFIG_OPTION
@USER_OPTION
def stats(config_path: Path | None, user_id: str) -> None:
    """Counts of one user's stored memory."""
    counts = _layer(_config(config_path)).stats(user_id)
    click.echo(
        json.dumps(
            {
                "user_id": user_id,
                "messages": counts.messages,
                "chunks": counts.chunks,
                "facts": counts.facts,
                "sessions": counts.sessions,
            }
        )
    )


@main.group()
def memory() -> None:
    """Inspect, export, import or delete one user's memory."""


memory.add_command(stats, "stats")


@memory.command("export")
@CONFIG_OPTION
@USER_OPTION
def export_(config_path: Path | None, user_id: str) -> None:
    """Write the user's messages and facts as JSONL to standard output."""
    for item in _layer(_config(config_path)).export(user_id):
        click.echo(json.dumps(item, ensure_ascii=False))


@memory.command("import")
@CONFIG_OPTION
@USER_OPTION
@click.argument("source", type=click.File("r", encoding="utf-8"), default="-")
def import_(config_path: Path | None, user_id: str, source: Any) -> None:
    """Read JSONL (as written by export) into the user's memory, and index it."""
    items = [json.loads(line) for line in source if line.strip()]
    added = _layer(_config(config_path)).import_(user_id, items)
    click.echo(f"imported {added} messages for {user_id}")


@memory.command("delete")
@CONFIG_OPTION
@USER_OPTION
@click.confirmation_option(prompt="Delete every message, chunk and fact of this user?")
def delete(config_path: Path | None, user_id: str) -> None:
    """Forget everything of one user."""
    removed = _layer(_config(config_path)).forget(user_id)
    click.echo(f"deleted {removed} messages of {user_id}")


@main.group()
def facts() -> None:
    """List, set, forget or pin one user's facts (semantic memory)."""


def _facts_call(config_path: Path | None, call: Callable[[Any], Any]) -> Any:
    """Run `call` on the memory layer; a bad key or value (ValueError) becomes a usage error."""
    layer = _layer(_config(config_path))
    try:
        return call(layer)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc


def _echo_facts(*found: Any) -> None:
    for fact in found:
        click.echo(json.dumps(asdict(fact), ensure_ascii=False))


def _current(fact: Any, key: str, user_id: str) -> Any:
    if fact is None:
        raise click.ClickException(f"no current fact {key!r} for user {user_id!r}")
    return fact


@facts.command("list")
@CONFIG_OPTION
@USER_OPTION
@click.option(
    "--status",
    type=click.Choice(["active", "superseded", "stale", "archived", "all"]),
    default="active",
    show_default=True,
    help="Which rows: current facts, or history.",
)
def facts_list(config_path: Path | None, user_id: str, status: str) -> None:
    """Print the user's facts, one JSON object per line, oldest first."""
    wanted = None if status == "all" else status
    _echo_facts(*_facts_call(config_path, lambda layer: layer.list_facts(user_id, wanted)))


@facts.command("set")
@CONFIG_OPTION
@USER_OPTION
@click.argument("key")
@click.argument("value")
@click.option(
    "--category",
    default=None,
    help="profile, preference, constraint, project, … (default: kept, or profile).",
)
@click.option(
    "--policy",
    type=click.Choice(["speak", "adapt", "avoid"]),
    default=None,
    help="speak it, use it silently, or avoid it (default: kept, or speak).",
)
@click.option("--pin/--no-pin", "pinned", default=None, help="Pinned facts never expire.")
@click.option(
    "--ttl",
    "ttl_seconds",
    type=float,
    default=None,
    help="Seconds until the fact goes stale (default: never).",
)
def facts_set(
    config_path: Path | None,
    user_id: str,
    key: str,
    value: str,
    category: str | None,
    policy: str | None,
    pinned: bool | None,
    ttl_seconds: float | None,
) -> None:
    """Set KEY to VALUE; a new value supersedes the old one, which stays in the history."""
    _echo_facts(
        _facts_call(
            config_path,
            lambda layer: layer.set_fact(
                user_id,
                key,
                value,
                category=category,
                policy=policy,
                pinned=pinned,
                ttl_seconds=ttl_seconds,
                source="cli",
            ),
        )
    )


@facts.command("delete")
@CONFIG_OPTION
@USER_OPTION
@click.argument("key")
def facts_delete(config_path: Path | None, user_id: str, key: str) -> None:
    """Forget KEY (or a fact id): the fact is archived, and kept in its history."""
    fact = _facts_call(config_path, lambda layer: layer.forget_fact(user_id, key))
    fact = _current(fact, key, user_id)
    click.echo(f"archived {fact.key} of {user_id}")


@facts.command("history")
@CONFIG_OPTION
@USER_OPTION
@click.argument("key")
def facts_history(config_path: Path | None, user_id: str, key: str) -> None:
    """Print every value KEY (or a fact id) ever had, oldest first, one JSON object per line."""
    found = _facts_call(config_path, lambda layer: layer.fact_history(user_id, key))
    if not found:
        raise click.ClickException(f"no fact {key!r} for user {user_id!r}")
    _echo_facts(*found)


@facts.command("pin")
@CONFIG_OPTION
@USER_OPTION
@click.argument("key")
def facts_pin(config_path: Path | None, user_id: str, key: str) -> None:
    """Pin KEY: it never expires and is the first fact in every block."""
    fact = _facts_call(config_path, lambda layer: layer.pin_fact(user_id, key, True))
    _echo_facts(_current(fact, key, user_id))


@facts.command("unpin")
@CONFIG_OPTION
@USER_OPTION
@click.argument("key")
def facts_unpin(config_path: Path | None, user_id: str, key: str) -> None:
    """Unpin KEY: its expiry applies again and it ranks like any other fact."""
    fact = _facts_call(config_path, lambda layer: layer.pin_fact(user_id, key, False))
    _echo_facts(_current(fact, key, user_id))


@main.command()
@CONFIG_OPTION
@click.option(
    "--user",
    "user_id",
    default=None,
    help="One user; without it, every user due (consolidation.min_new_turns new turns).",
)
@click.option(
    "--model",
    default=None,
    help="Model that proposes the operations: a models: alias, provider/model "
    "(litellm), or a model of the upstream URL (default: consolidation.model).",
)
@click.option(
    "--turns",
    type=click.IntRange(1, 1000),
    default=None,
    help="User and assistant messages the model reads per call: one --user's latest, or each "
    "due user's unread ones, all of them, this many at a time (default: consolidation.turns).",
)
def consolidate(
    config_path: Path | None, user_id: str | None, model: str | None, turns: int | None
) -> None:
    """Ask MODEL for fact operations from users' turns; apply what the gate passes.

    Off unless run (or scheduled: consolidation.model in config.yaml). A reply that is not the
    expected JSON changes nothing; operations under the write gate's thresholds, or
    near-duplicates of other facts, are skipped with a reason. Prints a JSON summary per model
    call (keys and counts, no fact values); a user whose model could not be reached stays due.
    """
    config = _config(config_path)
    model = model or config.consolidation_model
    if not model:
        raise click.UsageError("no model: pass --model or set consolidation.model")
    turns = turns or config.consolidation_turns
    if user_id is None:
        _consolidate_due(config, model, turns)
    else:
        _consolidate_user(config, user_id, model, turns)


def _consolidate_user(config: Config, user_id: str, model: str, turns: int) -> None:
    from proxy.consolidate import run_once
    from proxy.errors import UpstreamError

    try:
        report = asyncio.run(run_once(config, _layer(config), user_id, model, turns))
    except UpstreamError as exc:
        detail = exc.content.decode("utf-8", "replace")[:500]
        raise click.ClickException(f"{exc.message}: {detail}") from exc
    click.echo(json.dumps(report.summary(), ensure_ascii=False))


def _consolidate_due(config: Config, model: str, turns: int) -> None:
    from proxy.consolidation_schedule import run_due

    min_new_turns = config.consolidation_min_new_turns
    outcomes = asyncio.run(run_due(config, _layer(config), model, turns, min_new_turns))
    for outcome in outcomes:
        click.echo(json.dumps(outcome.summary(), ensure_ascii=False))
    failed = {outcome.user_id for outcome in outcomes if outcome.error is not None}
    if failed:  # one outcome per batch: count users
        due = len({outcome.user_id for outcome in outcomes})
        raise click.ClickException(f"{len(failed)} of {due} due users not consolidated")
    if not outcomes:
        click.echo(f"no user has {min_new_turns} new turns to consolidate", err=True)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
