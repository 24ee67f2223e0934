"""`bench/acceptance_sdk.py`'s probes of base URLs, default and per-request headers, `extra_body`,
Azure clients and requests moim or the provider refuses.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import httpx
import openai

from bench.acceptance import MODEL, SYSTEM, Probe
from bench.acceptance_sdk import LATER, said, unblocked

Check = Callable[[Probe], tuple[bool, str]]


def base_url(suffix: str) -> Check:
    """An SDK whose base URL is moim's root plus `suffix` (a trailing slash, no `/v1`)."""

    def check(probe: Probe) -> tuple[bool, str]:
        user, code = f"base{len(suffix)}", f"BU-{len(suffix)}40-RK"
        sdk = openai.OpenAI(base_url=probe.root + suffix, api_key="sk-test", max_retries=0)
        probe.upstream.script[:] = [{"content": "Noted."}]
        text = f"My gate fob number is {code}."
        sdk.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": text}],
            extra_headers={"X-Memory-User-Id": user},
        )
        stored = [c for r, c in said(probe, user) if code in c and r == "user"]
        block, _ = probe.ask(user, "What was my gate fob number?", **LATER)
        return len(
            stored
        ) == 1 and code in block, f"stored {len(stored)}x, recalled {code in block}"

    return check


def default_headers(probe: Probe) -> tuple[bool, str]:
    """`default_headers` name the user and session; `extra_headers` of one request win."""
    heads = {"X-Memory-User-Id": "dh-one", "X-Memory-Session-Id": "dh-s"}
    sdk = openai.OpenAI(
        base_url=probe.root + "/v1", api_key="sk-test", max_retries=0, default_headers=heads
    )
    first = [{"role": "user", "content": "The shed padlock is PD-1144-SV."}]
    second = [{"role": "user", "content": "The boat mooring is MR-2290-BY."}]
    raw = sdk.chat.completions.with_raw_response.create(model=MODEL, messages=first)  # type: ignore[arg-type]
    sdk.chat.completions.create(
        model=MODEL,
        messages=second,  # type: ignore[arg-type]
        extra_headers={"X-Memory-User-Id": "dh-two", "X-Memory-Session-Id": "dh-t"},
    )
    one = [c for _, c in said(probe, "dh-one")]
    two = [c for _, c in said(probe, "dh-two")]
    ok = (
        raw.headers.get("x-memory-session-id") == "dh-s"
        and any("PD-1144-SV" in c for c in one)
        and not any("MR-2290-BY" in c for c in one)
        and any("MR-2290-BY" in c for c in two)
    )
    return (
        ok,
        f"session {raw.headers.get('x-memory-session-id')}, dh-one {len(one)}, dh-two {len(two)}",
    )


def extra_body(probe: Probe) -> tuple[bool, str]:
    """vLLM / OpenRouter fields sent with `extra_body`: reach the provider as sent."""
    extra = {
        "top_k": 20,
        "chat_template_kwargs": {"enable_thinking": False},
        "provider": {"order": ["a", "b"]},
        "transforms": [],
    }
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Hi there"}]
    sdk = openai.OpenAI(base_url=probe.root + "/v1", api_key="sk-test", max_retries=0)
    sdk.chat.completions.create(
        model=MODEL,
        messages=messages,  # type: ignore[arg-type]
        extra_body=extra,
        extra_headers={"X-Memory-User-Id": "eb"},
    )
    sent = unblocked(probe.upstream.last_json)
    want = {"model": MODEL, "messages": messages, **extra}
    return sent == want, f"sent {sorted(sent)} vs {sorted(want)}"


def azure(probe: Probe) -> tuple[bool, str]:
    """README: `AzureOpenAI` gets a 404 `unsupported_path` saying what to do, nothing sent on."""
    sdk = openai.AzureOpenAI(
        azure_endpoint=probe.root, api_version="2024-10-21", api_key="k", max_retries=0
    )
    probe.upstream.reset()
    try:
        sdk.chat.completions.create(
            model="gpt4o-deploy", messages=[{"role": "user", "content": "hi"}]
        )
        return False, "answered"
    except openai.NotFoundError as exc:
        error = exc.body if isinstance(exc.body, dict) else {}
        code, message = error.get("code"), str(error.get("message", ""))
        ok = code == "unsupported_path" and not probe.upstream.requests
        return ok, f"404 {code}: {message[:90]!r}, upstream requests {len(probe.upstream.requests)}"


