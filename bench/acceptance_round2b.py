"""`bench/acceptance_round2.py`'s probes of restarts, forgets, many requests at once, the async
client, streams, Responses chains and shutdown.

A restart (SIGTERM or `kill -9`) between two turns of one conversation whose client resends it
whole: every message stored once (the export counts them), the turn after the restart
recalled; a forget (unflushed, or flushed) then `kill -9`: nothing comes back from the journal;
30 turns then `kill -9` at once: all replayed; SIGTERM mid-stream: the stream ends whole and is
stored; eight async requests of one user at once, all stored; a `previous_response_id` chain
across a restart stays one session; `X-Memory-Timestamp` with `Z` and `+02:00`; a user id in
NFC and NFD (a choice: shown as `info`); a stream the client closed once it had read the code.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import unicodedata
from collections import Counter
from typing import Any

import httpx
import openai

from bench.acceptance import FILLERS, MODEL, SYSTEM, Probe
from bench.acceptance_more import found, talk
from bench.acceptance_round2 import LATER, Check, another


def exported(probe: Probe, user: str) -> list[dict[str, Any]]:
    got = httpx.get(probe.root + "/v1/memory/export", headers={"x-memory-user-id": user})
    return [json.loads(line) for line in got.text.splitlines() if line.strip()]


def twice(items: list[dict[str, Any]]) -> list[str]:
    """Messages stored more than once in a session: (session, role, content) repeated."""
    keys = Counter(
        (i["session_id"], i["role"], i["content"])
        for i in items
        if i.get("type", "message") == "message"
    )
    return [f"{role}: {content[:30]!r}" for (_, role, content), n in keys.items() if n > 1]


def restart_checks() -> list[tuple[str, Check]]:
    def between_turns(name: str, sig: signal.Signals) -> Check:
        def check(probe: Probe) -> tuple[bool, str]:
            code = f"RS-{sig.value:02d}44-{name.upper()}"
            first = [(FILLERS[2], "Sounds busy."), (f"My pharmacy ref is {code}.", "Noted.")]
            history: list[tuple[Any, str]] = first + [("And I moved to Lyon last week.", "Nice!")]
            with another(probe, name) as (one, handle):
                talk(one, "rs", f"{name}-1", first, "2026-09-20")
                os.kill(handle.pid, sig)
            with another(probe, name) as (two, _):
                talk(two, "rs", f"{name}-1", history, "2026-09-20")
                two.flush()
                items = exported(two, "rs")
                block, _ = two.ask("rs", "Where did I move to?", **LATER)
                again = twice(items)
                ok, seen = found("Lyon", block)
            return ok and not again, f"{len(items)} items, stored twice {again[:3]}; {seen}"

        return check

    return [
        ("restart: SIGTERM between two turns, history resent", between_turns("rt", signal.SIGTERM)),
        ("restart: kill -9 between two turns, history resent", between_turns("rk", signal.SIGKILL)),
    ]


def crowd_checks() -> list[tuple[str, Check]]:
    def eight_at_once(probe: Probe) -> tuple[bool, str]:
        codes = [f"EC-{n}{n}{n}{n}-{chr(65 + n)}" for n in range(8)]

        async def go() -> list[str]:
            client = openai.AsyncOpenAI(base_url=probe.root + "/v1", api_key="sk", max_retries=0)
            for _ in codes:
                probe.upstream.script.append({"content": "Noted."})

            async def one(n: int, code: str) -> str:
                reply = await client.chat.completions.create(
                    model=MODEL,
                    messages=[
                        {"role": "system", "content": SYSTEM},
                        {"role": "user", "content": f"Locker {n} has the code {code}."},
                    ],
                    extra_headers={"X-Memory-User-Id": "crowd", "X-Memory-Session-Id": f"c-{n}"},
                )
                return reply.choices[0].message.content or ""

            try:
                return await asyncio.gather(*(one(n, c) for n, c in enumerate(codes)))
            finally:
                await client.close()

        replies = asyncio.run(go())
        probe.flush()
        text = json.dumps(exported(probe, "crowd"))
        missing = [c for c in codes if c not in text]
        return not missing and all(replies), f"{len(replies)} replies; not stored {missing}"

    def nfc_nfd(probe: Probe) -> tuple[bool, str]:
        nfc = unicodedata.normalize("NFC", "José")
        nfd = unicodedata.normalize("NFD", "José")
        talk(probe, nfc, "nf-1", [("My gate code is GT-5150-NF.", "OK.")], "2026-09-21")
        probe.flush()
        block, _ = probe.ask(nfd, "What's my gate code?", **LATER)
        same = "GT-5150-NF" in block
        return same, f"the NFD spelling {'sees' if same else 'does not see'} the NFC one's code"

    return [
        ("crowd: eight async requests of one user at once, all stored", eight_at_once),
        ("info isolation: a user id in NFD is its NFC spelling", nfc_nfd),
    ]


def left_stream_checks() -> list[tuple[str, Check]]:
    def left_after_code(probe: Probe) -> tuple[bool, str]:
        reply = "Your reminder word is PELICAN-42, and " + "more text follows here. " * 30
        probe.upstream.script.append({"content": reply, "delay": 0.05})
        got = ""
        with probe.client.chat.completions.create(
            model=MODEL,
            stream=True,
            messages=[{"role": "user", "content": "Give me a reminder word please."}],
            extra_headers={"X-Memory-User-Id": "left", "X-Memory-Session-Id": "left-1"},
        ) as chunks:
            for chunk in chunks:
                if chunk.choices:
                    got += chunk.choices[0].delta.content or ""
                if "PELICAN-42" in got:
                    break
        probe.flush()
        items = exported(probe, "left")
        stored = [i for i in items if i.get("role") == "assistant"]
        partial = [bool(i.get("partial")) for i in stored]
        block, _ = probe.ask("left", "What reminder word did you give me?", **LATER)
        ok, seen = found("PELICAN-42", block)
        kept = len(stored[0]["content"]) if stored else 0
        return ok and partial == [
            True
        ], f"read {len(got)} chars, stored {kept} partial {partial}; {seen}"

    return [("streaming: the client left mid-reply, the part it read recalled", left_after_code)]


def forget_durability_checks() -> list[tuple[str, Check]]:
    def forgotten_then_killed(name: str, flush: bool, sig: signal.Signals) -> Check:
        def check(probe: Probe) -> tuple[bool, str]:
            code = f"FK-{sig.value:02d}{int(flush)}-{name.upper()}"
            with another(probe, name) as (one, handle):
                talk(one, "fk", f"{name}-1", [(f"My alarm code is {code}.", "OK.")], "2026-09-22")
                if flush:
                    one.flush()
                gone = httpx.delete(one.root + "/v1/memory", headers={"x-memory-user-id": "fk"})
                os.kill(handle.pid, sig)
            with another(probe, name) as (two, _):
                two.flush()
                block, _ = two.ask("fk", "What's my alarm code?", **LATER)
                left = exported(two, "fk")
            back = code in block or code in json.dumps(left)
            return gone.status_code == 200 and not back, f"{len(left)} items left, code back {back}"

        return check

    def unflushed_forget(probe: Probe) -> tuple[bool, str]:
        talk(probe, "uf", "uf-1", [("My safe code is SF-6262-UF.", "OK.")], "2026-09-22")
        httpx.delete(probe.root + "/v1/memory", headers={"x-memory-user-id": "uf"})
        probe.flush()
        block, _ = probe.ask("uf", "What's my safe code?", **LATER)
        left = exported(probe, "uf")
        back = "SF-6262-UF" in block or "SF-6262-UF" in json.dumps(left)
        return not back, f"{len(left)} items left, code back {back}"

    def unflushed_session_forget(probe: Probe) -> tuple[bool, str]:
        talk(probe, "us", "us-1", [("My bin day code is BN-7373-US.", "OK.")], "2026-09-22")
        talk(probe, "us", "us-2", [("My locker is LK-8484-US.", "OK.")], "2026-09-23")
        httpx.delete(probe.root + "/v1/memory/sessions/us-1", headers={"x-memory-user-id": "us"})
        probe.flush()
        gone, _ = probe.ask("us", "What's my bin day code?", **LATER)
        kept, _ = probe.ask("us", "What's my locker number?", **LATER)
        text = json.dumps(exported(probe, "us"))
        back = "BN-7373-US" in gone or "BN-7373-US" in text
        ok = not back and "LK-8484-US" in text
        return ok, f"forgotten session back {back}, other session kept {'LK-8484-US' in text}"

    return [
        ("forget: right after the turn, unflushed", unflushed_forget),
        ("forget: a session right after its turn, unflushed", unflushed_session_forget),
        (
            "forget: then kill -9, restart (unflushed turn)",
            forgotten_then_killed("fk0", False, signal.SIGKILL),
        ),
        (
            "forget: then kill -9, restart (flushed turn)",
            forgotten_then_killed("fk1", True, signal.SIGKILL),
        ),
        (
            "forget: then SIGTERM, restart (unflushed turn)",
            forgotten_then_killed("ft0", False, signal.SIGTERM),
        ),
    ]


# -- streaming -----------------------------------------------------------------------------------


def streaming_checks() -> list[tuple[str, Check]]:
    def stream(probe: Probe, user: str, said: str, reply: str, **opts: Any) -> str:
        probe.upstream.script.append({"content": reply})
        got = ""
        with probe.client.chat.completions.create(
            model=MODEL,
            stream=True,
            **opts,
            messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": said}],
            extra_headers={"X-Memory-User-Id": user, "X-Memory-Session-Id": f"{user}-1"},
        ) as chunks:
            for chunk in chunks:
                if chunk.choices:
                    got += chunk.choices[0].delta.content or ""
        return got

    def no_usage(options: dict[str, Any], user: str, code: str) -> Check:
        def check(probe: Probe) -> tuple[bool, str]:
            got = stream(probe, user, f"My loyalty card number is {code}.", "Saved.", **options)
            probe.flush()
            block, _ = probe.ask(user, "What's my loyalty card number?", **LATER)
            ok, seen = found(code, block)
            return ok and got == "Saved.", f"client got {got!r}; {seen}"

        return check

    return [
        (
            "streaming: include_usage false, then recalled",
            no_usage({"stream_options": {"include_usage": False}}, "nu-false", "LC-4410-FA"),
        ),
        ("streaming: no stream_options, then recalled", no_usage({}, "nu-none", "LC-4420-NO")),
    ]


# -- the async client ----------------------------------------------------------------------------


def async_checks() -> list[tuple[str, Check]]:
    def run(probe: Probe, streamed: str) -> tuple[bool, str]:
        code = {"no": "AS-1010-NS", "yes": "AS-2020-ST", "raw": "AS-3030-RW"}[streamed]
        question = "Which code did I give for the async test?"

        async def go() -> tuple[str, str]:
            client = openai.AsyncOpenAI(
                base_url=probe.root + "/v1", api_key="sk-test", max_retries=0
            )
            headers = {
                "X-Memory-User-Id": f"as-{streamed}",
                "X-Memory-Session-Id": f"as-{streamed}",
            }
            messages: list[Any] = [{"role": "user", "content": f"The async test code is {code}."}]
            probe.upstream.script.append({"content": "Noted the code."})
            got = ""
            if streamed == "no":
                reply = await client.chat.completions.create(
                    model=MODEL, messages=messages, extra_headers=headers
                )
                got = reply.choices[0].message.content or ""
            elif streamed == "yes":
                stream = await client.chat.completions.create(
                    model=MODEL, messages=messages, extra_headers=headers, stream=True
                )
                async for chunk in stream:
                    if chunk.choices:
                        got += chunk.choices[0].delta.content or ""
            else:
                async with client.chat.completions.with_streaming_response.create(
                    model=MODEL, messages=messages, extra_headers=headers, stream=True
                ) as response:
                    got = str(len(b"".join([part async for part in response.iter_bytes()])))
            await client.close()
            return got, ""

        got, _ = asyncio.run(go())
        probe.flush()
        block, _ = probe.ask(f"as-{streamed}", question, **LATER)
        ok, seen = found(code, block)
        return ok and bool(got), f"client got {got[:20]!r}; {seen}"

    return [
        ("async client: create, then recalled", lambda p: run(p, "no")),
        ("async client: stream=True, then recalled", lambda p: run(p, "yes")),
        ("async client: with_streaming_response, then recalled", lambda p: run(p, "raw")),
    ]


def chain_checks() -> list[tuple[str, Check]]:
    def chained_across_restart(probe: Probe) -> tuple[bool, str]:
        user = {"X-Memory-User-Id": "chain"}
        with another(probe, "ch") as (one, _):
            probe.upstream.script.append({"content": "Noted the boat."})
            first = one.client.responses.create(
                model=MODEL, input="My boat's hull number is HN-3390-CH.", extra_headers=user
            )
        with another(probe, "ch") as (two, _):
            probe.upstream.script.append({"content": "Sure."})
            two.client.responses.create(
                model=MODEL,
                input="And my mooring is berth 14 at the east pier.",
                previous_response_id=first.id,
                extra_headers=user,
            )
            two.flush()
            items = [i for i in exported(two, "chain") if i.get("type", "message") == "message"]
        sessions = {i["session_id"] for i in items}
        return len(sessions) == 1 and len(items) >= 4, f"{len(items)} messages in {sessions}"

    def zoned_timestamps(probe: Probe) -> tuple[bool, str]:
        seen = []
        for n, stamp in enumerate(["2026-09-10T10:00:00Z", "2026-09-10T12:00:00+02:00"]):
            messages = [{"role": "user", "content": f"Zone note {n}: parcel ZN-{n}4{n}4."}]
            raw = probe.chat(
                "zone", messages, **{"X-Memory-Session-Id": f"z-{n}", "X-Memory-Timestamp": stamp}
            )
            seen.append(raw.headers.get("x-memory-error"))
        probe.flush()
        stamps = sorted(
            {
                i["created_at"]
                for i in exported(probe, "zone")
                if i.get("type", "message") == "message"
            }
        )
        ok = seen == [None, None] and stamps == [1789034400.0]
        return ok, f"errors {seen}, created_at {stamps}"

    return [
        ("responses: previous_response_id across a restart, one session", chained_across_restart),
        ("timestamps: Z and +02:00 the same instant", zoned_timestamps),
    ]


def shutdown_checks() -> list[tuple[str, Check]]:
    def term_mid_stream(probe: Probe) -> tuple[bool, str]:
        reply = "Your reminder word is HERON-77, and " + "more text follows. " * 12
        with another(probe, "ms") as (one, handle):
            probe.upstream.script.append({"content": reply, "delay": 0.05})
            got = ""
            with one.client.chat.completions.create(
                model=MODEL,
                stream=True,
                messages=[{"role": "user", "content": "Give me a reminder word please."}],
                extra_headers={"X-Memory-User-Id": "ms", "X-Memory-Session-Id": "ms-1"},
            ) as chunks:
                for chunk in chunks:
                    if chunk.choices and not got:
                        os.kill(handle.pid, signal.SIGTERM)
                    if chunk.choices:
                        got += chunk.choices[0].delta.content or ""
        with another(probe, "ms") as (two, _):
            items = [i for i in exported(two, "ms") if i.get("role") == "assistant"]
        whole = got == reply and [i["content"] for i in items] == [reply]
        return (
            whole,
            f"client read {len(got)}/{len(reply)} chars; "
            f"stored {[len(i['content']) for i in items]}",
        )

    def backlog_killed(probe: Probe) -> tuple[bool, str]:
        codes = [f"BK-{n:02d}77-Q" for n in range(30)]
        with another(probe, "bk") as (one, handle):
            for n, code in enumerate(codes):
                talk(one, "bk", f"bk-{n}", [(f"Crate {n} holds part {code}.", "OK.")], "2026-09-25")
            os.kill(handle.pid, signal.SIGKILL)
        with another(probe, "bk") as (two, _):
            two.flush()
            text = json.dumps(exported(two, "bk"))
            block, _ = two.ask("bk", "Which part does crate 29 hold?", **LATER)
        missing = [c for c in codes if c not in text]
        ok = not missing and codes[-1] in block
        return ok, f"not stored after replay {missing[:5]}, last code in block {codes[-1] in block}"

    return [
        ("shutdown: SIGTERM mid-stream, the stream ends whole and is stored", term_mid_stream),
        ("durability: 30 turns then kill -9 at once, all replayed", backlog_killed),
    ]
