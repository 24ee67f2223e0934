"""`moim facts …`: list, set, forget or pin one user's facts from the command line.

`list` and `history` print a table, or with `--json` one JSON object a line; `set`, `pin`
and `unpin` print the fact they leave as JSON.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import click

from proxy.cli_common import (
    CONFIG_OPTION,
    CREATE_OPTION,
    JSON_OPTION,
    USER_OPTION,
    config_from,
    echo_table,
    open_layer,
    when,
)


@click.group()
def facts() -> None:
    """List, set, forget or pin one user's facts (semantic memory)."""


def _facts_call(
    config_path: Path | None, call: Callable[[Any], Any], create: bool | None = None
) -> Any:
    """Run `call` on the memory layer; a bad key or value (ValueError) becomes a usage error."""
    layer = open_layer(config_from(config_path), create)
    try:
        return call(layer)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc


def _echo_facts(*found: Any) -> None:
    for fact in found:
        click.echo(json.dumps(asdict(fact), ensure_ascii=False))


def _facts_table(found: list[Any]) -> None:
    """KEY, VALUE, CATEGORY, POLICY, PINNED, STATUS, UPDATED, ID: one row a fact."""
    rows = [
        [
            f.key,
            f.value,
            f.category,
            f.policy,
            "yes" if f.pinned else "",
            f.status,
            when(f.updated_at),
            str(f.id),
        ]
        for f in found
    ]
    header = ["KEY", "VALUE", "CATEGORY", "POLICY", "PINNED", "STATUS", "UPDATED", "ID"]
    echo_table(header, rows, numeric=(7,))


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
@JSON_OPTION
def facts_list(config_path: Path | None, user_id: str, status: str, as_json: bool) -> None:
    """Print the user's facts, oldest first: a table, or one JSON object a line (--json)."""
    wanted = None if status == "all" else status
    found = _facts_call(config_path, lambda layer: layer.list_facts(user_id, wanted))
    if as_json:
        _echo_facts(*found)
    elif found:
        _facts_table(found)
    else:
        click.echo(f"no {'' if wanted is None else wanted + ' '}facts for {user_id}", err=True)


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
    type=click.FloatRange(min=0, min_open=True, max=1e300, max_open=True),
    default=None,
    help="Seconds until the fact goes stale (default: never).",
)
@CREATE_OPTION
def facts_set(
    config_path: Path | None,
    user_id: str,
    key: str,
    value: str,
    category: str | None,
    policy: str | None,
    pinned: bool | None,
    ttl_seconds: float | None,
    create: bool,
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
            create,
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
@JSON_OPTION
@click.argument("key")
def facts_history(config_path: Path | None, user_id: str, as_json: bool, key: str) -> None:
    """Print every value KEY (or a fact id) ever had, oldest first: a table, or JSON lines."""
    found = _facts_call(config_path, lambda layer: layer.fact_history(user_id, key))
    if not found:
        raise click.ClickException(f"no fact {key!r} for user {user_id!r}")
    if as_json:
        _echo_facts(*found)
    else:
        _facts_table(found)


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