PROVIDER_400 = {
    "error": {
        "message": "Invalid value for 'messages' (test).",
        "type": "invalid_request_error",
        "param": "messages",
        "code": None,
    }
}


def refused(name: str, messages: Any, raw: bytes | None = None) -> Check:
    """A request that is not valid chat: a 4xx in OpenAI's error shape and nothing stored,
    whether moim refuses it or passes it on and the provider does (as OpenAI's API would, the
    stand-in answering its 400)."""

    def check(probe: Probe) -> tuple[bool, str]:
        user = f"bad-{name}"
        probe.upstream.reset()
        probe.upstream.script[:] = [{"status": 400, "body": PROVIDER_400}]
        body = (
            raw
            if raw is not None
            else httpx.Request("POST", "/", json={"model": MODEL, "messages": messages}).content
        )
        got = httpx.post(
            probe.root + "/v1/chat/completions",
            content=body,
            timeout=120,
            headers={"content-type": "application/json", "x-memory-user-id": user},
        )
        forwarded = len(probe.upstream.requests)
        probe.upstream.script.clear()
        rows = said(probe, user)
        typed = got.headers.get("content-type", "").startswith("application/json")
        error = got.json().get("error", {}) if typed else {}
        shaped = isinstance(error, dict) and {"message", "type", "param", "code"} <= set(error)
        by = "moim" if not forwarded else "the provider"
        seen = (
            f"{got.status_code} from {by}, code {error.get('code')}, "
            f"param {error.get('param')}, stored {len(rows)}"
        )
        relayed = not forwarded or got.json() == PROVIDER_400
        return 400 <= got.status_code < 500 and shaped and relayed and not rows, seen

    return check


def stored_completions(probe: Probe) -> tuple[bool, str]:
    """The stored chat completions API (`store: true` replies, read back): passed through."""
    sdk = openai.OpenAI(base_url=probe.root + "/v1", api_key="sk-test", max_retries=0)
    probe.upstream.reset()
    calls: list[tuple[str, Callable[[], Any]]] = [
        ("GET /v1/chat/completions", lambda: sdk.chat.completions.list()),
        ("GET /v1/chat/completions/cc1", lambda: sdk.chat.completions.retrieve("cc1")),
        (
            "GET /v1/chat/completions/cc1/messages",
            lambda: sdk.chat.completions.messages.list("cc1"),
        ),
        (
            "POST /v1/chat/completions/cc1",
            lambda: sdk.chat.completions.update("cc1", metadata={"a": "b"}),
        ),
        ("DELETE /v1/chat/completions/cc1", lambda: sdk.chat.completions.delete("cc1")),
    ]
    answered = []
    for _, call in calls:
        try:
            call()
            answered.append("200")
        except openai.APIStatusError as exc:  # the stand-in has no such endpoint: its 404
            answered.append(f"{exc.status_code} {(exc.body or {}).get('code')}")
    seen = [f"{r.method} {r.path}" for r in probe.upstream.requests]
    ok = seen == [name for name, _ in calls]
    return ok, f"upstream saw {seen}, client got {answered}"


def headers_both_ways(probe: Probe) -> tuple[bool, str]:
    """The client's organization, project and SDK headers reach the provider; the provider's
    rate-limit and timing headers reach the client (streamed and not)."""
    sdk = openai.OpenAI(
        base_url=probe.root + "/v1", api_key="sk-test", max_retries=0,
        organization="org-probe", project="proj_probe",
    )  # fmt: skip
    theirs = [(b"x-ratelimit-remaining-tokens", b"149000"), (b"openai-processing-ms", b"321")]
    probe.upstream.reply_headers[:] = theirs
    got = []
    for stream in (False, True):
        raw = sdk.chat.completions.with_raw_response.create(
            model=MODEL, messages=[{"role": "user", "content": "hi"}], stream=stream,
            extra_headers={"X-Memory-User-Id": "hdr"},
        )  # fmt: skip
        got.append({k.decode(): raw.headers.get(k.decode()) for k, _ in theirs})
        sent = probe.upstream.requests[-1].headers
    probe.upstream.reply_headers.clear()
    mine = {k: sent.get(k) for k in ("openai-organization", "openai-project", "x-stainless-lang")}
    ok = mine == {"openai-organization": "org-probe", "openai-project": "proj_probe",
                  "x-stainless-lang": "python"} and all(
        g == {"x-ratelimit-remaining-tokens": "149000", "openai-processing-ms": "321"} for g in got
    )  # fmt: skip
    return ok, f"provider got {mine}, client got {got}"


