"""Optional LLM consolidation, the job: ask a model about a user's recent turns, gate, apply.

Off by default: `moim consolidate` runs it once, and with `consolidation.model` set the app
runs it on a schedule (below). It reads the last 40 user and assistant messages and the
user's active facts, asks the configured model (any model `proxy/upstream.py` can route:
an OpenAI-compatible upstream gets one non-streaming POST with `response_format:
json_object`, anything else goes through litellm) for operations in strict JSON, and hands
the reply to `memory.consolidation`: parse (a bad reply rejects the whole batch), write gate
(each operation accepted or rejected with a reason), then one transaction. Every rejection
is logged with its reason; fact and message text only at DEBUG.

The schedule: at start and then `every_minutes` after each cycle ends, each user with
`min_new_turns` turns above their mark (`memory/consolidation_marks.py`) is consolidated, one
after another, and marked once the model answered, even when its batch was refused (a model
that answers badly is not asked about the same turns every cycle); an unreachable model
(UpstreamError) leaves the user unmarked, for the next cycle. The model reads the latest
`turns` messages only: when more arrive between two cycles, the older are marked unread.
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import anyio
import anyio.to_thread
import httpx

from memory import (
    MAX_OPERATIONS,
    ConsolidationRejected,
    DueUser,
    Fact,
    MemoryLayer,
    Message,
    Rejection,
    apply_operations,
    gate,
    parse_operations,
)
from proxy.config import Config
from proxy.errors import UpstreamError
from proxy.upstream import (
    call_litellm,
    close_litellm,
    litellm_json,
    open_openai,
    provider_key,
    resolve,
    unreachable,
)

logger = logging.getLogger(__name__)

RECENT_TURNS = 40
MAX_TURN_CHARS = 2_000

_SYSTEM = f"""You maintain long-term memory about one user of a chat assistant.
You receive the user's existing facts and their recent conversation. Propose operations:
- add: a new durable fact about the user (key, value, category)
- update: a correction or new value for an existing key
- reinforce: the conversation confirms an existing fact again (key only)
- contradict: the conversation shows an existing fact is no longer true (key only)
- close_open_loop: a plan or open thread (category open_loop) was resolved (key only)
Keep only what will still matter in weeks: identity, preferences, projects, constraints,
plans. Never store moods, greetings, one-off requests, or what others said as if it were
about the user. Reuse an existing key instead of adding a near-duplicate.
Keys are short snake_case names (home_city, employer). Categories: constraint, profile,
preference, project, protocol, open_loop, episodic_event.
confidence (0 to 1): how sure you are; salience (0 to 1): how much it will matter later.
Reply with JSON only, no prose and no code fences, exactly this shape:
{{"operations": [{{"op": "add", "key": "home_city", "value": "Lisbon", "category": "profile",
"confidence": 0.9, "salience": 0.7, "reason": "user said they moved to Lisbon"}}]}}
Reply {{"operations": []}} when nothing is worth keeping. At most \
{MAX_OPERATIONS} operations."""


@dataclass(frozen=True, slots=True)
class Report:
    """What one run did: counts, each rejected operation's reason, or the batch's."""

    user_id: str
    model: str
    turns: int
    facts: int
    proposed: int = 0
    applied: Mapping[str, int] = field(default_factory=dict)  # op -> how many
    rejected: tuple[Rejection, ...] = ()
    batch_rejected: str | None = None  # why the whole reply was refused

    def summary(self) -> dict[str, Any]:
        """JSON-ready, without fact values (those stay out of logs and terminals)."""
        return {
            "user_id": self.user_id,
            "model": self.model,
            "turns": self.turns,
            "facts": self.facts,
            "proposed": self.proposed,
            "applied": dict(self.applied),
            "rejected": [
                {"op": r.operation.op, "key": r.operation.key, "reason": r.reason}
                for r in self.rejected
            ],
            "batch_rejected": self.batch_rejected,
        }


def build_prompt(facts: Sequence[Fact], turns: Sequence[Message]) -> list[dict[str, str]]:
    """Chat messages asking for operations as strict JSON: the rules, then facts and turns.

    Facts are given as JSON so the model can reuse their keys; each turn is dated and cut to
    2,000 characters. The reply's shape is `memory.parse_operations`'s contract.
    """
    known = [
        {
            "key": f.key,
            "value": f.value,
            "category": f.category,
            "confidence": round(f.confidence, 2),
            "pinned": f.pinned,
        }
        for f in facts
    ]
    lines = [
        f"[{datetime.fromtimestamp(m.created_at, UTC):%Y-%m-%d} {m.role}] "
        f"{m.content[:MAX_TURN_CHARS]}"
        for m in turns
    ]
    user = (
        "Existing facts (JSON):\n" + json.dumps(known, ensure_ascii=False) + "\n\n"
        "Recent conversation, oldest first:\n" + "\n".join(lines)
    )
    return [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": user}]


async def consolidate_user(
    config: Config,
    layer: MemoryLayer,
    client: httpx.AsyncClient,
    user_id: str,
    model: str,
    turns: int = RECENT_TURNS,
) -> Report:
    """One consolidation of one user's facts; returns what was applied and rejected.

    A user with no turns costs no model call. A reply that fails parsing, or a batch whose
    facts changed before it could be applied, leaves every fact as it was (`batch_rejected`).
    Raises UpstreamError when the model cannot be reached or answers with an error status.
    """
    recent, facts = await anyio.to_thread.run_sync(_read, layer, user_id, turns)
    report = Report(user_id, model, len(recent), len(facts))
    if not recent:
        logger.info("consolidation user_id=%s model=%s turns=0: nothing to read", user_id, model)
        return report
    try:
        reply = await ask_model(config, client, model, build_prompt(facts, recent))
        operations = parse_operations(reply)
    except ConsolidationRejected as exc:
        return _refused(report, exc.reason)
    # `layer.embedder` may load the model (about a second): not on the event loop either
    result = await anyio.to_thread.run_sync(
        lambda: gate(operations, facts, layer.embedder.embed_documents)
    )
    for rejection in result.rejected:
        logger.info(
            "consolidation user_id=%s op=%s key=%s rejected: %s",
            user_id,
            rejection.operation.op,
            rejection.operation.key,
            rejection.reason,
        )
    try:
        await anyio.to_thread.run_sync(
            apply_operations, layer.store, user_id, result.accepted, time.time()
        )
    except ConsolidationRejected as exc:
        return _refused(report, exc.reason, proposed=len(operations))
    applied = Counter[str](o.op for o in result.accepted)
    logger.info(
        "consolidation user_id=%s model=%s turns=%d proposed=%d applied=%d rejected=%d",
        user_id,
        model,
        len(recent),
        len(operations),
        len(result.accepted),
        len(result.rejected),
    )
    return Report(
        user_id, model, len(recent), len(facts), len(operations), dict(applied), result.rejected
    )


def _read(layer: MemoryLayer, user_id: str, turns: int) -> tuple[list[Message], list[Fact]]:
    """The last `turns` user and assistant messages with text, oldest first; active facts."""
    # Store.messages reads the whole log; a `last N` query would spare that on long histories.
    said = [
        m
        for m in layer.store.messages(user_id)
        if m.role in ("user", "assistant") and m.content.strip()
    ]
    return said[-turns:] if turns > 0 else [], layer.list_facts(user_id, "active")


def _refused(report: Report, reason: str, proposed: int = 0) -> Report:
    logger.warning(
        "consolidation user_id=%s model=%s rejected, nothing applied: %s",
        report.user_id,
        report.model,
        reason,
    )
    return Report(
        report.user_id, report.model, report.turns, report.facts, proposed, batch_rejected=reason
    )


async def ask_model(
    config: Config, client: httpx.AsyncClient, model: str, messages: list[dict[str, str]]
) -> str:
    """The model's reply text, asked for as a JSON object, never streamed.

    Raises UpstreamError (unreachable, or an error status) and ConsolidationRejected (an
    answer with no text in it).
    """
    target = resolve(model, config)
    body = {
        "model": target.model,
        "messages": messages,
        "temperature": 0,
        "stream": False,
        "response_format": {"type": "json_object"},
    }
    authorization = provider_key(target, config, None)
    if target.kind == "litellm":
        response = await call_litellm(target, body, authorization, config.read_timeout)
        return _reply_text(litellm_json(response))
    try:
        answer = await open_openai(client, target, json.dumps(body).encode(), authorization, {})
        try:
            content = await answer.aread()
        finally:
            await answer.aclose()
    except httpx.HTTPError as exc:
        raise unreachable(exc) from exc
    if answer.status_code >= 400:
        raise UpstreamError(answer.status_code, content)
    return _reply_text(content)


def _reply_text(content: bytes) -> str:
    try:
        text = json.loads(content)["choices"][0]["message"]["content"]
    except (ValueError, LookupError, TypeError):
        raise ConsolidationRejected("the answer is not a chat completion") from None
    if not isinstance(text, str):
        raise ConsolidationRejected("the answer has no text content")
    logger.debug("consolidation reply: %s", text)
    return text


async def run_once(
    config: Config, layer: MemoryLayer, user_id: str, model: str, turns: int = RECENT_TURNS
) -> Report:
    """`consolidate_user` with its own httpx client, for the CLI; then the user's mark.

    The mark spares the schedule a second look at the same turns.
    """
    due = await anyio.to_thread.run_sync(layer.users_due_for_consolidation, 1, user_id)
    async with _own_client(config) as client:
        report = await consolidate_user(config, layer, client, user_id, model, turns)
    if due:
        await anyio.to_thread.run_sync(layer.mark_consolidated, user_id, due[0].newest_message_id)
    return report


async def run_due(
    config: Config, layer: MemoryLayer, model: str, turns: int, min_new_turns: int
) -> list[Outcome]:
    """`consolidate_due` with its own httpx client, for the CLI."""
    async with _own_client(config) as client:
        return await consolidate_due(config, layer, client, model, turns, min_new_turns)


@asynccontextmanager
async def _own_client(config: Config) -> AsyncIterator[httpx.AsyncClient]:
    """An httpx client with the config's timeouts; litellm's clients are closed after it."""
    timeout = httpx.Timeout(config.read_timeout, connect=config.connect_timeout)
    try:
        async with httpx.AsyncClient(timeout=timeout) as client:
            yield client
    finally:
        await close_litellm()


# -- the schedule ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Outcome:
    """What happened to one due user: the report (the model answered), or why not (`error`)."""

    user_id: str
    report: Report | None = None
    error: str | None = None  # no fact text in it; the user stays due

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
) -> list[Outcome]:
    """Each user due (`min_new_turns` new turns), once, one after another; marked when answered.

    One user's failure is logged and leaves that user unmarked; the next user goes on.
    """
    due = await anyio.to_thread.run_sync(layer.users_due_for_consolidation, min_new_turns)
    return [await _consolidate_and_mark(config, layer, client, user, model, turns) for user in due]


async def _consolidate_and_mark(
    config: Config,
    layer: MemoryLayer,
    client: httpx.AsyncClient,
    due: DueUser,
    model: str,
    turns: int,
) -> Outcome:
    user_id = due.user_id
    try:
        report = await consolidate_user(config, layer, client, user_id, model, turns)
        await anyio.to_thread.run_sync(layer.mark_consolidated, user_id, due.newest_message_id)
    except UpstreamError as exc:
        logger.warning(
            "consolidation user_id=%s model=%s not marked, due again next time: %s",
            user_id,
            model,
            exc.message,  # the status only: the provider's body stays out of logs
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
        "consolidation user_id=%s new_turns=%d marked_through=%d",
        user_id,
        due.new_turns,
        due.newest_message_id,
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
