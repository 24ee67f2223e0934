"""Black-box probes, round two: what `bench/acceptance.py` and `acceptance_more.py` leave out.

The same real `moim serve` and stand-in (acceptance.py's `running` and `Probe`), the official
openai SDK only: a turn kept through `kill -9` or SIGTERM of the process (a restart on the same
store, with and without a flush), one user in two conversations at once, the async client
(plain, streamed, `with_streaming_response`), tool definitions filling the window and a
`response_format` schema, French and Japanese asked in their language, a detail said in a
system or developer message, a 100 kB turn, a forget while another user's request is in
flight, a session id reused after a forget, user ids differing by case. One line per check,
a total, the exit status is the number of failures; `info` lines (a choice for the owners)
are not counted.

The checks of restarts mid-conversation, forgets then restarts, many requests at once, the
async client and streams are in `bench/acceptance_round2b.py`; a conversation the client
rewrote (an edit, a regenerated answer) and forgets or conversations in flight in
`bench/acceptance_round2c.py`.

    PYTHONPATH=. /work/venv/bin/python bench/acceptance_round2.py [--keep DIR] [--only TEXT]
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from bench.acceptance import (  # noqa: E402
    FILLERS,
    MODEL,
    SYSTEM,
    Probe,
    long_history,
    run_checks,
)
from bench.acceptance_more import END, START, found, small_talk, talk  # noqa: E402
from bench.harness import serve_proxy  # noqa: E402
from bench.locomo import block_of  # noqa: E402
from memory.block.tokens import count_tokens  # noqa: E402

Check = Callable[[Probe], tuple[bool, str]]
LATER = {"X-Memory-Timestamp": "2026-10-28T09:00:00"}
SOURCE = ROOT


@contextmanager
def another(probe: Probe, name: str) -> Iterator[tuple[Probe, Any]]:
    """A second `moim serve` on its own store `name`.db, in front of the same stand-in."""
    db = probe.config.parent / f"{name}.db"
    with serve_proxy(probe.upstream.url, db, source=SOURCE) as handle:
        yield Probe(handle.root, probe.upstream, db.with_suffix(".yaml")), handle


def said_then_asked(name: str, stop: str, flush: bool) -> Check:
    """A code said, the process stopped (`stop`: kill or term) right after the answer, a new
    process on the same store, the code asked in a new conversation."""

    def check(probe: Probe) -> tuple[bool, str]:
        code = {"kill": "QX-5512-KL", "term": "TR-8830-MV", "flush": "FL-2207-ZP"}[stop]
        with another(probe, name) as (first, handle):
            small_talk(first, "dur", 2)
            said = f"{FILLERS[3]} Oh, my storage unit code is {code}, don't let me lose it."
            talk(first, "dur", f"{name}-1", [(said, "Got it.")], "2026-09-10")
            if flush:
                first.flush()
            os.kill(handle.pid, signal.SIGKILL if stop == "kill" else signal.SIGTERM)
        with another(probe, name) as (second, _):
            block, _ = second.ask("dur", "What was my storage unit code?", **LATER)
        return found(code, block)

    return check


def durability_checks() -> list[tuple[str, Check]]:
    return [
        (
            "durability: kill -9 right after the answer, restart",
            said_then_asked("k9", "kill", False),
        ),
        (
            "durability: SIGTERM right after the answer, restart",
            said_then_asked("tm", "term", False),
        ),
        ("durability: flush, kill -9, restart", said_then_asked("fl", "flush", True)),
    ]


# -- concurrency ---------------------------------------------------------------------------------


def talk_at_once(
    probe: Probe, user: str, conversations: list[tuple[str | None, list[tuple[str, str]], str]]
) -> list[BaseException]:
    """Each conversation (session, its turn pairs, day) said by `user` on a thread of its own,
    all at once; what the threads raised."""
    errors: list[BaseException] = []

    def run(session: str | None, pairs: list[tuple[str, str]], day: str) -> None:
        try:
            talk(probe, user, session, pairs, day)
        except BaseException as exc:  # noqa: BLE001 - reported by the caller
            errors.append(exc)

    threads = [threading.Thread(target=run, args=line) for line in conversations]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


def concurrency_checks() -> list[tuple[str, Check]]:
    def two_threads(probe: Probe) -> tuple[bool, str]:
        small_talk(probe, "par", 2)
        lines = [
            ("My bike lock code is 8-4-1-9, the blue lock.", "par-a", "2026-09-11"),
            ("The caterer's reference is CAT-77Q2 for the wedding.", "par-b", "2026-09-12"),
        ]
        errors = talk_at_once(
            probe,
            "par",
            [
                (session, [(FILLERS[1], "Ha."), (said, "Noted."), ("Thanks, bye.", "Bye!")], day)
                for said, session, day in lines
            ],
        )
        a, _ = probe.ask("par", "What's my bike lock code?", **LATER)
        b, _ = probe.ask("par", "What was the caterer's reference for the wedding?", **LATER)
        ok = not errors and "8-4-1-9" in a and "CAT-77Q2" in b
        return ok, f"errors {errors[:1]}, bike in block {'8-4-1-9' in a}, caterer {'CAT-77Q2' in b}"

    def forget_in_flight(probe: Probe) -> tuple[bool, str]:
        talk(probe, "fa", "fa-1", [("My locker is L-3321-FA.", "OK.")], "2026-09-13")
        probe.flush()
        result: list[Any] = []

        def other() -> None:
            said = [("My parking permit is PP-6610-FB.", "OK."), ("Bye.", "Bye!")]
            result.append(talk(probe, "fb", "fb-1", said, "2026-09-13"))

        thread = threading.Thread(target=other)
        thread.start()
        gone = httpx.delete(probe.root + "/v1/memory", headers={"x-memory-user-id": "fa"})
        thread.join()
        probe.flush()
        a, _ = probe.ask("fa", "What's my locker number?", **LATER)
        b, _ = probe.ask("fb", "What's my parking permit?", **LATER)
        ok = gone.status_code == 200 and "L-3321-FA" not in a and "PP-6610-FB" in b
        return (
            ok,
            f"delete {gone.status_code}, fa's code back {'L-3321-FA' in a}, "
            f"fb's kept {'PP-6610-FB' in b}",
        )

    def session_reused(probe: Probe) -> tuple[bool, str]:
        talk(probe, "fr", "fr-1", [("My old PIN is 4471.", "OK.")], "2026-09-14")
        probe.flush()
        httpx.delete(probe.root + "/v1/memory", headers={"x-memory-user-id": "fr"})
        talk(probe, "fr", "fr-1", [("My new badge is BD-9021-NW.", "OK.")], "2026-09-15")
        probe.flush()
        old, _ = probe.ask("fr", "What was my old PIN?", **LATER)
        new, _ = probe.ask("fr", "What's my new badge number?", **LATER)
        ok = "4471" not in old and "BD-9021-NW" in new
        return ok, f"old PIN back {'4471' in old}, new badge in block {'BD-9021-NW' in new}"

    def case_variant(probe: Probe) -> tuple[bool, str]:
        talk(probe, "Casey", "cs-1", [("My vault code is VC-1188-UP.", "OK.")], "2026-09-16")
        probe.flush()
        other, _ = probe.ask("casey", "What's my vault code?", **LATER)
        same, _ = probe.ask("Casey", "What's my vault code?", **LATER)
        ok = "VC-1188-UP" not in other and "VC-1188-UP" in same
        return ok, f"'casey' sees it {'VC-1188-UP' in other}, 'Casey' {'VC-1188-UP' in same}"

    return [
        ("concurrency: one user, two conversations at once, both recalled", two_threads),
        ("concurrency: a forget while another user's turn is in flight", forget_in_flight),
        ("forget: then the same session id reused", session_reused),
        ("isolation: user ids differing by case are two users", case_variant),
    ]


# -- request shapes ------------------------------------------------------------------------------


def shape_checks() -> list[tuple[str, Check]]:
    def setup(probe: Probe) -> None:
        small_talk(probe, "shape", 2)
        said = [("My gym locker combination is 31-07-19, by the sauna.", "OK.")]
        talk(probe, "shape", "shape-1", said, "2026-09-04")
        probe.flush()

    def tools_near_limit(probe: Probe) -> tuple[bool, str]:
        setup(probe)
        props = {
            f"field_{n}": {"type": "string", "description": "a field " * 40} for n in range(60)
        }
        tools = [
            {
                "type": "function",
                "function": {
                    "name": f"tool_{k}",
                    "parameters": {"type": "object", "properties": props},
                },
            }
            for k in range(12)
        ]
        tool_tokens = sum(count_tokens(str(t), "gpt-4o") for t in tools)
        messages = long_history(57_000)
        messages[-1] = {"role": "user", "content": "What's my gym locker combination?"}
        probe.upstream.script.append({"content": "ok"})
        raw = probe.client.chat.completions.with_raw_response.create(
            model="gpt-4o",
            messages=messages,
            tools=tools,  # type: ignore[arg-type]
            extra_headers={"X-Memory-User-Id": "shape", "X-Memory-Mode": "read"},
        )
        sent = probe.upstream.last_json
        block = block_of(sent)
        text = START + block + END if block else ""
        counted = count_tokens(text, "gpt-4o") if text else 0
        said = int(raw.headers["x-memory-tokens-injected"])
        excerpts = int(raw.headers["x-memory-chunks-injected"])
        whole = counted + sum(count_tokens(str(m.get("content")), "gpt-4o") for m in messages)
        ok = said == counted and excerpts == block.count("• ") and sent.get("tools") == tools
        ok = ok and whole + tool_tokens < 128_000
        return ok, (
            f"tier {raw.headers['x-memory-tier']}, header {said} vs block {counted} tokens, "
            f"{excerpts} excerpts, messages+block+tools ~{whole + tool_tokens}"
        )

    def json_schema(probe: Probe) -> tuple[bool, str]:
        schema = {
            "type": "json_schema",
            "json_schema": {
                "name": "answer",
                "strict": True,
                "schema": {
                    "type": "object",
                    "properties": {"code": {"type": "string"}},
                    "required": ["code"],
                    "additionalProperties": False,
                },
            },
        }
        probe.upstream.script.append({"content": '{"code": "31-07-19"}'})
        raw = probe.client.chat.completions.with_raw_response.create(
            model=MODEL,
            response_format=schema,  # type: ignore[arg-type]
            messages=[{"role": "user", "content": "What's my gym locker combination?"}],
            extra_headers={"X-Memory-User-Id": "shape", "X-Memory-Mode": "read"},
        )
        sent = probe.upstream.last_json
        got = raw.parse().choices[0].message.content
        ok = sent.get("response_format") == schema and "31-07-19" in block_of(sent)
        return (
            ok and got == '{"code": "31-07-19"}',
            f"schema kept {sent.get('response_format') == schema}, "
            f"block has code {'31-07-19' in block_of(sent)}, reply {got!r}",
        )

    def language(user: str, said: str, question: str, value: str) -> Check:
        def check(probe: Probe) -> tuple[bool, str]:
            pairs = [
                (said, "D'accord." if user == "fr" else "了解しました。"),
                ("Merci !" if user == "fr" else "ありがとう。", "…"),
            ]
            talk(probe, f"lang-{user}", f"lang-{user}-1", pairs, "2026-09-05")
            small_talk(probe, f"lang-{user}", 2)
            probe.flush()
            block, _ = probe.ask(f"lang-{user}", question, **LATER)
            return found(value, block)

        return check

    def role_detail(role: str, code: str) -> Check:
        def check(probe: Probe) -> tuple[bool, str]:
            user = f"role-{role}"
            messages = [
                {"role": "system", "content": SYSTEM},
                {"role": role, "content": f"The user's customer number is {code}."},
                {"role": "user", "content": "Hi, can you help me with my account?"},
            ]
            probe.chat(user, messages, **{"X-Memory-Session-Id": f"{user}-1"})
            probe.flush()
            block, _ = probe.ask(user, "What's my customer number?", **LATER)
            return found(code, block)

        return check

    def huge_turn(probe: Probe) -> tuple[bool, str]:
        code = "HG-7741-MID"
        filler = (FILLERS[4] + " " + FILLERS[6] + " ") * 350
        said = filler + f" The alarm panel code is {code}. " + filler
        talk(probe, "huge", "huge-1", [(said, "That's a lot, noted.")], "2026-09-06")
        probe.flush()
        block, _ = probe.ask("huge", "What was the alarm panel code?", **LATER)
        ok, seen = found(code, block)
        return ok, f"a turn of {len(said) // 1000} kB; {seen}"

    return [
        ("shape: 12 tool definitions at ~45% of gpt-4o, headers match the block", tools_near_limit),
        ("shape: response_format json_schema kept, block injected", json_schema),
        (
            "language: French, asked in French",
            language(
                "fr",
                "Mon code de portail est 7Z-48-BQ, au fait, pour la maison de campagne.",
                "Quel était le code du portail de la maison de campagne ?",
                "7Z-48-BQ",
            ),
        ),
        (
            "language: Japanese, asked in Japanese",
            language(
                "ja",
                "ところで、倉庫の暗証番号はK9-3317です。忘れないでね。",
                "倉庫の暗証番号は何でしたっけ？",
                "K9-3317",
            ),
        ),
        ("info role: a detail in a system message, recalled", role_detail("system", "CN-5501-SY")),
        (
            "info role: a detail in a developer message, recalled",
            role_detail("developer", "CN-5502-DV"),
        ),
        ("long turn: a code in the middle of a 100 kB turn", huge_turn),
    ]


# -- running -------------------------------------------------------------------------------------


def main() -> None:
    global SOURCE
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", type=Path, help="a directory for the stores and logs, kept")
    parser.add_argument("--source", type=Path, default=ROOT, help="the build to serve")
    parser.add_argument("--only", help="run the checks whose name has this text")
    args = parser.parse_args()
    SOURCE = args.source
    from bench.acceptance_round2b import (
        async_checks,
        chain_checks,
        crowd_checks,
        forget_durability_checks,
        left_stream_checks,
        restart_checks,
        shutdown_checks,
        streaming_checks,
    )
    from bench.acceptance_round2c import full_window_checks, inflight_checks, rewrite_checks

    checks = [
        *durability_checks(),
        *concurrency_checks(),
        *async_checks(),
        *shape_checks(),
        *streaming_checks(),
        *restart_checks(),
        *crowd_checks(),
        *left_stream_checks(),
        *forget_durability_checks(),
        *chain_checks(),
        *shutdown_checks(),
        *rewrite_checks(),
        *inflight_checks(),
        *full_window_checks(),
    ]
    checks = [c for c in checks if not args.only or args.only in c[0]]
    run_checks(checks, args.keep, args.source, "moim-accept2-")


if __name__ == "__main__":
    main()
