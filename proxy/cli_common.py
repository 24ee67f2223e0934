"""What every `moim` verb shares: the --config and --user options, the config, the layer."""

from __future__ import annotations

import os
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


def config_from(config_path: Path | None) -> Config:
    """The config (file, then environment); a bad one is a clean CLI error, not a traceback."""
    try:
        return load_config(config_path, os.environ)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from exc


def layer_from(config: Config) -> Any:
    """The memory layer (imported here: `moim --help` need not load it).

    A store that cannot be opened or migrated is a clean CLI error, not a traceback.
    """
    from memory import MemoryLayer, MemoryLayerError

    try:
        return MemoryLayer(config.memory)
    except MemoryLayerError as exc:
        raise click.ClickException(str(exc)) from exc


def check_db_directory(config: Config) -> None:
    """Refuse a database whose directory does not exist, before `moim serve` starts.

    The store is opened in the server's lifespan, where uvicorn would report this as a
    traceback and exit 3.
    """
    directory = config.db_path.parent
    if not directory.is_dir():
        raise click.ClickException(
            f"db: cannot create {config.db_path}: no such directory {directory}"
        )
