"""Black-box probes of how SDK users and agent frameworks call moim (session 26).

The same real `moim serve` and stand-in (acceptance.py's `running` and `Probe`), the official
openai SDK only: the SDK's own retries (a 500 or 429 answered once, then the same body again;
a client-side timeout retried), the error passed through as the provider said it; agent tool
loops as LangChain, LlamaIndex and the OpenAI Agents SDK send them (parallel calls, results as
JSON or as content parts, `tool_choice`, strict schemas, the old `functions`), each reaching
the provider as sent plus the block, no tool output stored or recalled as the user's words;
`parse` with pydantic, the newer request fields, `with_raw_response` and
`with_streaming_response`, models and embeddings, 20 async conversations of one user at once.
Base URLs, default and per-request headers, Azure clients and refused requests are in
`bench/acceptance_sdk2.py`. One line per check, a total, the exit status is the number of
failures; `info` lines (a choice for the owners) are not counted.

    PYTHONPATH=. /work/venv/bin/python bench/acceptance_sdk.py [--keep DIR] [--only TEXT]
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
import openai  # noqa: E402
import pydantic  # noqa: E402
from starlette.requests import Request  # noqa: E402
from starlette.routing import request_response  # noqa: E402

from bench.acceptance import MODEL, SYSTEM, Probe, run_checks  # noqa: E402
from bench.acceptance_more import small_talk  # noqa: E402
from bench.acceptance_round2b import exported  # noqa: E402
from bench.locomo import BLOCK_END, BLOCK_START  # noqa: E402

Check = Callable[[Probe], tuple[bool, str]]
LATER = {"X-Memory-Timestamp": "2026-10-28T09:00:00"}
BUSY = {"error": {"message": "Busy (test).", "type": "server_error", "param": None, "code": None}}


SENT: list[bytes] = []  # the bodies `client`s sent, as bytes


def client(probe: Probe, **options: Any) -> openai.OpenAI:
    """The SDK's client of moim; each request body it sends is kept in `SENT`."""
    hooks = {"request": [lambda request: SENT.append(request.read())]}
    http = httpx.Client(event_hooks=hooks, timeout=options.pop("timeout", 600.0))
    return openai.OpenAI(
        base_url=probe.root + "/v1", api_key="sk-test", http_client=http, **options
    )


def bytes_kept(probe: Probe) -> bool:
    """The last chat body the provider got is the client's bytes with one piece inserted (the
    block), every other byte as the client sent it."""
    got = next(r.body for r in reversed(probe.upstream.requests) if r.path.endswith("/completions"))
    sent = SENT[-1]
    head = next((n for n, (a, b) in enumerate(zip(sent, got, strict=False)) if a != b), len(sent))
    tail = next(
        (n for n, (a, b) in enumerate(zip(sent[::-1], got[::-1], strict=False)) if a != b),
        len(sent),
    )
    return head + tail >= len(sent)


def unblocked(body: dict[str, Any]) -> dict[str, Any]:
    """`body` as the provider got it, less moim's block (and a system message it made)."""
    body = copy.deepcopy(body)
    kept = []
    for message in body.get("messages", []):
        text = message.get("content")
        if message.get("role") == "system" and isinstance(text, str) and BLOCK_START in text:
            head, rest = text.split(BLOCK_START, 1)
            text = (head + rest.split(BLOCK_END, 1)[1]).strip("\n")
            if not text:
                continue
            message["content"] = text
        kept.append(message)
    body["messages"] = kept
    return body


def said(probe: Probe, user: str) -> list[tuple[str, str]]:
    """(role, content) of every message stored for `user`, after a flush."""
    probe.flush()
    items = [i for i in exported(probe, user) if i.get("type", "message") == "message"]
    return [(str(i["role"]), str(i["content"])) for i in items]


def delay_first(probe: Probe, seconds: float) -> None:
    """The stand-in waits `seconds` before reading the next request (once), as a slow provider."""
    route = probe.upstream.app.router.routes[0]
    handle, pending = probe.upstream._handle, [seconds]

    async def slow(request: Request) -> Any:
        if pending:
            await asyncio.sleep(pending.pop())
        return await handle(request)

    route.app = request_response(slow)  # type: ignore[attr-defined]


# -- the SDK's own retries ------------------------------------------------------------------------