def safety_identifier(probe: Probe) -> tuple[bool, str]:
    """OpenAI's `safety_identifier` (the SDK's successor of `user`): a memory namespace?"""
    sdk = openai.OpenAI(base_url=probe.root + "/v1", api_key="sk-test", max_retries=0)
    raw = sdk.chat.completions.with_raw_response.create(
        model=MODEL, messages=[{"role": "user", "content": "My kayak is KY-4410."}],
        safety_identifier="safe-user",
    )  # fmt: skip
    stored = said(probe, "safe-user")
    return (
        bool(stored),
        f"stored under it {len(stored)}, session {raw.headers.get('x-memory-session-id')}",
    )


def malformed() -> list[tuple[str, Check]]:
    """Shapes an agent's bug sends: moim refuses them or the provider does; never a 5xx."""
    hi = {"role": "user", "content": "hi"}
    fn = {"name": "f", "arguments": "{}"}
    shapes: dict[str, list[Any]] = {
        "tool_calls an object": [hi, {"role": "assistant", "tool_calls": {"id": "c"}}],
        "a call without function": [hi, {"role": "assistant", "tool_calls": [{"id": "c"}]}],
        "arguments an object": [hi, {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "f", "arguments": {"a": 1}}}]}],
        "a call's name a number": [hi, {"role": "assistant", "tool_calls": [
            {"id": "c", "type": "function", "function": {**fn, "name": 5}}]}],
        "tool_call_id a number": [hi, {"role": "tool", "tool_call_id": 7, "content": "x"}],
        "a text part's text a number": [{"role": "user", "content": [{"type": "text", "text": 5}]}],
        "a part a string": [{"role": "user", "content": ["hi"]}],
        "user content null": [{"role": "user", "content": None}],
        "an empty parts list": [{"role": "user", "content": []}],
        "no content at all": [{"role": "user"}],
        "a part null": [{"role": "user", "content": [None]}],
        "name a number": [{"role": "user", "content": "hi", "name": 5}],
        "role a number": [{"role": 3, "content": "hi"}],
        "function_call a string": [hi, {"role": "assistant", "function_call": "f"}],
        "tool content an object": [hi, {"role": "assistant", "tool_calls": [
            {"id": "c", "type": "function", "function": fn}]},
            {"role": "tool", "tool_call_id": "c", "content": {"temp": 12}}],
    }  # fmt: skip
    return [
        (f"refused: {name}", refused(name.replace(" ", "-")[:20], m)) for name, m in shapes.items()
    ]


def reused_after_refusal(probe: Probe) -> tuple[bool, str]:
    """One client (no retries) gets a 413 for a body over the limit, then sends a normal
    request on its pooled connection: answered, not a connection error."""
    sdk = openai.OpenAI(base_url=probe.root + "/v1", api_key="sk-test", max_retries=0)
    big = [{"role": "user", "content": "a" * (33 * 1024 * 1024)}]
    statuses = []
    for messages in (
        big,
        [{"role": "user", "content": "hi"}],
        big,
        [{"role": "user", "content": "hi"}],
    ):
        try:
            raw = sdk.chat.completions.with_raw_response.create(
                model=MODEL,
                messages=messages,
                extra_headers={"X-Memory-User-Id": "pool"},  # type: ignore[arg-type]
            )
            statuses.append(str(raw.http_response.status_code))
        except openai.APIStatusError as exc:
            statuses.append(str(exc.status_code))
        except openai.APIConnectionError as exc:
            statuses.append(type(exc).__name__)
    return statuses == ["413", "200", "413", "200"], f"statuses {statuses}"


