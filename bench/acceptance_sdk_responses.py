"""`bench/acceptance_sdk.py`'s probes of the Responses API as the OpenAI Agents SDK (its default
model) and SDK users call it: the SDK's retries and a client timeout, an agent's loop sent whole
each time (`function_call` and `function_call_output` items) or chained by
`previous_response_id`, a handoff (new `instructions`), `responses.parse` with pydantic, 12
async conversations at once. The turn stored once, no tool output stored as the user's words or
read for facts, the body the provider gets the client's plus the block.
"""

from __future__ import annotations

import asyncio
import copy
import json
import time
from collections.abc import Callable
from typing import Any

import httpx
import openai
import pydantic

from bench.acceptance import MODEL, Probe
from bench.acceptance_more import small_talk
from bench.acceptance_round2b import exported, twice
from bench.acceptance_sdk import BUSY, LATER, client, delay_first, said
from bench.locomo import BLOCK_START

Check = Callable[[Probe], tuple[bool, str]]
TOOL_CODE = "RS-TOOL-8841"  # only ever in tool output


def unblocked(body: dict[str, Any]) -> dict[str, Any]:
    """A Responses body less the item (or instructions text) carrying moim's block."""
    body = copy.deepcopy(body)
    if isinstance(body.get("input"), list):
        body["input"] = [i for i in body["input"] if BLOCK_START not in json.dumps(i)]
    return body


def retried_responses(probe: Probe) -> tuple[bool, str]:
    user, code = "rs-retry", "RR-6620-KD"
    small_talk(probe, user, 2)
    probe.upstream.script[:] = [
        {"status": 500, "body": BUSY, "headers": {"retry-after-ms": "1"}},
        {"content": "Noted."},
    ]
    client(probe, max_retries=2).responses.create(
        model=MODEL,
        input=f"My bike frame number is {code}.",
        extra_headers={"X-Memory-User-Id": user},
    )
    stored = [c for r, c in said(probe, user) if r == "user" and code in c]
    block, _ = probe.ask(user, "What was my bike frame number?", **LATER)
    ok = len(stored) == 1 and block.count(code) == 1
    return ok, f"stored {len(stored)}x, in the block {block.count(code)}x"


def timed_out_responses(probe: Probe) -> tuple[bool, str]:
    user, code = "rs-slow", "RT-9920-MC"
    small_talk(probe, user, 2)
    probe.upstream.script[:] = [{"content": "Noted."}, {"content": "Noted."}]
    delay_first(probe, 3.0)
    got = client(probe, max_retries=1, timeout=1.0).responses.create(
        model=MODEL,
        input=[{"role": "user", "content": f"The boiler service code is {code}."}],
        extra_headers={"X-Memory-User-Id": user},
    )
    time.sleep(2.5)
    probe.upstream.script.clear()  # the slow first call may not have taken its reply
    stored = [c for r, c in said(probe, user) if r == "user" and code in c]
    block, _ = probe.ask(user, "What was the boiler service code?", **LATER)
    ok = got.output_text == "Noted." and len(stored) == 1 and block.count(code) == 1
    return (
        ok,
        f"answer {got.output_text!r}, stored {len(stored)}x, in the block {block.count(code)}x",
    )


WEATHER = {
    "type": "function",
    "name": "get_weather",
    "strict": True,
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
}


def agent_run(chained: bool) -> Check:
    """The Agents SDK's run: the question, the model's two calls, their outputs, the answer;
    then the next question. Whole input each time, or chained by `previous_response_id`."""

    def check(probe: Probe) -> tuple[bool, str]:
        user = f"rs-agent-{chained}"
        small_talk(probe, user, 2)
        sdk, heads = client(probe, max_retries=0), {"X-Memory-User-Id": user}
        probe.upstream.script[:] = [
            {"tool_calls": [{"id": f"call_{c}", "name": "get_weather",
                             "arguments": json.dumps({"city": c})} for c in ("Rome", "Oslo")]},
            {"content": "Rome 20C, Oslo 4C."},
            {"content": "Noted."},
        ]  # fmt: skip
        items: list[dict[str, Any]] = [
            {"role": "user", "content": "My pass is PS-4471-RM. Weather in Rome and Oslo?"}
        ]
        options = {"instructions": "You are a travel agent.", "tools": [WEATHER]}
        faithful, previous, new = [], None, items
        for step in range(3):
            sent = items if not chained or previous is None else items[-len(new) :]
            extra = {"previous_response_id": previous} if chained and previous else {}
            body = {"model": MODEL, "input": sent, **options, **extra}
            made = sdk.responses.create(**body, extra_headers=heads)  # type: ignore[call-overload]
            faithful.append(unblocked(probe.upstream.last_responses_json) == body)
            previous, output = made.id, [o.model_dump(exclude_none=True) for o in made.output]
            if step == 0:
                new = [{"type": "function_call_output", "call_id": o["call_id"],
                         "output": json.dumps({"call": o["call_id"], "ref": TOOL_CODE})}
                        for o in output if o["type"] == "function_call"]  # fmt: skip
            else:
                new = [{"role": "user", "content": "Thanks. My seat is 14C."}]
            items += output + new
        rows = said(probe, user)
        doubled = twice(exported(probe, user))
        as_user = [c for r, c in rows if r == "user" and TOOL_CODE in c]
        facts = httpx.get(probe.root + "/v1/memory/facts", headers={"x-memory-user-id": user})
        block, _ = probe.ask(user, "What was my pass number?", **LATER)
        ok = (all(faithful) and not doubled and not as_user and TOOL_CODE not in facts.text
              and "PS-4471-RM" in block)  # fmt: skip
        return ok, (
            f"faithful {faithful}, stored twice {doubled[:2]}, tool output as user "
            f"{len(as_user)}, fact from tool {TOOL_CODE in facts.text}, "
            f"pass in block {'PS-4471-RM' in block}"
        )

    return check


