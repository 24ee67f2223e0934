"""The `moim` command: thin verbs over the library.

    moim serve [--config PATH] [--host H] [--port P]
    moim migrate | reindex | stats --user U
    moim memory stats|export|import|delete --user U
"""

from __future__ import annotations

import ipaddress
import json
import logging
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from proxy.config import Config, ConfigError, load_config

CONFIG_OPTION = click.option(
    "--config", "config_path", type=click.Path(path_type=Path), default=None,
    help="config.yaml to read (default: $MOIM_CONFIG, else ./config.yaml if present).",
)
USER_OPTION = click.option("--user", "user_id", default="default", show_default=True,
                           help="The memory namespace (user id).")


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

    config = _config(config_path)
    config = replace(config, host=host or config.host, port=port or config.port)
    if not _is_loopback(config.host) and not config.keys:
        if config.refuse_open_bind:
            raise click.ClickException(
                f"refusing to bind {config.host} without proxy keys (auth.refuse_open_bind)")
        click.secho(
            f"WARNING: moim is listening on {config.host} with no proxy keys: anyone who can "
            "reach this port can read and write every user's memory. Set auth.keys.",
            fg="red", err=True, bold=True,
        )
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s")
    click.echo(f"moim on http://{config.host}:{config.port}/v1  (db {config.db_path})", err=True)
    uvicorn.run(build_app(config), host=config.host, port=config.port, log_level=log_level,
                access_log=False)


@main.command()
@CONFIG_OPTION
def migrate(config_path: Path | None) -> None:
    """Create or upgrade the database schema."""
    from memory.store import Store

    config = _config(config_path)
    Store(config.db_path)
    click.echo(f"{config.db_path}: schema up to date")


@main.command()
@CONFIG_OPTION
def reindex(config_path: Path | None) -> None:
    """Rebuild chunks, full-text and vector indexes from the stored messages."""
    layer = _layer(_config(config_path))
    layer.embedder  # load before the bar starts
    with click.progressbar(length=max(1, layer.store.count_unindexed() or
                                      len(layer.store.read("SELECT id FROM messages"))),
                           label="re-indexing messages") as bar:
        last = [0]

        def progress(done: int, total: int) -> None:
            bar.length = max(total, 1)
            bar.update(done - last[0])
            last[0] = done

        done = layer.reindex(progress)
    click.echo(f"re-indexed {done} messages")


@main.command()
@CONFIG_OPTION
@USER_OPTION
def stats(config_path: Path | None, user_id: str) -> None:
    """Counts of one user's stored memory."""
    counts = _layer(_config(config_path)).stats(user_id)
    click.echo(json.dumps({"user_id": user_id, "messages": counts.messages, "chunks": counts.chunks,
                           "facts": counts.facts, "sessions": counts.sessions}))


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


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
