"""Black-box probes of how SDK users and agent frameworks call moim (session 26).

The same real `moim serve` and stand-in (acceptance.py's `running` and `Probe`), the official
openai SDK only. Here: the SDK's own retries (a 500 or 429 answered once, then the same body
again; a client-side timeout, streamed or not; an app retrying after an error event
mid-stream): the turn stored and recalled once, the provider's error passed through as it
said it. Elsewhere: `acceptance_sdk_fields.py`, `parse` with pydantic, the newer request
fields, `with_raw_response` and `with_streaming_response`, models and embeddings, 20 async
conversations of one user; `acceptance_sdk_tools.py`, tool loops as LangChain, LlamaIndex and
the OpenAI Agents SDK send them (the provider gets the client's bytes plus the block, no tool
output stored or recalled as the user's words); `acceptance_sdk_agents.py`, many runs at
once, a handoff, `n=3`; `acceptance_sdk_responses.py`, the Responses API as the Agents SDK
calls it; `acceptance_sdk2.py`, base URLs, default and per-request headers, `extra_body`,
Azure clients, the stored completions API, requests moim or the provider refuses. One line per
check, a total, the exit status is the number of failures; `info` lines (a choice for the
owners) are not counted. Notes: docs/dropin.md, "SDK and agent framework probes, session 26".

    PYTHONPATH=. /work/venv/bin/python bench/acceptance_sdk.py [--keep DIR] [--only TEXT]
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
import openai  # noqa: E402
from starlette.requests import Request  # noqa: E402
from starlette.responses import Response  # noqa: E402
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


def timed_out_then_retried(stream: bool) -> Check:
    """The provider slow past the SDK's timeout once; the SDK sends the same body again."""

    def check(probe: Probe) -> tuple[bool, str]:
        user, code = f"slowretry-{stream}", f"TO-55{int(stream)}1-WX"
        small_talk(probe, user, 2)
        probe.upstream.script[:] = [{"content": "Noted."}, {"content": "Noted."}]
        delay_first(probe, 3.0)
        messages = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"The alarm code for the office is {code}."},
        ]
        made = client(probe, max_retries=1, timeout=1.0).chat.completions.create(
            model=MODEL, messages=messages, stream=stream, extra_headers={"X-Memory-User-Id": user}
        )
        if stream:
            text = "".join(c.choices[0].delta.content or "" for c in made if c.choices)  # type: ignore[union-attr]
        else:
            text = made.choices[0].message.content or ""  # type: ignore[union-attr]
        time.sleep(2.5)  # the first call's provider answer arrives at moim after its client left
        probe.upstream.script.clear()  # the slow first call may not have taken its reply
        stored = [(r, c) for r, c in said(probe, user) if code in c and r == "user"]
        block, _ = probe.ask(user, "What was the office alarm code?", **LATER)
        ok = text == "Noted." and len(stored) == 1 and block.count(code) == 1
        return ok, f"answer {text!r}, stored {len(stored)}x, in the block {block.count(code)}x"

    return check


def error_mid_stream(probe: Probe) -> tuple[bool, str]:
    """A stream that ends in an error event (OpenAI failing mid-reply), the app retrying the
    whole request: the user's turn stored once, recalled once, the half reply not beside it."""
    user, code = "midstream", "MS-3381-VQ"
    small_talk(probe, user, 2)
    chosen = probe.upstream._next_reply
    events = [{"id": "x", "object": "chat.completion.chunk", "created": 1, "model": MODEL,
               "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Your half"},
                            "finish_reason": None}]},
              {"error": {"message": "Server error.", "type": "server_error"}}]  # fmt: skip
    once = [True]

    def reply(model: str, messages: Any, script: Any) -> Any:
        if once and once.pop():
            text = "".join(f"data: {json.dumps(e)}\n\n" for e in events)
            return Response(text, media_type="text/event-stream")
        return chosen(model, messages, script)

    probe.upstream._next_reply = reply  # type: ignore[method-assign]
    messages = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": f"My storage unit is {code}, remind me later."},
    ]
    sdk, heads = client(probe, max_retries=0), {"X-Memory-User-Id": user}
    try:
        for attempt in range(2):  # noqa: B007 - reported below
            try:
                probe.upstream.script[:] = [{"content": "Sure, noted."}]
                made = sdk.chat.completions.create(
                    model=MODEL,
                    messages=messages,
                    stream=True,
                    extra_headers=heads,  # type: ignore[arg-type]
                )
                text = "".join(c.choices[0].delta.content or "" for c in made if c.choices)
                break
            except openai.APIError:
                continue
    finally:
        probe.upstream._next_reply = chosen  # type: ignore[method-assign]
    rows = said(probe, user)
    users = [c for r, c in rows if r == "user" and code in c]
    halves = [c for r, c in rows if "Your half" in c]
    block, _ = probe.ask(user, "What was my storage unit?", **LATER)
    ok = text == "Sure, noted." and len(users) == 1 and block.count(code) == 1
    return ok, (
        f"answer {text!r} (attempt {attempt + 1}), user turn stored {len(users)}x, half reply "
        f"stored {len(halves)}x, in the block {block.count(code)}x, "
        f"half in block {'Your half' in block}"
    )


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


def checks() -> list[tuple[str, Check]]:
    return [
        ("retry: a 500 then 200, stored and recalled once", retried(500)),
        ("retry: a 429 then 200, stored and recalled once", retried(429)),
        ("retry: a 429 passed through unchanged", error_unchanged),
        ("info retry: a relayed error carries x-request-id and x-memory-mode", error_headers),
        (
            "retry: a client timeout retried, stored and recalled once",
            timed_out_then_retried(False),
        ),
        ("retry: a streamed client timeout retried", timed_out_then_retried(True)),
        ("retry: an error event mid-stream, the app retries", error_mid_stream),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", type=Path, help="a directory for the store and log, kept")
    parser.add_argument("--source", type=Path, default=ROOT, help="the build to serve")
    parser.add_argument("--only", help="run the checks whose name has this text")
    args = parser.parse_args()
    from bench.acceptance_sdk2 import checks as more
    from bench.acceptance_sdk_agents import checks as agents
    from bench.acceptance_sdk_fields import checks as fields
    from bench.acceptance_sdk_responses import checks as responses
    from bench.acceptance_sdk_tools import checks as tools

    everything = [*checks(), *fields(), *tools(), *agents(), *responses(), *more()]
    chosen = [c for c in everything if not args.only or args.only in c[0]]
    run_checks(chosen, args.keep, args.source, "moim-accept-sdk-")


if __name__ == "__main__":
    main()
