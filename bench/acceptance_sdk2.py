"""`bench/acceptance_sdk.py`'s probes of base URLs, default and per-request headers, `extra_body`,
Azure clients and requests moim or the provider refuses.
"""

from __future__ import annotations

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


def checks() -> list[tuple[str, Check]]:
    hi = {"role": "user", "content": "hi"}
    return [
        ("base url: a trailing slash", base_url("/v1/")),
        ("base url: without /v1", base_url("")),
        ("headers: default_headers, extra_headers win per request", default_headers),
        ("body: extra_body fields reach the provider", extra_body),
        ("azure: AzureOpenAI gets unsupported_path", azure),
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
