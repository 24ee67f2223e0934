"""`bench/acceptance_more.py`'s probes of tiers, isolation, forget and streaming.

Each check reads what the provider received and what the client got through the official
openai SDK; run them with `PYTHONPATH=. python bench/acceptance_more.py`. The checks that
measure a block ask user `wire` for a code it said plainly (stored by the first check), so
that the block is there whatever the abstention gate makes of weaker paraphrases.
"""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import openai

from bench.acceptance import MODEL, SYSTEM, Probe, long_history
from bench.acceptance_more import END, START, Check, found, responses_block, small_talk, talk
from bench.locomo import block_of
from memory.block.tokens import count_tokens

SEAT, CODE, USER = "What's my gym locker combination?", "31-07-19", "wire"


def _history(tokens: int, question: str) -> list[dict[str, Any]]:
    messages = long_history(tokens)
    messages[-1] = {"role": "user", "content": question}
    return messages


# -- tiers ---------------------------------------------------------------------------------------


def tier_checks() -> list[tuple[str, Check]]:
    def big_window(tokens: int, tier: str, most: int, first: bool = False) -> Check:
        def check(probe: Probe) -> tuple[bool, str]:
            if first:
                small_talk(probe, USER, 3)
                said = [(f"My gym locker combination is {CODE}, the one by the sauna.", "OK.")]
                talk(probe, USER, "wire-1", said, "2026-09-04")
            probe.upstream.script.append({"content": "ok"})
            raw = probe.client.chat.completions.with_raw_response.create(
                model="gpt-4o",
                messages=_history(tokens, SEAT),  # type: ignore[arg-type]
                extra_headers={"X-Memory-User-Id": USER, "X-Memory-Mode": "read"},
            )
            h = raw.headers
            block = block_of(probe.upstream.last_json)
            excerpts = block.count("• ")
            ok = h["x-memory-tier"] == tier and excerpts <= most and (CODE in block) == (most > 0)
            ok = ok and int(h["x-memory-chunks-injected"]) == excerpts
            seen = f"ratio {h['x-memory-fill-ratio']}, tier {h['x-memory-tier']}, "
            return ok, seen + f"{excerpts} excerpts, code in block {CODE in block}"

        return check

    def tokens_header(probe: Probe) -> tuple[bool, str]:
        _, raw = probe.ask(USER, SEAT)
        block = block_of(probe.upstream.last_json)
        text = START + block + END if block else ""
        counted = count_tokens(text, MODEL) if text else 0
        said = int(raw.headers["x-memory-tokens-injected"])
        return said == counted > 0, f"header {said}, the block's tokens {counted}"

    def budget(probe: Probe) -> tuple[bool, str]:
        _, free = probe.ask(USER, SEAT)
        _, raw = probe.ask(USER, SEAT, **{"X-Memory-Context-Budget": "60"})
        before, said = (
            int(free.headers["x-memory-tokens-injected"]),
            int(raw.headers["x-memory-tokens-injected"]),
        )
        return before > 60 >= said, f"tokens-injected {before} free, {said} under a budget of 60"

    return [
        ("tiers: gpt-4o at 45% of 128k, tier 0", big_window(57_000, "0", 5, True)),
        ("tiers: gpt-4o at 55% of 128k, tier 1", big_window(70_000, "1", 3)),
        ("tiers: gpt-4o at 65% of 128k, tier 2", big_window(83_000, "2", 2)),
        ("tiers: gpt-4o at 75% of 128k, tier 3", big_window(96_000, "3", 0)),
        ("tiers: x-memory-tokens-injected is the block's tokens", tokens_header),
        ("tiers: X-Memory-Context-Budget caps the block", budget),
    ]


# -- isolation -----------------------------------------------------------------------------------


