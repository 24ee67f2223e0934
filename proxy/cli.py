"""The `moim` command: thin verbs over the library.

moim serve [--config PATH] [--host H] [--port P]
moim migrate | reindex | stats --user U | users          (users: proxy/cli_browse.py)
moim memory stats|export|import|delete|search --user U   (search: proxy/cli_browse.py,
                                                          delete: proxy/cli_delete.py)
moim memory copy --from sqlite:///srv/moim/moim.db --to postgresql://…
moim facts list|set|delete|history|pin|unpin --user U   (proxy/cli_facts.py)
moim consolidate [--user U] [--model M] [--turns N]   (proxy/cli_consolidate.py)
moim mcp [--user U]                       (MCP on stdio: proxy/mcp_server.py)
"""

from __future__ import annotations

import json
import signal
import sys
from dataclasses import replace
from pathlib import Path
from types import FrameType
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import click

from proxy.auth import is_loopback
from proxy.cli_browse import search, users
from proxy.cli_common import (
    CONFIG_OPTION,
    CREATE_OPTION,
    JSON_OPTION,
    USER_OPTION,
    check_db_directory,
    config_from,
    database_path,
    hold_journal,
    namespace_given,
    open_layer,
    progress_bar,
)
from proxy.cli_consolidate import consolidate
from proxy.cli_copy import copy
from proxy.cli_delete import delete
from proxy.cli_facts import facts
from proxy.config import Config
from proxy.log_lines import log_to_stderr

# The levels both logging and uvicorn know; anything else would end in a traceback from
# logging.basicConfig once the config is read.
LOG_LEVELS = ("critical", "error", "warning", "info", "debug")
# The exit status when the app's startup failed: uvicorn.run's (3), which its modules define in
# one place or another by version, so it is not imported.
STARTUP_FAILURE = 3


class _Moim(click.Group):
    """The `moim` group: a store failing during a command (its write lock held by `moim serve`
    past `memory.busy_timeout`, Postgres unreachable) is one line and exit status 1, not a
    traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        from memory import MemoryLayerError

        try:
            return super().invoke(ctx)
        except MemoryLayerError as exc:
            hint = (
                " (another process held its write lock; try again)" if "locked" in str(exc) else ""
            )
            raise click.ClickException(f"{exc}{hint}") from exc


@click.group(cls=_Moim)
@click.version_option(package_name="moim")
def main() -> None:
    """moim: long-term memory for any OpenAI-compatible LLM application."""


main.add_command(facts)
main.add_command(users)
main.add_command(consolidate)


@main.command()
@CONFIG_OPTION
@click.option("--host", default=None, help="Address to bind (default 127.0.0.1).")
@click.option(
    "--port", type=click.IntRange(1, 65535), default=None, help="Port to bind (default 8080)."
)
@click.option(
    "--log-level",
    type=click.Choice(LOG_LEVELS, case_sensitive=False),
    default="info",
    show_default=True,
    help="How much to log.",
)
def serve(config_path: Path | None, host: str | None, port: int | None, log_level: str) -> None:
    """Start the proxy."""
    from proxy.runtime import tune_malloc

    tune_malloc()  # before the store's threads allocate (its docstring says why)
    import uvicorn

    from proxy.app import build_app
    from proxy.serving import StopClock, StoppingServer, bind_problem, uvicorn_options

    config = config_from(config_path)
    config = replace(config, host=host or config.host, port=port or config.port)
    if not is_loopback(config.host) and not config.keys and config.refuse_open_bind:
        raise click.ClickException(
            f"refusing to bind {config.host} without proxy keys (auth.refuse_open_bind)"
        )
    if (problem := bind_problem(config.host, config.port)) is not None:
        raise click.ClickException(problem)
    check_db_directory(config)
    # The store is opened (and migrated) here, not in the app's startup, so a database that
    # cannot be opened (unreachable, not a database) is one clear line, not a traceback.
    lock = hold_journal(config)
    layer = open_layer(config, create=True)
    layer.open_journal(config.journal_path, lock)
    if not is_loopback(config.host) and not config.keys:
        click.secho(
            f"WARNING: moim is listening on {config.host} with no proxy keys: anyone who can "
            "reach this port can read and write every user's memory. Set auth.keys.",
            fg="red",
            err=True,
            bold=True,
        )
    log_to_stderr(log_level)
    click.echo(banner(config), err=True)
    # uvicorn stops gracefully on SIGTERM, puts back the handler it found and sends the signal
    # again: by default that killed moim once stopped (status 143 for `docker stop`, as if
    # killed mid-work). A stop asked for is a clean exit.
    signal.signal(signal.SIGTERM, _stop_asked)
    clock = StopClock()
    options = uvicorn.Config(
        build_app(config, layer, clock),
        host=config.host,
        port=config.port,
        log_level=log_level,
        access_log=False,
        **uvicorn_options(config),
    )
    server = StoppingServer(options, clock)
    try:
        server.run()
    except KeyboardInterrupt:  # the Ctrl-C uvicorn raises again once stopped
        pass
    except SystemExit as exc:  # the SIGTERM it sends again (`_stop_asked`)
        if exc.code not in (0, None):
            raise
    if not server.started:  # as uvicorn.run: the app's startup failed
        sys.exit(STARTUP_FAILURE)
    if clock.turns_lost:  # the log's last line says how many; a supervisor sees a failure
        sys.exit(1)


def _stop_asked(signum: int, frame: FrameType | None) -> None:
    """SIGTERM outside uvicorn's own handling (before it serves, or once it has stopped)."""
    raise SystemExit(0)


