"""`bench/acceptance_round2.py`'s probes of a conversation the client rewrote: a user message
edited (the conversation goes on from the edit), an answer regenerated.

Asked in a new conversation, the edited text is recalled (counted); whether the text it
replaced, or the answer the client threw away, comes back beside it is a choice for the
owners (`info`).
"""

from __future__ import annotations

from typing import Any

from bench.acceptance import SYSTEM, Probe
from bench.acceptance_round2 import LATER, Check


def rewrite_checks() -> list[tuple[str, Check]]:
    def send(
        probe: Probe, user: str, history: list[dict[str, Any]], reply: str, minute: int
    ) -> None:
        headers = {
            "X-Memory-Session-Id": f"{user}-1",
            "X-Memory-Timestamp": f"2026-09-26T10:{minute:02d}:00",
        }
        probe.chat(user, history, reply=reply, **headers)

    def edited(probe: Probe) -> tuple[bool, str]:
        start = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": "I'm setting up the new router today."},
            {"role": "assistant", "content": "Great, how can I help?"},
        ]
        old = [*start, {"role": "user", "content": "The admin password I chose is ED-1111-OLD."}]
        send(probe, "edit", old, "Noted.", 1)
        new = [*start, {"role": "user", "content": "The admin password I chose is ED-2222-NEW."}]
        send(probe, "edit", new, "Noted.", 2)
        send(
            probe,
            "edit",
            [
                *new,
                {"role": "assistant", "content": "Noted."},
                {"role": "user", "content": "Thanks, that's all."},
            ],
            "Bye!",
            3,
        )
        probe.flush()
        block, _ = probe.ask("edit", "What admin password did I choose for the router?", **LATER)
        both = "ED-1111-OLD" in block
        return (
            "ED-2222-NEW" in block,
            f"edited text in block {'ED-2222-NEW' in block}, replaced text too {both}",
        )

    def edited_info(probe: Probe) -> tuple[bool, str]:
        block, _ = probe.ask("edit", "What admin password did I choose for the router?", **LATER)
        old = "ED-1111-OLD" in block
        return not old, f"the replaced text {'is' if old else 'is not'} in the block"

    def regenerated(probe: Probe) -> tuple[bool, str]:
        history: list[dict[str, Any]] = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": "Suggest a name for my new boat."},
        ]
        send(probe, "regen", history, "How about RG-SEAGULL-1?", 1)
        send(probe, "regen", history, "How about RG-PETREL-2?", 2)
        later = [
            *history,
            {"role": "assistant", "content": "How about RG-PETREL-2?"},
            {"role": "user", "content": "Love it, going with that."},
        ]
        send(probe, "regen", later, "Great choice!", 3)
        probe.flush()
        block, _ = probe.ask("regen", "What name did we pick for my boat?", **LATER)
        kept, thrown = "RG-PETREL-2" in block, "RG-SEAGULL-1" in block
        return kept and not thrown, f"kept answer in block {kept}, thrown-away answer {thrown}"

    return [
        ("rewrite: a user message edited, the edit recalled", edited),
        ("info rewrite: the text the edit replaced, not recalled", edited_info),
        ("info rewrite: a regenerated answer, only the kept one recalled", regenerated),
    ]
