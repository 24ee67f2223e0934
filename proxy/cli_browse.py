"""`moim users` and `moim memory search`: who has memory, and what recall finds in it.

Text for people by default; `--json` prints one object a line for scripts. Times are shown
in UTC; in JSON they are Unix seconds as stored.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from proxy.cli_common import (
    CONFIG_OPTION,
    JSON_OPTION,
    USER_OPTION,
    config_from,
    echo_table,
    open_layer,
    when,
)

PREVIEW_CHARS = 300  # of a hit's text, in the text output


@click.command()
@CONFIG_OPTION
@JSON_OPTION
@click.option(
    "--limit",
    type=click.IntRange(1, 1_000_000),
    default=1000,
    show_default=True,
    help="At most this many users, the most recently active first.",
)
def users(config_path: Path | None, as_json: bool, limit: int) -> None:
    """List the users with memory: messages, sessions, active facts, last activity."""
    found = open_layer(config_from(config_path)).users(limit=limit)
    if as_json:
        for user in found:
            click.echo(
                json.dumps(
                    {
                        "user_id": user.user_id,
                        "messages": user.messages,
                        "sessions": user.sessions,
                        "facts": user.facts,
                        "last_active": user.last_active,
                    },
                    ensure_ascii=False,
                )
            )
        return
    rows = [
        [u.user_id, str(u.messages), str(u.sessions), str(u.facts), when(u.last_active)]
        for u in found
    ]
    echo_table(["USER", "MESSAGES", "SESSIONS", "FACTS", "LAST ACTIVE"], rows, numeric=(1, 2, 3))
    if not found:
        click.echo("no user has memory yet", err=True)


@click.command("search")
@CONFIG_OPTION
@USER_OPTION
@JSON_OPTION
@click.option(
    "-k",
    "k",
    type=click.IntRange(1, 100),
    default=10,
    show_default=True,
    help="How many hits.",
)
@click.argument("query")
def search(config_path: Path | None, user_id: str, as_json: bool, k: int, query: str) -> None:
    """Search the user's memory for QUERY, as recall ranks it, with each hit's scores.

    Scores: lexical is BM25 (higher is better) and its rank, dense the cosine similarity and
    its rank, fused the two mixed (0 to 1), final the fused score plus recency, neighbour,
    speaker and date bonuses. No abstention and no budget apply, unlike recall in a request.
    """
    if not query.strip():
        raise click.BadParameter("must not be blank", param_hint="QUERY")
    hits = open_layer(config_from(config_path)).search(user_id, query, k)
    for rank, hit in enumerate(hits, start=1):
        if as_json:
            click.echo(json.dumps({"rank": rank, **hit_fields(hit)}, ensure_ascii=False))
        else:
            click.echo(hit_text(rank, hit))
    if not hits:
        click.echo(f"nothing found for {user_id}", err=True)


def hit_fields(hit: Any) -> dict[str, Any]:
    """A `memory.Hit` as JSON: its chunk, and every score (None where a retriever missed it)."""
    chunk = hit.chunk
    return {
        "id": chunk.id,
        "final": _rounded(hit.score),
        "fused": _rounded(hit.fused_score),
        "lexical": _rounded(hit.lexical_score),
        "lexical_rank": hit.lexical_rank,
        "dense": _rounded(hit.similarity),
        "dense_rank": hit.dense_rank,
        "session_id": chunk.session_id,
        "message_id": chunk.message_id,
        "role": chunk.role,
        "name": chunk.name,
        "created_at": chunk.created_at,
        "text": chunk.text,
    }


def hit_text(rank: int, hit: Any) -> str:
    """Three lines: the scores, where the chunk comes from, and the start of its text."""
    chunk = hit.chunk
    scores = (
        f"{rank:>2}. final {hit.score:.3f}  fused {_score(hit.fused_score)}  "
        f"lexical {_score(hit.lexical_score, 2)}{_rank(hit.lexical_rank)}  "
        f"dense {_score(hit.similarity)}{_rank(hit.dense_rank)}"
    )
    speaker = f"{chunk.role} {chunk.name}" if chunk.name else chunk.role
    source = f"    {when(chunk.created_at)} · {chunk.session_id} · {speaker} · chunk {chunk.id}"
    text = " ".join(chunk.text.split())
    if len(text) > PREVIEW_CHARS:
        text = text[: PREVIEW_CHARS - 1] + "…"
    return f"{scores}\n{source}\n    {text}"


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


def _score(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _rank(rank: int | None) -> str:
    return "" if rank is None else f" (#{rank})"