def isolation_checks() -> list[tuple[str, Check]]:
    def shared_session(probe: Probe) -> tuple[bool, str]:
        talk(probe, "sa", "chat-1", [("My safe combination is 61-22-08.", "OK.")], "2026-09-01")
        talk(probe, "sb", "chat-1", [("Hello there!", "Hi!")], "2026-09-02")
        asked = {"X-Memory-Session-Id": "chat-1"}
        other = probe.ask("sb", "What's my safe combination?", **asked)[0]
        mine = probe.ask("sa", "What's my safe combination?")[0]
        ok = "61-22-08" in mine and "61-22-08" not in other
        return ok, f"owner sees it {'61-22-08' in mine}, other user {'61-22-08' in other}"

    def three_ways(probe: Probe) -> tuple[bool, str]:
        probe.upstream.script.append({"content": "ok"})
        probe.client.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": "My gate code is 3390#."}],
            user="kim",
        )
        path = openai.OpenAI(base_url=probe.root + "/u/kim/v1", api_key="k", max_retries=0)
        probe.upstream.script.append({"content": "ok"})
        path.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": "What's my gate code?"}],
            extra_headers={"X-Memory-Mode": "read"},
        )
        by_path = block_of(probe.upstream.last_json)
        by_header = probe.ask("kim", "What's my gate code?")[0]
        other = probe.ask("kim2", "What's my gate code?")[0]
        seen = [v in b for v, b in (("3390#", by_path), ("3390#", by_header), ("3390#", other))]
        return seen == [True, True, False], f"path, header, another user: {seen}"

    def header_beats_body(probe: Probe) -> tuple[bool, str]:
        probe.upstream.script.append({"content": "ok"})
        probe.client.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": "My shed padlock is 8127."}],
            user="body-id",
            extra_headers={"X-Memory-User-Id": "head-id"},
        )
        head = probe.ask("head-id", "What's my shed padlock code?")[0]
        body = probe.ask("body-id", "What's my shed padlock code?")[0]
        ok = "8127" in head and "8127" not in body
        return ok, f"header's user {'8127' in head}, body's user {'8127' in body}"

    def concurrent(probe: Probe) -> tuple[bool, str]:
        """Eight users asking at once, each about a code of their own said a moment before."""
        users = [f"par-{n}" for n in range(8)]
        for n, user in enumerate(users):
            talk(
                probe,
                user,
                f"{user}-1",
                [(f"My desk number is D-{4100 + n}.", "OK.")],
                "2026-09-01",
            )
        client = openai.OpenAI(base_url=probe.root + "/v1", api_key="sk-test", max_retries=0)

        def ask(user: str) -> dict[str, str]:
            raw = client.chat.completions.with_raw_response.create(
                model="gpt-4o-mini",
                messages=[{"role": "user", "content": "What's my desk number?"}],
                extra_headers={"X-Memory-User-Id": user, "X-Memory-Mode": "read"},
            )
            return dict(raw.headers)

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(ask, users * 3))
        wrong = []
        for recorded in probe.upstream.requests[-24:]:
            block = block_of(recorded.json) if recorded.json else ""
            codes = set(re.findall(r"D-41\d\d", block))
            if len(codes) != 1:
                wrong.append(sorted(codes))
        return not wrong, f"blocks with other users' codes or none: {wrong[:4]}" if wrong else (
            "24 blocks, each with one code"
        )

    return [
        ("isolation: eight users asking at once", concurrent),
        ("isolation: one session id, two users", shared_session),
        ("isolation: body `user`, header and path are one user", three_ways),
        ("isolation: the header's user beats the body's", header_beats_body),
    ]


# -- forget --------------------------------------------------------------------------------------


def forget_checks() -> list[tuple[str, Check]]:
    def delete(probe: Probe, path: str, user: str) -> int:
        url = probe.root + path
        return httpx.delete(url, headers={"x-memory-user-id": user}).status_code

    def session(probe: Probe) -> tuple[bool, str]:
        talk(probe, "fs", "fs-a", [("My bank PIN hint is tulip-42.", "OK.")], "2026-09-01")
        talk(probe, "fs", "fs-b", [("My gym membership is GM-5521.", "OK.")], "2026-09-02")
        before = probe.ask("fs", "What's my bank PIN hint?")[0]
        status = delete(probe, "/v1/memory/sessions/fs-a", "fs")
        a = probe.ask("fs", "What's my bank PIN hint?")[0]
        b = probe.ask("fs", "What's my gym membership number?")[0]
        ok = "tulip-42" in before and status == 200 and "tulip-42" not in a and "GM-5521" in b
        return ok, f"before {'tulip-42' in before}, delete {status}, after {'tulip-42' in a}, " + (
            f"other kept {'GM-5521' in b}"
        )

    def derived(probe: Probe) -> tuple[bool, str]:
        pairs = [("My storage unit is U-118 at SafeStore.", "OK.")]
        raw = talk(probe, "fd", None, pairs, "2026-09-01")
        before = probe.ask("fd", "Which storage unit is mine?")[0]
        session_id = raw.headers["x-memory-session-id"]
        status = delete(probe, f"/v1/memory/sessions/{session_id}", "fd")
        after = probe.ask("fd", "Which storage unit is mine?")[0]
        ok = "U-118" in before and status == 200 and "U-118" not in after
        return ok, f"before {'U-118' in before}, {session_id!r} delete {status}, " + (
            f"after {'U-118' in after}"
        )

    def other_user(probe: Probe) -> tuple[bool, str]:
        talk(probe, "fx", "fx-1", [("My locker is number 77-K.", "OK.")], "2026-09-01")
        talk(probe, "fy", "fy-1", [("My locker is number 91-J.", "OK.")], "2026-09-01")
        delete(probe, "/v1/memory", "fx")
        gone = probe.ask("fx", "What's my locker number?")[0]
        kept = probe.ask("fy", "What's my locker number?")[0]
        ok = "77-K" not in gone and "91-J" in kept
        return ok, f"forgotten user sees 77-K {'77-K' in gone}, other sees 91-J {'91-J' in kept}"

    def at_once(probe: Probe) -> tuple[bool, str]:
        """A code said, then the user forgotten (and a session) before the writer stored it."""
        talk(probe, "quick", "q-1", [("My alarm PIN is 7402.", "OK.")], "2026-09-01")
        user = delete(probe, "/v1/memory", "quick")
        talk(probe, "quick2", "q2-1", [("My alarm PIN is 8813.", "OK.")], "2026-09-01")
        talk(probe, "quick2", "q2-2", [("My bike is a Brompton.", "OK.")], "2026-09-02")
        one = delete(probe, "/v1/memory/sessions/q2-1", "quick2")
        gone = probe.ask("quick", "What's my alarm PIN?")[0]
        gone2 = probe.ask("quick2", "What's my alarm PIN?")[0]
        ok = (user, one) == (200, 200) and "7402" not in gone and "8813" not in gone2
        return ok, f"deletes {user}/{one}, user's PIN back {'7402' in gone}, " + (
            f"session's PIN back {'8813' in gone2}"
        )

    return [
        ("forget: at once, before the writer stored the turn", at_once),
        ("forget: DELETE a session, the other session kept", session),
        ("forget: DELETE a derived session by its header's id", derived),
        ("forget: one user forgotten, another kept", other_user),
    ]