def extra_query(probe: Probe) -> tuple[bool, str]:
    """`extra_query` (a gateway's `api-version`) on a chat request: the query reaches the
    provider as sent."""
    sdk = openai.OpenAI(base_url=probe.root + "/v1", api_key="sk-test", max_retries=0)
    sdk.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "hi"}],
        extra_query={"api-version": "2024-10-21", "tag": "a b"},
        extra_headers={"X-Memory-User-Id": "query"},
    )  # fmt: skip
    sent = probe.upstream.requests[-1].query
    return sent == "api-version=2024-10-21&tag=a+b", f"provider got query {sent!r}"


def many_users_one_client(probe: Probe) -> tuple[bool, str]:
    """A server app: one async client, 20 users at once, each named per request; then each
    asks. Every block holds its own user's code and no other's."""
    sdk = openai.AsyncOpenAI(base_url=probe.root + "/v1", api_key="sk-test", max_retries=0)
    codes = {f"tenant{n}": f"TN-{n:02d}-{n * 31:04d}" for n in range(20)}

    async def say(user: str, code: str) -> None:
        messages = [{"role": "system", "content": SYSTEM},
                    {"role": "user", "content": f"My membership number is {code}."}]  # fmt: skip
        await sdk.chat.completions.create(
            model=MODEL,
            messages=messages,
            extra_headers={"X-Memory-User-Id": user},  # type: ignore[arg-type]
        )

    async def ask(user: str) -> None:
        messages = [{"role": "system", "content": SYSTEM},
                    {"role": "user", "content": "What was my membership number?"}]  # fmt: skip
        await sdk.chat.completions.create(
            model=MODEL, messages=messages,  # type: ignore[arg-type]
            extra_headers={"X-Memory-User-Id": user, "X-Memory-Mode": "read", **LATER},
        )  # fmt: skip

    async def run() -> int:
        await asyncio.gather(*(say(u, c) for u, c in codes.items()))
        await asyncio.to_thread(probe.flush)
        seen_at = len(probe.upstream.requests)
        await asyncio.gather(*(ask(u) for u in codes))
        return seen_at

    seen_at = asyncio.run(run())
    blocks: dict[str, str] = {}
    for recorded in probe.upstream.requests[seen_at:]:
        body = recorded.json or {}
        text = json.dumps(body)
        owners = [u for u, c in codes.items() if c in text]
        blocks[",".join(owners) or "none"] = blocks.get(",".join(owners) or "none", "") + "x"
    crossed = [k for k in blocks if "," in k]
    found = sum(1 for k in blocks if k != "none" and "," not in k)
    return found == 20 and not crossed, f"blocks with one own code {found}/20, mixed {crossed[:2]}"


def checks() -> list[tuple[str, Check]]:
    hi = {"role": "user", "content": "hi"}
    return [
        ("base url: a trailing slash", base_url("/v1/")),
        ("base url: without /v1", base_url("")),
        ("headers: default_headers, extra_headers win per request", default_headers),
        ("body: extra_body fields reach the provider", extra_body),
        ("azure: AzureOpenAI gets unsupported_path", azure),
        ("endpoints: the stored chat completions API passed through", stored_completions),
        ("headers: organization/project to the provider, its headers back", headers_both_ways),
        ("headers: extra_query reaches the provider", extra_query),
        ("async: one client, 20 users at once, no cross-talk", many_users_one_client),
        ("refused: a 413, then the pooled connection reused", reused_after_refusal),
        ("info headers: safety_identifier names the user", safety_identifier),
        (
            "refused: a tool message without tool_call_id",
            refused("tool", [hi, {"role": "tool", "content": "42"}]),
        ),
        ("refused: an unknown role", refused("role", [{"role": "wizard", "content": "hi"}])),
        ("refused: content an object", refused("object", [{"role": "user", "content": {"a": 1}}])),
        (
            "refused: a part of unknown type",
            refused("part", [{"role": "user", "content": [{"type": "blob", "x": 1}]}]),
        ),
        *malformed(),
        (
            "refused: a body over 32 MiB",
            refused(
                "big",
                None,
                b'{"model":"m","messages":[{"role":"user","content":"'
                + b"a" * (33 * 1024 * 1024)
                + b'"}]}',
            ),
        ),
    ]