@main.command()
@CONFIG_OPTION
def migrate(config_path: Path | None) -> None:
    """Create or upgrade the database schema (serve does it too, before it answers), and
    redo the derived rows an upgrade or another embedding model calls for, so the next start
    need not (serve would, in the background, recalling less meanwhile).

    An upgrade shows a bar, one step per migration, when stderr is a terminal; so does the
    re-indexing.
    """
    config = config_from(config_path)
    layer = open_layer(config, create=True)  # opening the store applies pending migrations
    click.echo(f"{database_path(config, create=True)[0]}: schema up to date")
    if not config.memory_enabled:
        return
    _ = layer.embedder  # loading the model applies a change of layout or model
    with progress_bar("re-indexing messages") as progress:
        done = layer.catch_up(progress)
    if done:
        click.echo(f"re-indexed {done} messages")


@main.command()
@CONFIG_OPTION
def reindex(config_path: Path | None) -> None:
    """Rebuild chunks, full-text and vector indexes from the stored messages.

    Shows a bar with counts and ETA on stderr when it is a terminal.
    """
    layer = open_layer(config_from(config_path))
    _ = layer.embedder  # load the model before the bar starts
    with progress_bar("re-indexing messages") as progress:
        done = layer.reindex(progress)
    click.echo(f"re-indexed {done} messages")


@main.command()
@CONFIG_OPTION
@USER_OPTION
@JSON_OPTION
def stats(config_path: Path | None, user_id: str, as_json: bool) -> None:
    """Counts of one user's stored memory: messages, sessions, chunks, facts."""
    counts = open_layer(config_from(config_path)).stats(user_id)
    if not as_json:
        click.echo(
            f"{user_id}: {counts.messages} messages in {counts.sessions} sessions, "
            f"{counts.chunks} chunks, {counts.facts} facts"
        )
        return
    click.echo(
        json.dumps(
            {
                "user_id": user_id,
                "messages": counts.messages,
                "chunks": counts.chunks,
                "facts": counts.facts,
                "sessions": counts.sessions,
            },
            ensure_ascii=False,
        )
    )


@main.group()
def memory() -> None:
    """Inspect, search, export, import or delete one user's memory; copy every user's
    to another store."""


memory.add_command(stats, "stats")
memory.add_command(copy, "copy")
memory.add_command(search, "search")
memory.add_command(delete, "delete")


@memory.command("export")
@CONFIG_OPTION
@USER_OPTION
def export_(config_path: Path | None, user_id: str) -> None:
    """Write the user's messages and facts as JSONL to standard output."""
    for item in open_layer(config_from(config_path)).export(user_id):
        click.echo(json.dumps(item, ensure_ascii=False))


