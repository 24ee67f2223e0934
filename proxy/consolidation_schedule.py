"""Optional LLM consolidation, the schedule: every due user, batch by batch, marked as read.

At start and then `every_minutes` after each cycle ends, each user with `min_new_turns`
turns above their mark (`memory/store/marks.py`) is consolidated, one after another
(`proxy/consolidate.py` asks the model). The model reads the user's unread turns in batches
of `turns`, oldest first, and each batch is marked once the model has answered, even when
its reply was refused (a model that answers badly is not asked about the same turns every
cycle); an unreachable model (UpstreamError) leaves the rest unmarked, for the next cycle. A
user who said more than `turns` things between two cycles has every one of them read, at
most `MAX_BATCHES` calls a cycle: a long history (consolidation switched on for an old
store) is read over several cycles rather than in a burst of model calls.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.to_thread
import httpx

from memory import DueUser, MemoryLayer
from proxy.config import Config
from proxy.consolidate import Report, consolidate_user, own_client
from proxy.errors import UpstreamError

logger = logging.getLogger(__name__)

MAX_BATCHES = 5  # model calls per user per cycle


@dataclass(frozen=True, slots=True)
class Outcome:
    """What happened to one batch of a due user: the report (the model answered), or why not."""

    user_id: str
    report: Report | None = None
    error: str | None = None  # no fact text in it; the batch stays unread

    def summary(self) -> dict[str, Any]:
        if self.report is not None:
            return self.report.summary()
        return {"user_id": self.user_id, "error": self.error}


async def consolidate_due(
    config: Config,
    layer: MemoryLayer,
    client: httpx.AsyncClient,
    model: str,
    turns: int,
    min_new_turns: int,
    progress: Callable[[int, int], None] | None = None,
) -> list[Outcome]:
    """Each user due (`min_new_turns` new turns), one after another: one outcome per batch.

    A due user's unread turns are read in batches of `turns`, oldest first, each marked once
    the model has answered, until none is left: a user who said more than `turns` things since
    the last cycle has every one of them read. One user's failure is logged and leaves that
    user's unread turns unmarked; the next user goes on. `progress(done, due)` hears each
    user done.
    """
    due = await anyio.to_thread.run_sync(layer.users_due_for_consolidation, min_new_turns)
    outcomes: list[Outcome] = []
    for done, user in enumerate(due):
        if progress is not None:
            progress(done, len(due))
        outcomes += await _consolidate_and_mark(config, layer, client, user, model, turns)
    if progress is not None and due:
        progress(len(due), len(due))
    return outcomes


async def _consolidate_and_mark(
    config: Config,
    layer: MemoryLayer,
    client: httpx.AsyncClient,
    due: DueUser,
    model: str,
    turns: int,
) -> list[Outcome]:
    """Batches of the user's unread turns until they are read up to `due`'s newest; none
    while another replica consolidates the user (both would send the model the same turns)."""
    try:
        release = await anyio.to_thread.run_sync(layer.claim_consolidation, due.user_id)
    except Exception as exc:  # the store unavailable: this user waits for the next cycle
        logger.error("consolidation user_id=%s not claimed: %s", due.user_id, type(exc).__name__)
        return [Outcome(due.user_id, error=type(exc).__name__)]
    if release is None:
        logger.info("consolidation user_id=%s: another replica is at it", due.user_id)
        return []
    try:
        return await _batches(config, layer, client, due, model, turns)
    finally:
        with anyio.CancelScope(shield=True):  # a stop mid-call still gives the claim back
            await anyio.to_thread.run_sync(release)


async def _batches(
    config: Config,
    layer: MemoryLayer,
    client: httpx.AsyncClient,
    due: DueUser,
    model: str,
    turns: int,
) -> list[Outcome]:
    outcomes: list[Outcome] = []
    while len(outcomes) < MAX_BATCHES:
        outcome = await _one_batch(config, layer, client, due.user_id, model, turns)
        outcomes.append(outcome)
        report = outcome.report
        if report is None or report.turns < turns or report.through >= due.newest_message_id:
            return outcomes
        # Unless the mark moved, the next batch would be this one again (the user was deleted).
        mark = await anyio.to_thread.run_sync(layer.consolidated_through, due.user_id)
        if mark < report.through:
            return outcomes
    return outcomes


async def _one_batch(
    config: Config,
    layer: MemoryLayer,
    client: httpx.AsyncClient,
    user_id: str,
    model: str,
    turns: int,
) -> Outcome:
    try:
        report = await consolidate_user(config, layer, client, user_id, model, turns, unread=True)
        if report.through:
            await anyio.to_thread.run_sync(layer.mark_consolidated, user_id, report.through)
    except UpstreamError as exc:
        logger.warning(
            "consolidation user_id=%s model=%s not marked, due again next time: %s",
            user_id,
            model,
            exc.message,  # the status, or what moim met: the provider's body stays out of logs
        )
        return Outcome(user_id, error=exc.message)
    except Exception as exc:  # a bug or a failing store must not end the schedule
        logger.error(
            "consolidation user_id=%s model=%s failed, not marked: %s",
            user_id,
            model,
            type(exc).__name__,  # its message may quote a fact: the traceback only at DEBUG
        )
        logger.debug("consolidation user_id=%s failed", user_id, exc_info=True)
        return Outcome(user_id, error=type(exc).__name__)
    logger.info(
        "consolidation user_id=%s turns=%d marked_through=%d", user_id, report.turns, report.through
    )
    return Outcome(user_id, report)


async def consolidate_on_schedule(
    config: Config, layer: MemoryLayer, client: httpx.AsyncClient
) -> None:
    """Until cancelled: consolidate the due users, then wait `every_minutes`, and again.

    Nothing but cancellation ends it: a failed cycle (the store unavailable, say) is logged
    and the next one runs on time.
    """
    model, every = config.consolidation_model, config.consolidation_every_minutes
    turns, min_new_turns = config.consolidation_turns, config.consolidation_min_new_turns
    if model is None:
        return
    logger.info("consolidation schedule: model=%s every_minutes=%g", model, every)
    while True:
        try:
            await consolidate_due(config, layer, client, model, turns, min_new_turns)
        except Exception as exc:
            logger.error("consolidation cycle failed: %s", type(exc).__name__)
            logger.debug("consolidation cycle failed", exc_info=True)
        await anyio.sleep(every * 60)


async def run_due(
    config: Config,
    layer: MemoryLayer,
    model: str,
    turns: int,
    min_new_turns: int,
    progress: Callable[[int, int], None] | None = None,
) -> list[Outcome]:
    """`consolidate_due` with its own httpx client, for the CLI."""
    async with own_client(config) as client:
        return await consolidate_due(config, layer, client, model, turns, min_new_turns, progress)