# -- streaming -----------------------------------------------------------------------------------


def _responses_bytes(base: str, body: dict[str, Any], headers: dict[str, str]) -> bytes:
    client = openai.OpenAI(base_url=base, api_key="sk-test", max_retries=0)
    with client.responses.with_streaming_response.create(**body, extra_headers=headers) as r:
        return b"".join(r.iter_bytes())


def _chat_bytes(base: str, body: dict[str, Any], headers: dict[str, str]) -> tuple[bytes, Any]:
    client = openai.OpenAI(base_url=base, api_key="sk-test", max_retries=0)
    with client.chat.completions.with_streaming_response.create(**body, extra_headers=headers) as r:
        return b"".join(r.iter_bytes()), r.headers


def streaming_checks() -> list[tuple[str, Check]]:
    def responses_stream(probe: Probe) -> tuple[bool, str]:
        body = {"model": MODEL, "stream": True, "input": SEAT, "instructions": SYSTEM}
        probe.upstream.reset()
        got = _responses_bytes(probe.root + "/v1", body, {"X-Memory-User-Id": USER})
        sent = probe.upstream.last_responses_json
        probe.upstream.reset()
        direct = _responses_bytes(probe.upstream.url, sent, {})
        block = responses_block(sent)
        ok = got == direct and CODE in block
        return ok, f"{len(got)} bytes vs {len(direct)}, code in block {CODE in block}"

    def n_two(probe: Probe) -> tuple[bool, str]:
        body = {"model": MODEL, "stream": True, "n": 2, "stream_options": {"include_usage": True}}
        body["messages"] = [{"role": "user", "content": SEAT}]
        probe.upstream.reset()
        got, headers = _chat_bytes(probe.root + "/v1", body, {"X-Memory-User-Id": USER})
        sent = probe.upstream.last_json
        probe.upstream.reset()
        upstream, _ = _chat_bytes(probe.upstream.url, sent, {})
        block, tier = block_of(sent), headers.get("x-memory-tier")
        ok = got == upstream and sent.get("n") == 2 and tier == "0" and CODE in block
        return ok, f"{len(got)} vs {len(upstream)} bytes, n={sent.get('n')}, tier {tier}"

    def streamed_reply(probe: Probe) -> tuple[bool, str]:
        probe.upstream.script.append({"content": "Your rebooking code is RB-40021, keep it."})
        stream = probe.client.chat.completions.create(
            model=MODEL,
            stream=True,
            messages=[{"role": "user", "content": "Please rebook my cancelled train."}],
            extra_headers={"X-Memory-User-Id": "strm"},
        )
        "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
        return found("RB-40021", probe.ask("strm", "What was the train rebooking code?")[0])

    def off_unchanged(probe: Probe) -> tuple[bool, str]:
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": SEAT}]
        body = {"model": MODEL, "stream": True, "messages": messages, "temperature": 0.3}
        headers = {"X-Memory-User-Id": USER, "X-Memory-Mode": "off"}
        got, _ = _chat_bytes(probe.root + "/v1", body, headers)
        sent = probe.upstream.requests[-1].body
        same = json.loads(sent) == body
        return same and b"[DONE]" in got, f"body as sent {same}, {len(got)} bytes streamed"

    return [
        ("streaming: Responses stream bytes equal upstream's, block in", responses_stream),
        ("streaming: n=2 with include_usage, bytes and headers", n_two),
        ("streaming: a streamed reply recalled later", streamed_reply),
        ("streaming: X-Memory-Mode off forwards the body unchanged", off_unchanged),
    ]
