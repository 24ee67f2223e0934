"""`bench/acceptance_sdk.py`'s probes of how agent apps run many conversations: 20 runs of
one user at once opening alike with no session header, 12 conversations at once under one
session header (`default_headers`), an Agents SDK handoff (the system prompt changes, the
history goes on), `n=3` choices of which the client continues the third.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import httpx
import openai
from starlette.responses import Response

from bench.acceptance import MODEL, SYSTEM, Probe
from bench.acceptance_round2b import exported
from bench.acceptance_sdk import LATER, client, said

Check = Callable[[Probe], tuple[bool, str]]


def same_opening(probe: Probe) -> tuple[bool, str]:
    """20 agent runs of one user at once, no session header, each opening with the same system
    prompt and first message (a template), then each its own detail: every detail stored."""
    user = "template"
    sdk = openai.AsyncOpenAI(base_url=probe.root + "/v1", api_key="sk-test", max_retries=0)
    heads = {"X-Memory-User-Id": user}

    async def one(n: int) -> None:
        history = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": "Hi, I need help with an order."},
        ]
        for text in (f"Order {n}: the tracking code is TR-{n:02d}-{n * 13:04d}.", "Thanks, bye."):
            got = await sdk.chat.completions.create(
                model=MODEL,
                messages=history,
                extra_headers=heads,  # type: ignore[arg-type]
            )
            history += [
                {"role": "assistant", "content": got.choices[0].message.content},
                {"role": "user", "content": text},
            ]
        await sdk.chat.completions.create(model=MODEL, messages=history, extra_headers=heads)  # type: ignore[arg-type]

    async def gather() -> list[Any]:
        return await asyncio.gather(*(one(n) for n in range(20)), return_exceptions=True)

    errors = [r for r in asyncio.run(gather()) if isinstance(r, BaseException)]
    probe.flush()
    text = json.dumps(exported(probe, user))
    kept = [n for n in range(20) if f"TR-{n:02d}-{n * 13:04d}" in text]
    asked = [
        n
        for n in (3, 11, 17)
        if f"TR-{n:02d}-"
        in probe.ask(user, f"What was the tracking code of order {n}?", **LATER)[0]
    ]
    ok = not errors and len(kept) == 20 and len(asked) == 3
    return ok, f"errors {errors[:1]}, stored {len(kept)}/20, recalled {asked} of [3, 11, 17]"


def one_session_header(probe: Probe) -> tuple[bool, str]:
    """A multi-agent app whose client carries one `X-Memory-Session-Id` (`default_headers`)
    for 12 different conversations at once: every detail kept and recalled."""
    user = "onesession"
    heads = {"X-Memory-User-Id": user, "X-Memory-Session-Id": "app-wide"}
    sdk = openai.AsyncOpenAI(
        base_url=probe.root + "/v1", api_key="sk-test", max_retries=0, default_headers=heads
    )

    async def one(n: int) -> None:
        history = [{"role": "system", "content": f"You are sub-agent {n}."}]
        for text in (f"Task {n}: the permit number is PM-{n:02d}-{n * 17:04d}.", "Go on."):
            history.append({"role": "user", "content": text})
            got = await sdk.chat.completions.create(model=MODEL, messages=history)  # type: ignore[arg-type]
            history.append({"role": "assistant", "content": got.choices[0].message.content})

    async def gather() -> list[Any]:
        return await asyncio.gather(*(one(n) for n in range(12)), return_exceptions=True)

    errors = [r for r in asyncio.run(gather()) if isinstance(r, BaseException)]
    probe.flush()
    items = [i for i in exported(probe, user) if i.get("type", "message") == "message"]
    kept = [
        n
        for n in range(12)
        if any(f"PM-{n:02d}-{n * 17:04d}" in i["content"] and i["role"] == "user" for i in items)
    ]
    asked = [
        n
        for n in (2, 7, 10)
        if f"PM-{n:02d}-" in probe.ask(user, f"What was the permit number of task {n}?", **LATER)[0]
    ]
    ok = not errors and len(kept) == 12 and len(asked) == 3
    return (
        ok,
        f"errors {errors[:1]}, user turns kept {len(kept)}/12, recalled {asked} of [2, 7, 10]",
    )


def handoff(probe: Probe) -> tuple[bool, str]:
    """An OpenAI Agents SDK handoff: the triage agent calls `transfer_to_billing_agent`, the
    next request carries the billing agent's instructions as its system prompt and the whole
    history. Every message stored once, the detail recalled once."""
    user, code = "handoff", "AC-7712-BL"
    heads = {"X-Memory-User-Id": user}
    sdk = client(probe, max_retries=0)
    transfer = {"id": "call_h", "type": "function",
                "function": {"name": "transfer_to_billing_agent", "arguments": "{}"}}  # fmt: skip
    said_first = {"role": "user", "content": f"My account is {code} and I was charged twice."}
    probe.upstream.script[:] = [
        {"tool_calls": [{"id": "call_h", "name": "transfer_to_billing_agent", "arguments": "{}"}]},
        {"content": "I see the double charge; refunding it."},
        {"content": "You're welcome."},
    ]
    history = [{"role": "system", "content": "You are the triage agent."}, said_first]
    sdk.chat.completions.create(model=MODEL, messages=history, extra_headers=heads)  # type: ignore[arg-type]
    history = [
        {"role": "system", "content": "You are the billing agent. Fix charges."},
        said_first,
        {"role": "assistant", "content": None, "tool_calls": [transfer]},
        {"role": "tool", "tool_call_id": "call_h", "content": '{"assistant": "Billing Agent"}'},
    ]
    got = sdk.chat.completions.create(model=MODEL, messages=history, extra_headers=heads)  # type: ignore[arg-type]
    history += [{"role": "assistant", "content": got.choices[0].message.content},
                {"role": "user", "content": "Thanks!"}]  # fmt: skip
    sdk.chat.completions.create(model=MODEL, messages=history, extra_headers=heads)  # type: ignore[arg-type]
    rows = said(probe, user)
    firsts = [c for r, c in rows if r == "user" and code in c]
    block, _ = probe.ask(user, "What was my account number?", **LATER)
    ok = len(firsts) == 1 and block.count(code) == 1
    return ok, f"the user's turn stored {len(firsts)}x, in the block {block.count(code)}x"


CHOICES = ["Paint it sage green.", "Paint it navy blue.", "Paint it warm white."]


def three_choices(stream: bool) -> Check:
    """`n=3`: the provider's three choices (streamed interleaved by index); the client goes
    on with the third. The third is what is recalled, not the first."""

    def check(probe: Probe) -> tuple[bool, str]:
        user = f"three-{stream}"
        chosen, once = probe.upstream._next_reply, [True]

        def reply(model: str, messages: Any, script: Any) -> Any:
            if not (once and once.pop()):
                return chosen(model, messages, script)
            if not stream:
                made = [{"index": i, "message": {"role": "assistant", "content": t},
                         "finish_reason": "stop"} for i, t in enumerate(CHOICES)]  # fmt: skip
                body = {"id": "c3", "object": "chat.completion", "created": 1, "model": MODEL,
                        "choices": made}  # fmt: skip
                return Response(json.dumps(body), media_type="application/json")
            head = {"id": "c3", "object": "chat.completion.chunk", "created": 1, "model": MODEL}
            deltas = [(i, {"role": "assistant", "content": ""}) for i in range(3)]
            for w in range(4):
                deltas += [(i, {"content": (" " if w else "") + t.split(" ")[w]})
                           for i, t in enumerate(CHOICES)]  # fmt: skip
            events = [{**head, "choices": [{"index": i, "delta": d, "finish_reason": None}]}
                      for i, d in deltas]  # fmt: skip
            text = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
            return Response(text, media_type="text/event-stream")

        probe.upstream._next_reply = reply  # type: ignore[method-assign]
        sdk, heads = client(probe, max_retries=0), {"X-Memory-User-Id": user}
        history = [{"role": "system", "content": SYSTEM},
                   {"role": "user", "content": "Which colour for the study?"}]  # fmt: skip
        try:
            made = sdk.chat.completions.create(
                model=MODEL,
                messages=history,
                n=3,
                stream=stream,
                extra_headers=heads,  # type: ignore[arg-type]
            )
            got: dict[int, str] = {}
            if stream:
                for chunk in made:  # type: ignore[union-attr]
                    for c in chunk.choices:
                        got[c.index] = got.get(c.index, "") + (c.delta.content or "")
            else:
                got = {c.index: c.message.content or "" for c in made.choices}  # type: ignore[union-attr]
        finally:
            probe.upstream._next_reply = chosen  # type: ignore[method-assign]
        history += [{"role": "assistant", "content": got[2]},
                    {"role": "user", "content": "Great, warm white it is."}]  # fmt: skip
        sdk.chat.completions.create(model=MODEL, messages=history, extra_headers=heads)  # type: ignore[arg-type]
        probe.flush()
        block, _ = probe.ask(user, "Which paint colour did we pick for the study?", **LATER)
        ok = got == dict(enumerate(CHOICES)) and "warm white." in block and "sage" not in block
        return (
            ok,
            f"choices {len(got)}, third in block {'warm white.' in block}, first {'sage' in block}",
        )

    return check


def named_team(probe: Probe) -> tuple[bool, str]:
    """AutoGen-style team: the other agents' messages go as `user` messages with their `name`.
    Are facts read from another agent's words as the user's? (A choice: with several names
    moim cannot tell which one is its user.)"""
    user = "team"
    messages = [
        {"role": "system", "content": "You are the planner in a team."},
        {"role": "user", "name": "Admin", "content": "Plan Kyoto for me. I'm vegetarian."},
        {"role": "user", "name": "Researcher",
         "content": "I live in Osaka and I work as a tour guide. My name is Kenji."},
    ]  # fmt: skip
    probe.chat(user, messages, reply="Here is a plan.")
    probe.flush()
    facts = httpx.get(probe.root + "/v1/memory/facts", headers={"x-memory-user-id": user})
    values = [str(f["value"]) for f in facts.json().get("facts", [])]
    others = [v for v in values if v in ("Osaka", "tour guide", "Kenji")]
    return not others, f"facts {values}, from the Researcher's words {others}"


def checks() -> list[tuple[str, Check]]:
    return [
        ("agents: 20 runs at once opening alike, no session", same_opening),
        ("agents: 12 conversations at once under one session header", one_session_header),
        ("agents: an Agents SDK handoff", handoff),
        ("info agents: a team's named agents as user messages, facts", named_team),
        ("agents: n=3, the client goes on with the third", three_choices(False)),
        ("agents: n=3 streamed, the client goes on with the third", three_choices(True)),
    ]
