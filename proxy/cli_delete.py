"""`moim memory delete --user U [--session S [--facts]]`: forget a user, or one conversation.

The command line's side of `DELETE /v1/memory` and `DELETE /v1/memory/sessions/{id}`: the
same layer calls, then the deleted words are erased from the database's files (`scrub`),
which a running moim would otherwise do when idle.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from proxy.cli_common import CONFIG_OPTION, USER_OPTION, config_from, open_layer


@click.command("delete")
@CONFIG_OPTION
@USER_OPTION
@click.option(
    "--vacuum",
    is_flag=True,
    help="Then rewrite the whole database file: pages freed before this version of moim "
    "may still hold deleted text (holds the write lock; needs the file's size free on disk).",
)
@click.option(
    "--session",
    "session_id",
    default=None,
    help="Only this conversation of the user (its id, as `moim memory search` shows it); "
    "their facts stay.",
)
@click.option(
    "--facts",
    is_flag=True,
    help="With --session: also the facts learned from that conversation's messages.",
)
@click.option("--yes", "confirmed", is_flag=True, help="Do not ask for confirmation (scripts).")
def delete(
    config_path: Path | None,
    user_id: str,
    session_id: str | None,
    facts: bool,
    vacuum: bool,
    confirmed: bool,
) -> None:
    """Forget everything of one user (or one conversation of theirs: --session), and erase
    their words from the database's files.

    Asks first, once the database is named, unless --yes.
    """
    if facts and session_id is None:
        raise click.UsageError("--facts goes with --session (a user's delete takes every fact)")
    config = config_from(config_path)
    layer = open_layer(config)
    if session_id is not None:
        _delete_session(layer, user_id, session_id, facts, confirmed)
    else:
        if not confirmed:
            question = f"Delete every message, chunk and fact of {user_id}?"
            click.confirm(question, abort=True, err=True)
        removed = layer.forget(user_id)
        click.echo(f"deleted {removed} messages of {user_id}")
    if not layer.scrub():
        click.echo(
            "not all erased yet (a reader held the WAL, or the lexical index was being "
            "rebuilt): a running moim finishes it when idle; run this again to retry",
            err=True,
        )
    if vacuum and config.memory.db_url:  # PostgreSQL rewrites its tables itself
        click.echo(
            "--vacuum rewrites a SQLite file: on PostgreSQL, run VACUUM FULL on moim's tables "
            "to drop the deleted rows' pages",
            err=True,
        )
    elif vacuum:
        layer.vacuum()
        click.echo("database file rewritten")


def _delete_session(
    layer: Any, user_id: str, session_id: str, facts: bool, confirmed: bool
) -> None:
    """`moim memory delete --session`: one conversation of the user, as the memory API's
    `DELETE /v1/memory/sessions/{id}` forgets it; an unknown one is an error, nothing done."""
    if not confirmed:
        what = "message, chunk and fact" if facts else "message and chunk"
        question = f"Delete every {what} of {user_id}'s session {session_id}?"
        click.confirm(question, abort=True, err=True)
    done = layer.forget_session(user_id, session_id, facts)
    if done is None:
        raise click.ClickException(f"{user_id} has no session {session_id!r}")
    facts_said = f" and {done.facts} facts" if facts else ""
    click.echo(f"deleted {done.messages} messages{facts_said} of {user_id}'s session {session_id}")
