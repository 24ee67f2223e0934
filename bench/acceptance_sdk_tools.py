"""`bench/acceptance_sdk.py`'s probes of agent tool loops as LangChain, LlamaIndex and the
OpenAI Agents SDK send them: parallel calls, results as JSON or content parts, `tool_choice`,
strict schemas, the old `functions`, content None; a loop over requests, a tool's first-person
page. Nothing lost, no tool output stored or recalled as the user's words or read for facts,
each request reaching the provider as sent plus the block.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx

from bench.acceptance import MODEL, SYSTEM, Probe
from bench.acceptance_more import small_talk
from bench.acceptance_round2b import exported, twice
from bench.acceptance_sdk import LATER, bytes_kept, client, said, unblocked
from bench.locomo import block_of

Check = Callable[[Probe], tuple[bool, str]]


WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather in a city.",
        "strict": True,
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
            "additionalProperties": False,
        },
    },
}
TOOL_CODE = "TL-7730-ZZ"  # appears only in tool output


def calls(*cities: str) -> list[dict[str, Any]]:
    return [
        {
            "id": f"call_{c}",
            "type": "function",
            "function": {"name": "get_weather", "arguments": json.dumps({"city": c})},
        }
        for c in cities
    ]


def tool_loop(shape: str) -> list[dict[str, Any]]:
    """A user turn, the assistant's calls, the tools' answers, as `shape` sends them."""
    user = {"role": "user", "content": "My badge number is BD-3319-KM. Weather in Paris and Oslo?"}
    answer = {"temp_c": 12, "station_ref": TOOL_CODE}
    if shape == "functions":  # the old `functions` / `function_call` fields
        call = {"name": "get_weather", "arguments": '{"city": "Paris"}'}
        return [
            user,
            {"role": "assistant", "content": None, "function_call": call},
            {"role": "function", "name": "get_weather", "content": json.dumps(answer)},
        ]
    content: Any = None if shape == "agents" else ""
    assistant = {"role": "assistant", "content": content, "tool_calls": calls("Paris", "Oslo")}
    results = []
    for c in ("Paris", "Oslo"):
        result: Any = json.dumps({**answer, "city": c})
        if shape == "parts":
            result = [{"type": "text", "text": result}]
        message = {"role": "tool", "tool_call_id": f"call_{c}", "content": result}
        if shape == "llamaindex":
            message["name"] = "get_weather"
        results.append(message)
    return [user, assistant, *results]


def agent_loop(shape: str, options: dict[str, Any]) -> Check:
    def check(probe: Probe) -> tuple[bool, str]:
        user = f"agent-{shape}"
        small_talk(probe, user, 2)
        messages = [{"role": "system", "content": SYSTEM}, *tool_loop(shape)]
        body = {"model": MODEL, "messages": messages, **options}
        client(probe, max_retries=0).chat.completions.create(
            **body, extra_headers={"X-Memory-User-Id": user, "X-Memory-Session-Id": user}
        )
        faithful = unblocked(probe.upstream.last_json) == body and bytes_kept(probe)
        rows = said(probe, user)
        as_user = [c for r, c in rows if r == "user" and TOOL_CODE in c]
        facts = httpx.get(probe.root + "/v1/memory/facts", headers={"x-memory-user-id": user})
        from_tool = TOOL_CODE in facts.text
        block, _ = probe.ask(user, "What was my badge number?", **LATER)
        ok = faithful and not as_user and not from_tool and "BD-3319-KM" in block
        return ok, (
            f"faithful {faithful}, tool output stored as user {len(as_user)}, fact from tool "
            f"{from_tool}, badge in block {'BD-3319-KM' in block}"
        )

    return check


def loop_over_requests(stream: bool) -> Check:
    """An agent's loop as it is sent: the question (the model calls two tools, streamed or
    not), the calls and their results (the model answers), the next question. Each message
    stored once; the block the same at each step of one question (the provider's cache)."""

    def check(probe: Probe) -> tuple[bool, str]:
        user = f"loop-{stream}"
        small_talk(probe, user, 2)
        sdk, heads = client(probe, max_retries=0), {"X-Memory-User-Id": user}
        probe.upstream.script[:] = [
            {
                "tool_calls": [
                    {"id": f"call_{c}", "name": "get_weather", "arguments": json.dumps({"city": c})}
                    for c in ("Paris", "Oslo")
                ]
            },
            {"content": "12C in Paris, 8C in Oslo."},
            {"content": "Noted."},
        ]
        history: list[dict[str, Any]] = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": "My badge is BD-6604-LP. Weather in Paris and Oslo?"},
        ]
        blocks = []
        for step in range(3):
            made = sdk.chat.completions.create(
                model=MODEL,
                messages=history,
                tools=[WEATHER],
                stream=stream,  # type: ignore[arg-type]
                extra_headers=heads,
            )
            blocks.append(block_of(probe.upstream.last_json))
            if stream:
                text, ids = "", []
                for chunk in made:  # type: ignore[union-attr]
                    delta = chunk.choices[0].delta if chunk.choices else None
                    text += (delta and delta.content) or ""
                    ids += [c.id for c in (delta and delta.tool_calls) or [] if c.id]
            else:
                message = made.choices[0].message  # type: ignore[union-attr]
                text, ids = message.content or "", [c.id for c in message.tool_calls or []]
            if step == 0:
                history.append(
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [c for c in calls("Paris", "Oslo") if c["id"] in ids],
                    }
                )
                for c in ("Paris", "Oslo"):
                    history.append(
                        {
                            "role": "tool",
                            "tool_call_id": f"call_{c}",
                            "content": json.dumps({"temp_c": 12, "city": c}),
                        }
                    )
            else:
                history += [
                    {"role": "assistant", "content": text},
                    {"role": "user", "content": "Thanks. And my locker is LK-5512."},
                ]
        rows = said(probe, user)
        doubled = twice(exported(probe, user))
        tools = [c for r, c in rows if r == "tool"]
        badge = "BD-6604-LP" in probe.ask(user, "What's my badge number?", **LATER)[0]
        locker = "LK-5512" in probe.ask(user, "What's my locker number?", **LATER)[0]
        ok = not doubled and len(tools) == 2 and badge and locker
        same = blocks[0] == blocks[1]
        return ok, (
            f"stored twice {doubled[:3]}, tool results {len(tools)}, recalled badge {badge} "
            f"locker {locker}, block same at step 2 {same}"
        )

    return check


