"""`bench/acceptance_sdk.py`'s probes of the SDK's newer request fields (`parse` with
pydantic, `developer`, `max_completion_tokens`, `reasoning_effort`, `store`, `metadata`,
`prediction`, `seed`, logprobs, streamed `n=3` with the usage chunk), `with_raw_response` and
`with_streaming_response`, models and embeddings, and 20 async conversations of one user at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import openai
import pydantic

from bench.acceptance import MODEL, SYSTEM, Probe
from bench.acceptance_round2b import exported
from bench.acceptance_sdk import LATER, bytes_kept, client, said, unblocked

Check = Callable[[Probe], tuple[bool, str]]


# -- newer request fields, structured output -----------------------------------------------------


class Trip(pydantic.BaseModel):
    city: str
    nights: int


def parsed(probe: Probe) -> tuple[bool, str]:
    probe.upstream.json_script[:] = [{"content": '{"city": "Lisbon", "nights": 3}'}]
    messages = [{"role": "user", "content": "Plan: Lisbon, 3 nights. My visa ref is VS-2231-PL."}]
    got = client(probe, max_retries=0).beta.chat.completions.parse(
        model=MODEL,
        messages=messages,
        response_format=Trip,  # type: ignore[arg-type]
        extra_headers={"X-Memory-User-Id": "parse"},
    )
    sent = probe.upstream.last_json
    schema = sent.get("response_format", {}).get("json_schema", {}).get("name")
    trip = got.choices[0].message.parsed
    stored = [c for r, c in said(probe, "parse") if r == "user" and "VS-2231-PL" in c]
    ok = trip == Trip(city="Lisbon", nights=3) and schema == "Trip" and len(stored) == 1
    return ok, f"parsed {trip}, schema {schema}, user turn stored {len(stored)}x"


def stream_helper(probe: Probe) -> tuple[bool, str]:
    """`client.chat.completions.stream(..., response_format=Model)`: the SDK's stream manager
    reads the events and parses the final completion."""
    probe.upstream.json_script[:] = [{"content": '{"city": "Porto", "nights": 2}'}]
    messages = [{"role": "user", "content": "Plan: Porto, 2 nights. My rail pass is RP-5120."}]
    with client(probe, max_retries=0).chat.completions.stream(
        model=MODEL, messages=messages, response_format=Trip,  # type: ignore[arg-type]
        extra_headers={"X-Memory-User-Id": "streamparse"},
    ) as events:  # fmt: skip
        kinds = {event.type for event in events}
        final = events.get_final_completion()
    trip = final.choices[0].message.parsed
    stored = [c for r, c in said(probe, "streamparse") if r == "user" and "RP-5120" in c]
    ok = trip == Trip(city="Porto", nights=2) and "content.done" in kinds and len(stored) == 1
    return ok, f"parsed {trip}, events {sorted(kinds)[:4]}, stored {len(stored)}x"


NEWER = {
    "max_completion_tokens": 77,
    "reasoning_effort": "low",
    "store": True,
    "metadata": {"app": "probe"},
    "seed": 42,
    "logprobs": True,
    "top_logprobs": 2,
    "prediction": {"type": "content", "content": "Noted."},
    "service_tier": "auto",
}


def newer_fields(stream: bool, n: int) -> Check:
    def check(probe: Probe) -> tuple[bool, str]:
        messages = [
            {"role": "developer", "content": "Answer briefly."},
            {"role": "user", "content": "My library card is LC-88120-Q, remember it."},
        ]
        body: dict[str, Any] = {"model": MODEL, "messages": messages, "n": n, **NEWER}
        if stream:
            body |= {"stream": True, "stream_options": {"include_usage": True}}
        user = f"newer-{stream}-{n}"
        made = client(probe, max_retries=0).chat.completions.create(
            **body, extra_headers={"X-Memory-User-Id": user}
        )
        usage = None
        if stream:
            usage = [c.usage for c in made if c.usage is not None]  # type: ignore[union-attr]
        faithful = unblocked(probe.upstream.last_json) == body and bytes_kept(probe)
        block, _ = probe.ask(user, "What's my library card number?", **LATER)
        ok = faithful and (not stream or len(usage or []) == 1) and "LC-88120-Q" in block
        return (
            ok,
            f"faithful {faithful}, usage chunks {usage and len(usage)}, "
            f"recalled {'LC-88120-Q' in block}",
        )

    return check


# -- raw responses, other endpoints ---------------------------------------------------------------


def raw_headers(streamed: bool) -> Check:
    def check(probe: Probe) -> tuple[bool, str]:
        sdk = client(probe, max_retries=0).chat.completions
        body = {"model": MODEL, "messages": [{"role": "user", "content": "Hello there"}]}
        heads = {"X-Memory-User-Id": "rawh", "X-Memory-Session-Id": "rawh-1"}
        if streamed:
            with sdk.with_streaming_response.create(
                **body, stream=True, extra_headers=heads
            ) as response:
                headers, text = response.headers, b"".join(response.iter_bytes())
                ok_body = text.rstrip().endswith(b"data: [DONE]")
        else:
            raw = sdk.with_raw_response.create(**body, extra_headers=heads)
            headers, ok_body = raw.headers, raw.parse().choices[0].message.content is not None
        need = [
            "x-memory-mode",
            "x-memory-tier",
            "x-memory-fill-ratio",
            "x-memory-tokens-injected",
            "x-memory-session-id",
            "x-request-id",
        ]
        missing = [h for h in need if h not in headers]
        right = (
            headers.get("x-memory-session-id") == "rawh-1"
            and headers.get("x-memory-mode") == "auto"
        )
        return ok_body and not missing and right, f"missing {missing}, session/mode right {right}"

    return check


def other_endpoints(probe: Probe) -> tuple[bool, str]:
    sdk = client(probe, max_retries=0)
    probe.upstream.reset()
    models = [m.id for m in sdk.models.list()]
    vectors = sdk.embeddings.create(model="text-embedding-3-small", input=["one", "two"])
    paths = [r.path for r in probe.upstream.requests]
    ok = bool(models) and len(vectors.data) == 2 and paths == ["/v1/models", "/v1/embeddings"]
    return ok, f"models {models[:3]}, vectors {len(vectors.data)}, upstream saw {paths}"


# -- async, many conversations at once ------------------------------------------------------------


def twenty_at_once(probe: Probe) -> tuple[bool, str]:
    user = "swarm"
    sdk = openai.AsyncOpenAI(base_url=probe.root + "/v1", api_key="sk-test", max_retries=0)

    async def one(n: int) -> list[int]:
        history = [{"role": "system", "content": SYSTEM}]
        statuses = []
        for turn, text in enumerate(
            [
                f"Conversation {n}: my token is SW-{n:02d}-{n * 7:03d}.",
                f"Conversation {n} second turn, thanks.",
            ]
        ):
            history.append({"role": "user", "content": text})
            raw = await sdk.chat.completions.with_raw_response.create(
                model=MODEL,
                messages=history,  # type: ignore[arg-type]
                extra_headers={
                    "X-Memory-User-Id": user,
                    "X-Memory-Session-Id": f"sw-{n}",
                    "X-Memory-Timestamp": f"2026-09-{n + 1:02d}T10:0{turn}:00",
                },
            )
            statuses.append(raw.http_response.status_code)
            history.append({"role": "assistant", "content": raw.parse().choices[0].message.content})
        return statuses

    async def gather() -> list[Any]:
        return await asyncio.gather(*(one(n) for n in range(20)), return_exceptions=True)

    results = asyncio.run(gather())
    errors = [r for r in results if isinstance(r, BaseException)]
    probe.flush()
    items = [i for i in exported(probe, user) if i.get("type", "message") == "message"]
    crossed = [
        i["session_id"]
        for i in items
        if f"SW-{int(i['session_id'][3:]):02d}-" not in i["content"]
        and "Conversation " in i["content"]
        and f"Conversation {int(i['session_id'][3:])} " not in i["content"]
    ]
    users = [i for i in items if i["role"] == "user"]
    ok = not errors and len(users) == 40 and not crossed
    return ok, f"errors {errors[:1]}, user turns stored {len(users)}/40, cross-talk {crossed[:3]}"


def checks() -> list[tuple[str, Check]]:
    return [
        ("fields: beta parse with pydantic", parsed),
        ("fields: the SDK's stream helper with a pydantic format", stream_helper),
        ("fields: developer role, newer fields", newer_fields(False, 1)),
        ("fields: streamed n=3, include_usage, newer fields", newer_fields(True, 3)),
        ("raw: with_raw_response headers", raw_headers(False)),
        ("raw: with_streaming_response headers", raw_headers(True)),
        ("endpoints: models.list and embeddings passed through", other_endpoints),
        ("async: 20 conversations of one user at once", twenty_at_once),
    ]
