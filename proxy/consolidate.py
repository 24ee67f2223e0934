"""Optional LLM consolidation, the job: ask a model about a user's recent turns, gate, apply.

Off by default: `moim consolidate` runs it once, and with `consolidation.model` set the app
runs it on a schedule. It reads a user's last 40 user and assistant messages (the schedule:
the oldest 40 not read yet) and their active facts, asks the configured model (any model
`proxy/upstream.py` can route: an OpenAI-compatible upstream gets one non-streaming POST
with `response_format: json_object`, anything else goes through litellm) for operations in
strict JSON, and hands the reply to `memory.facts.consolidation`: parse (a bad reply rejects the
whole batch), write gate (each operation accepted or rejected with a reason), then one
transaction. Every rejection is logged with its reason; fact and message text only at DEBUG.

The schedule that runs it for every due user is `proxy/consolidation_schedule.py`.
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import anyio
import anyio.to_thread
import httpx

from memory import (
    MAX_OPERATIONS,
    ConsolidationRejected,
    Fact,
    MemoryLayer,
    Message,
    Rejection,
    TooManyFacts,
    gate,
    parse_operations,
)
from proxy.config import Config
from proxy.errors import UpstreamError
from proxy.streaming import read_reply
from proxy.upstream import (
    call_litellm,
    close_litellm,
    litellm_json,
    open_openai,
    provider_key,
    resolve,
)
from proxy.upstream_errors import unreachable

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
    through: int = 0  # the newest message id the model read (0: none)

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
    unread: bool = False,
) -> Report:
    """One consolidation of one user's facts; returns what was applied and rejected.

    The model reads the user's last `turns` turns, or with `unread` the oldest `turns` that
    no consolidation has read yet (the schedule's batches). A user with no turns costs no
    model call. A reply that fails parsing, or a batch whose facts changed before it could be
    applied, leaves every fact as it was (`batch_rejected`). Raises UpstreamError when the
    model cannot be reached or answers with an error status.
    """
    recent, facts = await anyio.to_thread.run_sync(_read, layer, user_id, turns, unread)
    through = recent[-1].id if recent else 0
    report = Report(user_id, model, len(recent), len(facts), through=through)
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
            layer.apply_consolidation, user_id, result.accepted, time.time()
        )
    except ConsolidationRejected as exc:
        return _refused(report, exc.reason, proposed=len(operations))
    except TooManyFacts as exc:  # facts added since the gate counted them
        return _refused(report, str(exc), proposed=len(operations))
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
        user_id,
        model,
        len(recent),
        len(facts),
        len(operations),
        dict(applied),
        result.rejected,
        through=through,
    )


def _read(
    layer: MemoryLayer, user_id: str, turns: int, unread: bool
) -> tuple[list[Message], list[Fact]]:
    """The turns the model reads (user and assistant messages with text, oldest first), and
    the active facts."""
    facts = layer.list_facts(user_id, "active")
    if unread:
        return layer.unread_turns(user_id, turns) if turns > 0 else [], facts
    # layer.messages reads the whole log; a `last N` query would spare that on long histories.
    said = [
        m for m in layer.messages(user_id) if m.role in ("user", "assistant") and m.content.strip()
    ]
    return said[-turns:] if turns > 0 else [], facts


def _refused(report: Report, reason: str, proposed: int = 0) -> Report:
    logger.warning(
        "consolidation user_id=%s model=%s rejected, nothing applied: %s",
        report.user_id,
        report.model,
        reason,
    )
    return replace(report, proposed=proposed, batch_rejected=reason)


async def ask_model(
    config: Config, client: httpx.AsyncClient, model: str, messages: list[dict[str, str]]
) -> str:
    """The model's reply text, asked for as a JSON object, never streamed.

    Raises UpstreamError (unreachable, cut off, or an error status) and ConsolidationRejected
    (an answer with no text in it, or past `server.max_body_bytes`).
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
        answer = await open_openai(client, target, json.dumps(body).encode(), authorization, ())
    except httpx.HTTPError as exc:
        raise unreachable(exc) from exc
    content = await read_reply(answer, config.max_body_bytes)
    if not isinstance(content, bytes):  # a provider gone wrong: moim reads no more of it
        await answer.aclose()
        raise ConsolidationRejected(
            f"the answer (status {answer.status_code}) is longer than server.max_body_bytes"
        )
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
    logger.debug("consolidation reply: %d characters", len(text))  # its facts stay out of logs
    return text


async def run_once(
    config: Config, layer: MemoryLayer, user_id: str, model: str, turns: int = RECENT_TURNS
) -> Report:
    """`consolidate_user` with its own httpx client, for the CLI; then the user's mark.

    The mark spares the schedule a second look at the same turns. Raises `ConsolidationHeld`
    while a replica's schedule consolidates the user (both would send the model its turns).
    """
    release = await anyio.to_thread.run_sync(layer.claim_consolidation, user_id)
    if release is None:
        raise ConsolidationHeld(user_id)
    try:
        due = await anyio.to_thread.run_sync(layer.users_due_for_consolidation, 1, user_id)
        async with own_client(config) as client:
            report = await consolidate_user(config, layer, client, user_id, model, turns)
        if due:
            newest = due[0].newest_message_id
            await anyio.to_thread.run_sync(layer.mark_consolidated, user_id, newest)
        return report
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(release)


class ConsolidationHeld(Exception):
    """Another process holds the user's consolidation (PostgreSQL's advisory lock)."""

    def __init__(self, user_id: str) -> None:
        super().__init__(user_id)
        self.user_id = user_id


@asynccontextmanager
async def own_client(config: Config) -> AsyncIterator[httpx.AsyncClient]:
    """An httpx client with the config's timeouts; litellm's clients are closed after it."""
    timeout = httpx.Timeout(config.read_timeout, connect=config.connect_timeout)
    try:
        async with httpx.AsyncClient(timeout=timeout) as client:
            yield client
    finally:
        await close_litellm()
