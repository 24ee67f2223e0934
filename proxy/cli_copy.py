"""`moim memory copy --from … --to …`: move a whole store between backends (or databases).

Every user's messages and fact rows (history included) go through the same export and
import as `moim memory export | moim memory import`, so a copy can be repeated without
doubling anything (import is idempotent), and the target indexes what it receives with
its own embedding model. The copy is checked: each user's message and fact counts in the
target must reach the source's.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from proxy.cli_common import CONFIG_OPTION, config_from
from proxy.config import ConfigError, database_fields


def _settings_for(target: str, base: Any, option: str) -> Any:
    """The memory settings for `sqlite:///path` (or a plain path) or `postgresql://…`."""
    try:
        return replace(base, **database_fields(target, option))
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from exc


@click.command("copy")
@CONFIG_OPTION
@click.option("--from", "source", required=True, help="sqlite:///path/moim.db or postgresql://…")
@click.option("--to", "target", required=True, help="sqlite:///path/moim.db or postgresql://…")
def copy(config_path: Path | None, source: str, target: str) -> None:
    """Copy every user's messages and facts from one store into another, then index them."""
    from memory import MemoryLayer, MemoryLayerError, redact_url
    from proxy.embedding_service import embedder_factory

    config = config_from(config_path)
    base = config.memory
    source_settings = _settings_for(source, base, "--from")
    if source_settings.db_url is None and not source_settings.db_path.exists():
        raise click.ClickException(f"no database at {source_settings.db_path}")
    try:
        src = MemoryLayer(source_settings)
        dst = MemoryLayer(_settings_for(target, base, "--to"), embedder_factory(config))
    except MemoryLayerError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"moim: copying {redact_url(source)} to {redact_url(target)}", err=True)
    context = click.get_current_context()
    context.call_on_close(src.close)
    context.call_on_close(dst.close)
    messages = added = facts = 0
    users = src.user_ids()
    for user_id in users:
        items = list(src.export(user_id))
        added += dst.import_(user_id, items, capped=False).messages
        sent = (
            [i for i in items if i["type"] == "message"],
            [i for i in items if i["type"] == "fact"],
        )
        got = list(dst.export(user_id))
        have = sum(i["type"] == "message" for i in got), sum(i["type"] == "fact" for i in got)
        if have[0] < len(sent[0]) or have[1] < len(sent[1]):
            raise click.ClickException(
                f"{user_id}: the target holds {have[0]} messages and {have[1]} facts, "
                f"the source {len(sent[0])} and {len(sent[1])}"
            )
        messages += len(sent[0])
        facts += len(sent[1])
    click.echo(
        f"copied {messages} messages ({added} new) and {facts} fact rows of {len(users)} users"
    )