def handoff(probe: Probe) -> tuple[bool, str]:
    """A handoff on the Responses API: the next request has the billing agent's
    `instructions` and the whole input. The user's turn stored and recalled once."""
    user, code = "rs-handoff", "HB-3390-QT"
    sdk, heads = client(probe, max_retries=0), {"X-Memory-User-Id": user}
    probe.upstream.script[:] = [
        {"tool_calls": [{"id": "call_h", "name": "transfer_to_billing", "arguments": "{}"}]},
        {"content": "Refund issued."},
    ]
    items: list[dict[str, Any]] = [
        {"role": "user", "content": f"Account {code} was charged twice."}
    ]
    made = sdk.responses.create(
        model=MODEL, input=items, instructions="You are triage.", extra_headers=heads
    )  # type: ignore[arg-type]
    items += [o.model_dump(exclude_none=True) for o in made.output]
    items.append({"type": "function_call_output", "call_id": "call_h", "output": "{}"})
    sdk.responses.create(
        model=MODEL, input=items, instructions="You are billing.", extra_headers=heads
    )  # type: ignore[arg-type]
    stored = [c for r, c in said(probe, user) if r == "user" and code in c]
    block, _ = probe.ask(user, "Which account was charged twice?", **LATER)
    ok = len(stored) == 1 and block.count(code) == 1
    return ok, f"stored {len(stored)}x, in the block {block.count(code)}x"


class Meal(pydantic.BaseModel):
    dish: str
    people: int


def parsed(probe: Probe) -> tuple[bool, str]:
    probe.upstream.script[:] = [{"content": '{"dish": "paella", "people": 6}'}]
    got = client(probe, max_retries=0).responses.parse(
        model=MODEL,
        input="Paella for 6. My allergy card is AL-2201.",
        text_format=Meal,
        extra_headers={"X-Memory-User-Id": "rs-parse"},
    )
    sent = probe.upstream.last_responses_json.get("text", {}).get("format", {})
    stored = [c for r, c in said(probe, "rs-parse") if r == "user" and "AL-2201" in c]
    ok = got.output_parsed == Meal(dish="paella", people=6) and sent.get("name") == "Meal"
    return ok and len(stored) == 1, f"parsed {got.output_parsed}, format {sent.get('name')}"


def twelve_at_once(probe: Probe) -> tuple[bool, str]:
    user = "rs-swarm"
    sdk = openai.AsyncOpenAI(base_url=probe.root + "/v1", api_key="sk-test", max_retries=0)
    heads = {"X-Memory-User-Id": user}

    async def one(n: int) -> None:
        first = await sdk.responses.create(
            model=MODEL, input=f"Thread {n}: my claim is CL-{n:02d}-{n * 19:04d}.",
            extra_headers=heads, stream=n % 2 == 1,
        )  # fmt: skip
        if n % 2:
            async for event in first:  # type: ignore[union-attr]
                if event.type == "response.completed":
                    previous = event.response.id
        else:
            previous = first.id  # type: ignore[union-attr]
        await sdk.responses.create(
            model=MODEL, input="Thanks.", previous_response_id=previous, extra_headers=heads
        )

    async def gather() -> list[Any]:
        return await asyncio.gather(*(one(n) for n in range(12)), return_exceptions=True)

    errors = [r for r in asyncio.run(gather()) if isinstance(r, BaseException)]
    text = json.dumps([c for r, c in said(probe, user) if r == "user"])
    kept = [n for n in range(12) if f"CL-{n:02d}-{n * 19:04d}" in text]
    return not errors and len(kept) == 12, f"errors {errors[:1]}, user turns kept {len(kept)}/12"


def ids_again(probe: Probe) -> tuple[bool, str]:
    """A provider that gives its reply ids out again (here the stand-in, reset before each
    turn, answers `resp_test_1` each time): every turn stored, each recalled."""
    user, codes = "rs-ids", ["ID-1101-AA", "ID-2202-BB", "ID-3303-CC"]
    sdk = client(probe, max_retries=0)
    for code in codes:
        probe.upstream.reset()
        sdk.responses.create(
            model=MODEL, input=f"Note my reference {code}, please.",
            extra_headers={"X-Memory-User-Id": user},
        )  # fmt: skip
    kept = [c for c in codes if any(c in t for r, t in said(probe, user) if r == "user")]
    return len(kept) == 3, f"user turns stored {len(kept)}/3"


def checks() -> list[tuple[str, Check]]:
    return [
        ("responses: a 500 then 200, stored and recalled once", retried_responses),
        ("responses: a client timeout retried", timed_out_responses),
        ("responses: an agent run sent whole each time", agent_run(False)),
        ("responses: an agent run chained by previous_response_id", agent_run(True)),
        ("responses: a handoff (new instructions)", handoff),
        ("responses: parse with pydantic", parsed),
        ("responses: reply ids the provider gives out again", ids_again),
        ("responses: 12 async conversations at once, half streamed", twelve_at_once),
    ]