def web_page_said(probe: Probe) -> tuple[bool, str]:
    """A search tool's result written in the first person (a stranger's page): not read as
    facts about the user, not recalled as the user's words."""
    user = "webtool"
    page = (
        "About me: my name is Gunnar Holt, I live in Tromsø and I work as a dentist. "
        "My phone number is +47 912 33 480."
    )
    messages = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Find me a dentist in Tromsø."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_w",
                    "type": "function",
                    "function": {"name": "web_search", "arguments": '{"q": "dentist Tromso"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_w", "content": page},
    ]
    probe.chat(user, messages, reply="Gunnar Holt is a dentist there.")
    facts = httpx.get(probe.root + "/v1/memory/facts", headers={"x-memory-user-id": user})
    wrong = [
        f["value"]
        for f in facts.json().get("facts", [])
        if any(w in str(f["value"]) for w in ("Gunnar", "Tromsø", "dentist", "912"))
    ]
    block, _ = probe.ask(user, "What's my phone number?", **LATER)
    as_user = [line for line in block.splitlines() if "912 33 480" in line and "ser:" in line]
    ok = not wrong and not as_user
    return ok, f"facts from the page {wrong}, page recalled as the user's {as_user[:1]}"


FORCED = {
    "tools": [WEATHER],
    "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
    "parallel_tool_calls": False,
}
OLD = {"functions": [WEATHER["function"]], "function_call": "auto"}


def tool_check(name: str, shape: str, options: dict[str, Any]) -> tuple[str, Check]:
    return f"tools: {name}", agent_loop(shape, options)


def langchain_resent(probe: Probe) -> tuple[bool, str]:
    """LangChain parses a call's arguments and sends them back re-serialised (`json.dumps`,
    spaces, `ensure_ascii=False`) with content None: the same call, stored once."""
    user = "lc-resent"
    small_talk(probe, user, 2)
    sdk, heads = client(probe, max_retries=0), {"X-Memory-User-Id": user}
    compact = '{"city":"Troms\\u00f8","days":2}'
    probe.upstream.script[:] = [
        {"tool_calls": [{"id": "call_t", "name": "get_weather", "arguments": compact}]},
        {"content": "Cold, 2C."},
        {"content": "Noted."},
    ]
    history: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "My ferry booking is FB-2209-NO. Weather in Tromsø?"},
    ]
    made = sdk.chat.completions.create(
        model=MODEL,
        messages=history,
        tools=[WEATHER],
        extra_headers=heads,  # type: ignore[arg-type]
    )
    call = made.choices[0].message.tool_calls[0]  # type: ignore[index]
    args = json.dumps(json.loads(call.function.arguments), ensure_ascii=False)  # type: ignore[union-attr]
    history.append(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "type": "function",
                    "id": call.id,
                    "function": {"name": "get_weather", "arguments": args},
                }
            ],
        }
    )
    history.append({"role": "tool", "tool_call_id": call.id, "content": "2C, snow"})
    made = sdk.chat.completions.create(
        model=MODEL,
        messages=history,
        tools=[WEATHER],
        extra_headers=heads,  # type: ignore[arg-type]
    )
    history.append({"role": "assistant", "content": made.choices[0].message.content})
    history.append({"role": "user", "content": "Thanks!"})
    sdk.chat.completions.create(model=MODEL, messages=history, extra_headers=heads)  # type: ignore[arg-type]
    probe.flush()
    items = [i for i in exported(probe, user) if i.get("type", "message") == "message"]
    session = [i for i in items if "FB-2209-NO" in i["content"]][0]["session_id"]
    mine = [i for i in items if i["session_id"] == session]
    roles = [i["role"] for i in mine]
    block, _ = probe.ask(user, "What was my ferry booking?", **LATER)
    ok = roles.count("assistant") == 3 and roles.count("user") == 2 and "FB-2209-NO" in block
    return ok, f"stored roles {roles}, booking recalled {'FB-2209-NO' in block}"


def checks() -> list[tuple[str, Check]]:
    return [
        tool_check("LangChain parallel calls, JSON results", "langchain", {"tools": [WEATHER]}),
        tool_check("Agents SDK content None, forced choice", "agents", FORCED),
        tool_check("results as content parts", "parts", {"tools": [WEATHER]}),
        tool_check("LlamaIndex named tool messages", "llamaindex", {"tools": [WEATHER]}),
        tool_check("the old functions/function_call", "functions", OLD),
        ("tools: an agent loop over requests", loop_over_requests(False)),
        ("tools: an agent loop over requests, streamed", loop_over_requests(True)),
        ("tools: a first-person web page from a tool", web_page_said),
        ("tools: LangChain resends a call re-serialised", langchain_resent),
    ]
