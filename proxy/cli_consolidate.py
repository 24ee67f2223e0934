"""`moim consolidate`: ask a model for fact operations from users' turns, by hand.

The same consolidation the server can schedule (`consolidation.model` in config.yaml), run
once for one user or for every user due (proxy/consolidate.py, consolidation_schedule.py).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import click

from proxy.cli_common import CONFIG_OPTION, config_from, namespace_given, open_layer, progress_bar
from proxy.config import Config


@click.command()
@CONFIG_OPTION
@click.option(
    "--user",
    "user_id",
    default=None,
    callback=namespace_given,
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
    Without --user, a bar on stderr counts the due users done, when it is a terminal.
    """
    config = config_from(config_path)
    model = model or config.consolidation_model
    if not model:
        raise click.UsageError("no model: pass --model or set consolidation.model")
    turns = turns or config.consolidation_turns
    if user_id is None:
        _consolidate_due(config, model, turns)
    else:
        _consolidate_user(config, user_id, model, turns)


def _consolidate_user(config: Config, user_id: str, model: str, turns: int) -> None:
    from proxy.consolidate import ConsolidationHeld, run_once
    from proxy.errors import UpstreamError

    try:
        report = asyncio.run(run_once(config, open_layer(config), user_id, model, turns))
    except ConsolidationHeld as exc:
        raise click.ClickException(
            f"a running moim is consolidating user {exc.user_id!r} now; run again when it is done"
        ) from exc
    except UpstreamError as exc:
        if not exc.from_provider:  # moim's own: its message says it all
            raise click.ClickException(exc.message) from exc
        detail = exc.content.decode("utf-8", "replace")[:500]
        raise click.ClickException(f"{exc.message}: {detail}") from exc
    click.echo(json.dumps(report.summary(), ensure_ascii=False))


def _consolidate_due(config: Config, model: str, turns: int) -> None:
    from proxy.consolidation_schedule import run_due

    min_new_turns = config.consolidation_min_new_turns
    layer = open_layer(config)
    with progress_bar("consolidating due users") as progress:
        outcomes = asyncio.run(run_due(config, layer, model, turns, min_new_turns, progress))
    for outcome in outcomes:
        click.echo(json.dumps(outcome.summary(), ensure_ascii=False))
    failed = {outcome.user_id for outcome in outcomes if outcome.error is not None}
    if failed:  # one outcome per batch: count users
        due = len({outcome.user_id for outcome in outcomes})
        raise click.ClickException(f"{len(failed)} of {due} due users not consolidated")
    if not outcomes:
        click.echo(f"no user has {min_new_turns} new turns to consolidate", err=True)