def retried(status: int) -> Check:
    def check(probe: Probe) -> tuple[bool, str]:
        user, code = f"retry{status}", f"RT-{status}-QP7"
        small_talk(probe, user, 2)
        probe.upstream.reset()
        probe.upstream.script[:] = [
            {"status": status, "body": BUSY, "headers": {"retry-after-ms": "1"}},
            {"content": "Noted."},
        ]
        messages = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"My parcel locker pin is {code}, keep it."},
        ]
        client(probe, max_retries=2).chat.completions.create(
            model=MODEL, messages=messages, extra_headers={"X-Memory-User-Id": user}
        )
        sent = [r for r in probe.upstream.requests if r.path == "/v1/chat/completions"]
        counts = [r.headers.get("x-stainless-retry-count") for r in sent]
        same = len(sent) == 2 and sent[0].body == sent[1].body
        stored = [c for r, c in said(probe, user) if code in c]
        block, _ = probe.ask(user, "What was my parcel locker pin?", **LATER)
        ok = same and len(stored) == 1 and block.count(code) == 1
        return ok, (
            f"upstream got {len(sent)} (retry counts {counts}, same body {same}), "
            f"stored {len(stored)}x, in the block {block.count(code)}x"
        )

    return check


def error_unchanged(probe: Probe) -> tuple[bool, str]:
    body = {
        "error": {
            "message": "Rate limit (test).",
            "type": "requests",
            "param": None,
            "code": "rate_limit_exceeded",
        }
    }
    headers = {"retry-after": "7", "x-ratelimit-remaining-requests": "0"}
    probe.upstream.script[:] = [{"status": 429, "body": body, "headers": headers}]
    try:
        client(probe, max_retries=0).chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": "hi"}],
            extra_headers={"X-Memory-User-Id": "err429"},
        )
        return False, "no error raised"
    except openai.RateLimitError as exc:
        got = exc.response
        kept = {k: got.headers.get(k) for k in headers}
        ok = got.status_code == 429 and got.json() == body and kept == headers
        return ok, f"status {got.status_code}, headers {kept}, body same {got.json() == body}"


def timed_out_then_retried(probe: Probe) -> tuple[bool, str]:
    """The provider slow past the SDK's timeout once; the SDK sends the same body again."""
    user, code = "slowretry", "TO-5521-WX"
    small_talk(probe, user, 2)
    probe.upstream.script[:] = [{"content": "Noted."}, {"content": "Noted."}]
    delay_first(probe, 3.0)
    messages = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": f"The alarm code for the office is {code}."},
    ]
    client(probe, max_retries=1, timeout=1.0).chat.completions.create(
        model=MODEL, messages=messages, extra_headers={"X-Memory-User-Id": user}
    )
    time.sleep(2.5)  # the first call's provider answer arrives at moim after its client left
    stored = [(r, c) for r, c in said(probe, user) if code in c and r == "user"]
    block, _ = probe.ask(user, "What was the office alarm code?", **LATER)
    ok = len(stored) == 1 and block.count(code) == 1
    return ok, f"stored {len(stored)}x, in the block {block.count(code)}x"


def error_headers(probe: Probe) -> tuple[bool, str]:
    """A provider error relayed: does it carry moim's x-memory-* headers (a chat response)?"""
    probe.upstream.script[:] = [{"status": 429, "body": BUSY, "headers": {"retry-after": "1"}}]
    try:
        client(probe, max_retries=0).chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": "hi"}],
            extra_headers={"X-Memory-User-Id": "errh"},
        )
        return False, "no error"
    except openai.RateLimitError as exc:
        names = sorted(
            h for h in exc.response.headers if h.startswith("x-memory") or h == "x-request-id"
        )
        return "x-request-id" in names and "x-memory-mode" in names, f"headers {names}"


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
        ("retry: a 500 then 200, stored and recalled once", retried(500)),
        ("retry: a 429 then 200, stored and recalled once", retried(429)),
        ("retry: a 429 passed through unchanged", error_unchanged),
        ("info retry: a relayed error carries x-request-id and x-memory-mode", error_headers),
        ("retry: a client timeout retried, stored and recalled once", timed_out_then_retried),
        ("fields: beta parse with pydantic", parsed),
        ("fields: developer role, newer fields", newer_fields(False, 1)),
        ("fields: streamed n=3, include_usage, newer fields", newer_fields(True, 3)),
        ("raw: with_raw_response headers", raw_headers(False)),
        ("raw: with_streaming_response headers", raw_headers(True)),
        ("endpoints: models.list and embeddings passed through", other_endpoints),
        ("async: 20 conversations of one user at once", twenty_at_once),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", type=Path, help="a directory for the store and log, kept")
    parser.add_argument("--source", type=Path, default=ROOT, help="the build to serve")
    parser.add_argument("--only", help="run the checks whose name has this text")
    args = parser.parse_args()
    from bench.acceptance_sdk2 import checks as more
    from bench.acceptance_sdk_tools import checks as tools

    everything = [*checks(), *tools(), *more()]
    chosen = [c for c in everything if not args.only or args.only in c[0]]
    run_checks(chosen, args.keep, args.source, "moim-accept-sdk-")


if __name__ == "__main__":
    main()
