"""Measure, recall, budget and inject: the memory steps of one request, on a worker thread.

`wait_for_searchable` first lets the writer catch up with the user's turns the request does
not carry, when it is behind. `measure_and_recall` counts the request's tokens against the
model's context window, resolves the session of a request that named none, and has the
memory layer recall for it; `_inject` then places the block in the body to send. The
fail-open around them is `proxy/pipeline.py`'s.
"""

from __future__ import annotations

import functools
import time
from concurrent.futures import Future
from dataclasses import replace
from typing import TYPE_CHECKING

from memory import (
    PendingRecall,
    RecallRequest,
    Recollection,
    ResponseLink,
    context_window,
    count_message_tokens,
    fill_ratio,
    near_threshold,
    sampled,
)
from proxy.exchange import Conversation, Prepared, Report
from proxy.identity import Identity, held_session_id
from proxy.room import block_budget, largest_block, room_left

if TYPE_CHECKING:
    from proxy.state import AppState


async def wait_for_searchable(
    state: AppState, who: Identity, conversation: Conversation, report: Report
) -> None:
    """Wait until recall can find the user's finished turns this request does not carry
    (proxy/writer_recent.py), `memory.recall_wait` seconds at most; the report says how
    long, and how many it still could not."""
    started = time.perf_counter()
    left = await state.writer.searchable(
        who.user_id,
        who.session_id,
        conversation.continues,
        conversation.messages,
        state.config.recall_wait,
    )
    if left is not None:
        report.waited_ms, report.unsearchable = (time.perf_counter() - started) * 1000, left


def measure_and_recall(
    state: AppState,
    who: Identity,
    conversation: Conversation,
    report: Report,
    pending: PendingRecall | None,
    size: int,
    sent_model: str,
) -> Prepared | Future[Prepared]:
    """Measure the request (`size`: its body's bytes) and resolve its session; recall and
    inject (a future when the search under way will finish them) into the body naming
    `sent_model` (a config alias's name upstream)."""
    settings = state.layer.settings
    model, messages = conversation.model, conversation.messages
    link = _continued(state, who, conversation.continues)
    held = link.tokens if link else 0
    tokens = count_message_tokens(messages, model) + held
    window = context_window(model, settings.context_windows, settings.default_context_window)
    if near_threshold(tokens, window, settings.tier_rules) and sampled(messages):
        # An estimate a few tokens off would pick the tier on the other side of the threshold.
        tokens = count_message_tokens(messages, model, exact=True) + held
    report.fill_ratio = fill_ratio(tokens, window)
    if not who.explicit_session:
        who = replace(who, session_id=_session(state, who, conversation, link))
    if not who.mode.reads:
        return Prepared(who)
    largest = largest_block(settings)
    room = room_left(conversation, who, tokens, window, size, largest)
    request = RecallRequest(
        who.user_id,
        who.session_id,
        model,
        messages,
        tokens,
        window,
        block_budget(who.context_budget, room, largest),
        session_in_context=conversation.held,
    )
    inject = functools.partial(_inject, state, who, conversation, report, sent_model)
    return state.layer.recall_then(request, inject, pending=pending)


def _inject(
    state: AppState,
    who: Identity,
    conversation: Conversation,
    report: Report,
    sent_model: str,
    recollection: Recollection,
) -> Prepared:
    """Report what recall found and place its block in the body to send."""
    model, settings = conversation.model, state.layer.settings
    report.tier, report.recalled = recollection.tier.level, True
    if recollection.warming:
        report.error = "embedding model still loading: facts only, no excerpts"
        report.error_kind = "embedder_loading"
    elif recollection.degraded:  # the embedder failed: recalled by keywords alone
        report.error, report.error_kind = recollection.degraded, "embedder_unavailable"
    report.abstained = recollection.withheld and not (
        recollection.block and recollection.block.excerpts
    )
    if recollection.block is not None:
        report.block = recollection.block  # its tokens are counted meanwhile (`Counted`)
        report.chunks = recollection.block.excerpts
        report.facts = recollection.block.facts
    settle = state.inspector.history.record(who, model, report, recollection)  # "why this block"
    if recollection.block is None:
        return Prepared(who, settle=settle)
    content = conversation.place(recollection.block.text, settings.placement, sent_model)
    return Prepared(who, content, recollection.block.fact_ids, settle)


def _continued(state: AppState, who: Identity, response_id: str | None) -> ResponseLink | None:
    """The stored reply a Responses API request continues (just finished ones first)."""
    if response_id is None:
        return None
    recent = state.responses.get(who.user_id, response_id)
    return recent or state.layer.response_link(who.user_id, response_id)


def _session(
    state: AppState, who: Identity, conversation: Conversation, link: ResponseLink | None
) -> str:
    """The session of a request that named none: the one of the reply it continues, or of the
    provider's conversation, else the one its messages continue (`continue_session`)."""
    if link is not None:
        return link.session_id
    if conversation.thread is not None:
        return held_session_id(who.user_id, "conversation", conversation.thread)
    if conversation.continues is not None:  # a reply moim never saw: its chain from here on
        return held_session_id(who.user_id, "previous_response_id", conversation.continues)
    return state.layer.continue_session(
        who.user_id, who.session_id, conversation.messages, state.writer.session_with
    )