@memory.command("import")
@CONFIG_OPTION
@USER_OPTION
@CREATE_OPTION
@click.argument("source", type=click.File("rb"), default="-")
def import_(config_path: Path | None, user_id: str, create: bool, source: Any) -> None:
    """Read SOURCE (JSONL as export writes it; default: stdin) into the user's memory; index it.

    The indexing shows a bar with counts and ETA on stderr when it is a terminal.
    """
    items = _json_lines(source)
    layer = open_layer(config_from(config_path), create)
    with progress_bar("indexing imported messages") as progress:
        added = layer.import_(user_id, items, progress, capped=False)  # the operator's
    rows = "fact row" if added.facts == 1 else "fact rows"
    click.echo(f"imported {added.messages} messages and {added.facts} {rows} for {user_id}")


def _json_lines(source: Any) -> list[Any]:
    """The exported item on each non-blank line; a line that is not JSON, or not an item an
    export writes, is an error naming it, before anything is stored."""
    from memory import item_problem

    items = []
    for number, raw in enumerate(source, start=1):
        try:
            line = raw.decode("utf-8")  # read as bytes: a decoding error names its line
        except UnicodeDecodeError as exc:
            raise click.ClickException(f"line {number} is not UTF-8 text: {exc}") from None
        if line.strip():
            try:
                item = json.loads(line)
            except ValueError as exc:
                raise click.ClickException(f"line {number} is not JSON: {exc}") from None
            if (problem := item_problem(item)) is not None:
                raise click.ClickException(f"line {number} is not an exported item: {problem}")
            items.append(item)
    return items


@main.command("mcp")
@CONFIG_OPTION
@click.option(
    "--user",
    "user_id",
    envvar="MOIM_USER",
    default="default",
    show_default=True,
    callback=namespace_given,
    help="The user the tools act for (or MOIM_USER): a client's id or a `moim users` namespace.",
)
@CREATE_OPTION
def mcp_(config_path: Path | None, user_id: str, create: bool) -> None:
    """Serve moim's memory tools over MCP on stdin/stdout, for one user (desktop agents).

    search_memory, remember_fact, recall_facts and forget_fact, as the proxy's /mcp serves
    them. Needs the mcp extra: pip install 'moim[mcp]'. Logs go to stderr.
    """
    import anyio

    try:
        from proxy.mcp_server import serve_stdio
    except ImportError as exc:
        raise click.ClickException(
            f"moim mcp needs the mcp package ({exc.name}): pip install 'moim[mcp]'"
        ) from exc
    layer = open_layer(config_from(config_path), create)
    log_to_stderr("warning")
    anyio.run(serve_stdio, layer, user_id)


def banner(config: Config) -> str:
    """What `moim serve` says at startup: where it listens, where requests go, memory on/off.

    The upstream is named without credentials: a URL's user, password and query are left out,
    and a configured provider key is only said to exist.
    """
    if config.upstream_base_url:
        key = " (provider key from config)" if config.upstream_api_key else ""
        upstream = (
            f"{_without_secrets(config.upstream_base_url)}{key}; other /v1/ requests pass through"
        )
    else:
        upstream = "none: every model name goes through litellm (chat completions, embeddings)"
    memory = "on (chat completions, Responses API)" if config.memory_enabled else "off"
    host = f"[{config.host}]" if ":" in config.host else config.host  # an IPv6 address
    lines = [
        f"moim on http://{host}:{config.port}/v1",
        f"  upstream: {upstream}",
        f"  memory:   {memory}",
    ]
    if config.embedder is not None:  # else the bundled model, offline: nothing to say
        chosen = config.embedder
        where = f" at {_without_secrets(chosen.api_base)}" if chosen.api_base else " (litellm)"
        key = " (key from config)" if chosen.api_key else ""
        lines.append(f"  embedder: {chosen.model}{where}{key}")
    return "\n".join(lines)


def _without_secrets(url: str) -> str:
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:  # not a URL one can print safely: say only that it is set
        return "(set, not a valid URL)"
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 literal
        host = f"[{host}]"
    netloc = f"{host}:{port}" if port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
