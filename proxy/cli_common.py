"""What every `moim` verb shares: the --config, --user, --create and --json options, the
config, the memory layer over a database the command names on stderr and never creates
unasked, and progress bars on stderr."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
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


def namespace_given(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """--user's value as the namespace it names: a client's user id, encoded as a request's
    would be (`john smith`), or a namespace as `moim users` prints it (`~john%20smith`)."""
    from proxy.errors import BadRequest
    from proxy.identity import given_namespace

    if value is None:
        return None
    try:
        return given_namespace(value)
    except BadRequest as exc:
        raise click.BadParameter(exc.message) from exc


USER_OPTION = click.option(
    "--user",
    "user_id",
    default="default",
    show_default=True,
    callback=namespace_given,
    help="The user: the id a client sends, or a namespace as `moim users` prints it.",
)
CREATE_OPTION = click.option(
    "--create",
    is_flag=True,
    default=False,
    help="Start a new, empty database when none exists at the path (default: refuse).",
)
JSON_OPTION = click.option(
    "--json",
    "as_json",
    is_flag=True,
    default=False,
    help="Print JSON (one object a line) for scripts, instead of text for people.",
)
# Told (done, total) and, optionally, what is being worked on.
Progress = Callable[..., None]


@contextmanager
def progress_bar(label: str) -> Iterator[Progress]:
    """A `progress(done, total, item="")` callback drawing a bar on stderr: counts and ETA.

    Nothing is drawn when stderr is not a terminal (a script, a log file, a pipe), nor before
    the first call, so work that turns out to be quick shows nothing.
    """
    stream = sys.stderr
    bar: Any = None

    def progress(done: int, total: int, item: str = "") -> None:
        nonlocal bar
        if not stream.isatty():
            return
        if bar is None:
            bar = click.progressbar(
                length=max(total, 1),
                label=label,
                file=stream,
                show_pos=True,
                item_show_func=lambda shown: shown or None,
            )
            bar.current_item = item
            bar.__enter__()  # draws the bar at 0, with the item
        bar.update(max(0, done - bar.pos), item)

    try:
        yield progress
    finally:
        if bar is not None:
            bar.__exit__(None, None, None)


def config_from(config_path: Path | None) -> Config:
    """The config (file, then environment); a bad one is a clean CLI error, not a traceback."""
    try:
        return load_config(config_path, os.environ)
    except ConfigError as exc:
        raise click.ClickException(exc.shown()) from exc


def database_path(config: Config, create: bool | None = None) -> tuple[Path | str, bool]:
    """The database's absolute path and whether it exists; a missing one refused unless `create`.

    For Postgres, its URL with the password masked (the server says whether it exists).

    The path is relative to the working directory (`./moim.db` by default), so a command run
    from elsewhere would otherwise create and use a new, empty store without a word.
    `create` is None for a command without a --create option, False when it was not given.
    """
    if config.memory.db_url:
        from memory import redact_url

        return redact_url(config.memory.db_url), True
    path = config.db_path.resolve()
    existed = path.exists()
    if not existed and not create:
        hint = "; or pass --create to start an empty one" if create is False else ""
        raise click.ClickException(
            f"no database at {path}: run moim from the directory that holds it, or name it with "
            f"MOIM_DB or db: in config.yaml{hint}"
        )
    return path, existed


def announce_database(path: Path | str, existed: bool) -> None:
    """Say on stderr which database the command uses, and whether it was just created."""
    click.echo(f"moim: {'using' if existed else 'creating'} {path}", err=True)


def open_layer(config: Config, create: bool | None = None) -> Any:
    """The memory layer over the config's database (see `database_path`), named on stderr.

    A store that cannot be opened or migrated is a clean CLI error, not a traceback; the
    database is named once it is open, so such an error is the command's first line.
    """
    from memory import MemoryLayer, MemoryLayerError  # here: `moim --help` need not load it
    from proxy.embedding_service import embedder_factory

    path, existed = database_path(config, create)
    try:
        with progress_bar("upgrading the database") as progress:
            layer = MemoryLayer(config.memory, embedder_factory(config), on_migration=progress)
    except MemoryLayerError as exc:
        raise click.ClickException(str(exc)) from exc
    announce_database(path, existed)
    if existed and layer.migrations_applied:  # else unsaid without a terminal's bar
        click.echo(f"moim: migrated the schema: {', '.join(layer.migrations_applied)}", err=True)
    context = click.get_current_context(silent=True)
    if context is not None:  # Postgres: the pool's threads end with the command
        context.call_on_close(layer.close)
    return layer


def hold_journal(config: Config) -> Any:
    """The lock on the journal `moim serve` appends turns to, taken before the store is
    opened: another moim serving the same journal is then one clear line, exit status 1,
    before this one touches the database (the app's startup would report it as a traceback,
    exit 3). The layer's `open_journal` is given it."""
    from memory import JournalLock, MemoryLayerError

    try:
        if config.journal is None:  # beside the database: another directory is another journal
            return JournalLock(config.journal_path)
        # Named (MOIM_JOURNAL, journal:): the same path from any directory is the same file.
        return JournalLock(config.journal_path, "give each moim a journal of its own")
    except (MemoryLayerError, OSError) as exc:
        raise click.ClickException(str(exc)) from exc


def check_db_directory(config: Config) -> None:
    """Refuse, before `moim serve` starts, a database directory that does not exist or that
    moim cannot write in: the journal of turns not yet stored is kept there (with Postgres
    too), and SQLite's WAL and shared-memory files and the lexical index beside the file.

    With `journal:` (MOIM_JOURNAL) set, its directory is checked too (with Postgres, only it).
    The journal is opened in the server's startup, where uvicorn would report this as a
    traceback and exit 3; SQLite's own message would be "unable to open database file".
    """
    name = config.db_path.name
    if config.journal is None:
        _check_directory(
            "db",
            config.db_path,
            f"moim keeps {name}'s journal there (and SQLite its -wal and -shm files)",
        )
        return
    if config.memory.db_url is None:
        _check_directory("db", config.db_path, "SQLite keeps its -wal and -shm files there")
    _check_directory("journal", config.journal, "moim keeps the journal there")


def _check_directory(name: str, path: Path, why: str) -> None:
    path = Path(os.path.abspath(path))  # absolute, as "cannot open" names it: what finds it
    directory = path.parent
    if not directory.is_dir():
        raise click.ClickException(f"{name}: cannot create {path}: no such directory {directory}")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise click.ClickException(f"{name}: cannot write in {directory.resolve()}: {why}")


def when(seconds: float | None) -> str:
    """Unix seconds as `YYYY-MM-DD HH:MM:SS UTC` ("-" for none)."""
    if seconds is None:
        return "-"
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def echo_table(
    header: Sequence[str], rows: Sequence[Sequence[str]], numeric: Sequence[int] = ()
) -> None:
    """Columns padded to their widest cell, numbers to the right; nothing when no rows."""
    if not rows:
        return
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        cells = [
            cell.rjust(width) if i in numeric else cell.ljust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        ]
        click.echo("  ".join(cells).rstrip())
