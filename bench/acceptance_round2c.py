"""`bench/acceptance_round2.py`'s probes of a conversation the client rewrote: a user message
edited (the conversation goes on from the edit), an answer regenerated.

Asked in a new conversation, the edited text is recalled (counted); whether the text it
replaced, or the answer the client threw away, comes back beside it is a choice for the
owners (`info`).
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from bench.acceptance import MODEL, SYSTEM, Probe, long_history
from bench.acceptance_more import END, START, talk
from bench.acceptance_round2 import LATER, Check, talk_at_once
from bench.acceptance_round2b import exported
from bench.locomo import block_of
from memory import count_message_tokens
from memory.block.tokens import count_tokens


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


def inflight_checks() -> list[tuple[str, Check]]:
    def forget_own_stream(probe: Probe) -> tuple[bool, str]:
        talk(probe, "ow", "ow-0", [("My old pager is PG-1212-OW.", "OK.")], "2026-09-27")
        probe.flush()
        probe.upstream.script.append({"content": "Your token is TK-3434-OW. " * 8, "delay": 0.05})
        got, status = "", 0
        with probe.client.chat.completions.create(
            model=MODEL,
            stream=True,
            messages=[{"role": "user", "content": "My new pager is PG-5656-OW, give me a token."}],
            extra_headers={"X-Memory-User-Id": "ow", "X-Memory-Session-Id": "ow-1"},
        ) as chunks:
            for chunk in chunks:
                if chunk.choices and not got:
                    status = httpx.delete(
                        probe.root + "/v1/memory", headers={"x-memory-user-id": "ow"}
                    ).status_code
                if chunk.choices:
                    got += chunk.choices[0].delta.content or ""
        probe.flush()
        text = json.dumps(exported(probe, "ow"))
        back = [c for c in ("PG-1212-OW", "PG-5656-OW", "TK-3434-OW") if c in text]
        return status == 200 and not back and bool(got), f"delete {status}, stored after it {back}"

    def derived_in_parallel(probe: Probe) -> tuple[bool, str]:
        lines = [
            ("I'm planning the garden shed build.", "The shed kit number is SK-7001-PA."),
            ("I'm sorting out my tax return.", "My tax reference is TX-7002-PB."),
        ]
        errors = talk_at_once(
            probe,
            "dp",
            [
                (
                    None,
                    [(opening, "Sure."), (said, "Noted."), ("Thanks.", "Anytime.")],
                    "2026-09-28",
                )
                for opening, said in lines
            ],
        )
        probe.flush()
        items = [i for i in exported(probe, "dp") if i.get("role") in ("user", "assistant")]
        sessions: dict[str, str] = {}
        for item in items:
            sessions[item["session_id"]] = sessions.get(item["session_id"], "") + item["content"]
        mixed = [s for s, text in sessions.items() if "SK-7001" in text and "TX-7002" in text]
        a, _ = probe.ask("dp", "What's the shed kit number?", **LATER)
        b, _ = probe.ask("dp", "What's my tax reference?", **LATER)
        ok = not errors and len(sessions) == 2 and not mixed and "SK-7001-PA" in a
        ok = ok and "TX-7002-PB" in b
        return ok, (
            f"errors {errors[:1]}, {len(items)} messages in {len(sessions)} sessions, "
            f"mixed {len(mixed)}, shed {'SK-7001-PA' in a}, tax {'TX-7002-PB' in b}"
        )

    return [
        ("forget: the user's own stream in flight stores nothing", forget_own_stream),
        ("concurrency: two conversations at once, no session id, kept apart", derived_in_parallel),
    ]


def full_window_checks() -> list[tuple[str, Check]]:
    def tools_fill_it(probe: Probe, count: int) -> tuple[bool, str]:
        user = f"fw{count}"
        said = [("My gym locker combination is 31-07-19.", "OK.")]
        talk(probe, user, f"{user}-1", said, "2026-09-04")
        probe.flush()
        props = {f"f_{n}": {"type": "string", "description": "a field " * 60} for n in range(50)}
        schema = {"type": "object", "properties": props}
        tools = [
            {"type": "function", "function": {"name": f"t_{k}", "parameters": schema}}
            for k in range(count)
        ]
        messages = long_history(57_000)
        messages[-1] = {"role": "user", "content": "What's my gym locker combination?"}
        probe.upstream.script.append({"content": "ok"})
        raw = probe.client.chat.completions.with_raw_response.create(
            model="gpt-4o",
            messages=messages,  # type: ignore[arg-type]
            tools=tools,  # type: ignore[arg-type]
            extra_headers={"X-Memory-User-Id": user, "X-Memory-Mode": "read"},
        )
        block = block_of(probe.upstream.last_json)
        text = START + block + END if block else ""
        injected = count_tokens(text, "gpt-4o") if text else 0
        tools_t = sum(count_tokens(json.dumps(t), "gpt-4o") for t in tools)
        said_t = int(raw.headers["x-memory-tokens-injected"])
        asked = count_message_tokens(messages, "gpt-4o")
        whole = asked + tools_t + injected
        status = raw.http_response.status_code
        ok = status == 200 and said_t == injected and (whole <= 128_000 or not block)
        return ok, (
            f"messages {asked} + tools {tools_t} + block {injected} = {whole}; status {status}, "
            f"header {said_t}"
        )

    return [
        (
            "shape: tool definitions all but fill the window, the block still fits",
            lambda p: tools_fill_it(p, 10),
        ),
        ("shape: tool definitions overfill the window, no block", lambda p: tools_fill_it(p, 22)),
    ]
