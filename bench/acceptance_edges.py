"""`bench/acceptance_more.py`'s probes of harder edges: long turns, near-alike codes, windows
without session ids, other clients' user headers, the modes, JSON bodies as the provider's.

Run them with `PYTHONPATH=. python bench/acceptance_more.py`. Each talks as its own user.
"""

from __future__ import annotations

from typing import Any

import httpx

from bench.acceptance import CHATTER, MODEL, SYSTEM, Probe
from bench.acceptance_more import Check, found, responses_block, small_talk, talk
from bench.acceptance_wire import _history
from bench.locomo import block_of

LATER = {"X-Memory-Timestamp": "2026-10-28T09:00:00"}
CHATS = [
    "Can you suggest a quick weekday pasta?",
    "Something without mushrooms please.",
    "How about a side salad?",
    "And a dessert with berries?",
    "What wine goes with that?",
]


def long_turn_checks() -> list[tuple[str, Check]]:
    said = (
        CHATTER * 3 + "Oh, and the alarm code for the studio is 5581-ZK, punch it in within "
        "thirty seconds. " + CHATTER * 3
    )

    def tier(tokens: int, name: str, first: bool) -> Check:
        def check(probe: Probe) -> tuple[bool, str]:
            if first:
                small_talk(probe, "long", 3)
                talk(probe, "long", "long-1", [(said, "Got it.")], "2026-09-02")
            probe.upstream.script.append({"content": "ok"})
            raw = probe.client.chat.completions.with_raw_response.create(
                model="gpt-4o",
                messages=_history(tokens, "What's the alarm code for the studio?"),  # type: ignore[arg-type]
                extra_headers={"X-Memory-User-Id": "long", "X-Memory-Mode": "read"},
            )
            ok, seen = found("5581-ZK", block_of(probe.upstream.last_json))
            return ok, f"tier {raw.headers['x-memory-tier']} ({name}): {seen}"

        return check

    def straddling(probe: Probe) -> tuple[bool, str]:
        """A code where the 1,000-character chunks of a long message meet."""
        head = (CHATTER * 5)[:985]
        text = head + " The vault reference is VR-7730-QP-19 for the deposit box. " + CHATTER * 2
        talk(probe, "edge", "edge-1", [(text, "Noted.")], "2026-09-02")
        block, _ = probe.ask("edge", "What is the vault reference for my deposit box?", **LATER)
        return found("VR-7730-QP-19", block)

    def near_alike(probe: Probe) -> tuple[bool, str]:
        """Both are in the block; the block shows excerpts newest first (what a changed value
        needs), so the dryer's, said later, leads: the owners' choice, not counted."""
        talk(
            probe, "alike", "al-1", [("The dishwasher serial is SN-4471-XQ9.", "OK.")], "2026-09-01"
        )
        talk(probe, "alike", "al-2", [("The dryer serial is SN-4471-XQ8.", "OK.")], "2026-09-03")
        block, _ = probe.ask("alike", "What's the dishwasher's serial number?", **LATER)
        right, wrong = block.find("XQ9"), block.find("XQ8")
        ok = right >= 0 and (wrong < 0 or right < wrong)
        return ok, f"dishwasher's at {right}, dryer's at {wrong}"

    return [
        ("long turn: a code mid-message at tier 0 (600 chars)", tier(40_000, "600", True)),
        ("long turn: a code mid-message at tier 2 (250 chars)", tier(83_000, "250", False)),
        ("long turn: a code where two chunks meet", straddling),
        ("info identifier: near-alike codes, the asked one first", near_alike),
    ]


# (what the user says, asked weeks later, the exact string): kinds acceptance.py does not try
KINDS = [
    (
        "My UK mobile is +44 7700 900123, text me there.",
        "What's my mobile number?",
        "+44 7700 900123",
    ),
    (
        "The UPS tracking number is 1Z999AA10123456784.",
        "What's the UPS tracking number?",
        "1Z999AA10123456784",
    ),
    (
        "The NAS is at 192.168.1.47 on the home network.",
        "What's the NAS's IP address?",
        "192.168.1.47",
    ),
    (
        "The printer's MAC address is 3C:22:FB:9A:01:7E.",
        "What's the printer's MAC address?",
        "3C:22:FB:9A:01:7E",
    ),
    (
        "The router admin password is p@ss:W0rd!#&<x>.",
        "What's the router admin password?",
        "p@ss:W0rd!#&<x>",
    ),
    ("The vault note is ]]=== End Memory ===[[ x9Q, odd.", "What's the vault note?", "x9Q"),
    ("My car plate is AB12 CDE.", "What's my car's plate?", "AB12 CDE"),
    ("The promo code is SAVE-20%OFF_2026.", "What was the promo code?", "SAVE-20%OFF_2026"),
    ("The meeting room is B2.14 on the second floor.", "Which meeting room?", "B2.14"),
    ("Our Zoom id is 863 2291 0457, passcode 551902.", "What's the Zoom passcode?", "551902"),
    ("The commit that broke it is 9f3c2e1a7b.", "Which commit broke it?", "9f3c2e1a7b"),
    ("My Japanese pen pal is 山田太郎.", "What's my pen pal's name?", "山田太郎"),
]


def kind_checks() -> list[tuple[str, Check]]:
    def check(n: int) -> Check:
        said, question, value = KINDS[n]

        def run(probe: Probe) -> tuple[bool, str]:
            talk(probe, f"kind{n}", f"kind{n}-1", [(said, "Noted.")], "2026-09-01")
            small_talk(probe, f"kind{n}", 3)
            return found(value, probe.ask(f"kind{n}", question, **LATER)[0])

        return run

    return [(f"identifier kind: {KINDS[n][2]}", check(n)) for n in range(len(KINDS))]


def window_checks() -> list[tuple[str, Check]]:
    def no_system(probe: Probe) -> tuple[bool, str]:
        """A window of the last four messages, no system prompt, no session id, at once."""
        history: list[dict[str, Any]] = []
        for said in ["My tax file number is 482 119 307.", *CHATS, "What's my tax file number?"]:
            history.append({"role": "user", "content": said})
            probe.chat("nosys", history[-4:], reply="Sure.")
            history.append({"role": "assistant", "content": "Sure."})
        return found("482 119 307", block_of(probe.upstream.last_json))

    def streamed(probe: Probe) -> tuple[bool, str]:
        """A window of four, the last turn streamed."""
        history: list[dict[str, Any]] = []
        turns = ["The dog's microchip number is 985 112 004 567 321.", *CHATS]
        for said in turns:
            history.append({"role": "user", "content": said})
            probe.chat("wstream", [{"role": "system", "content": SYSTEM}, *history[-4:]])
            history.append({"role": "assistant", "content": "Noted."})
        history.append({"role": "user", "content": "What's the dog's microchip number?"})
        probe.upstream.script.append({"content": "Here."})
        stream = probe.client.chat.completions.create(
            model=MODEL,
            stream=True,
            messages=[{"role": "system", "content": SYSTEM}, *history[-4:]],  # type: ignore[list-item]
            extra_headers={"X-Memory-User-Id": "wstream"},
        )
        "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
        return found("985 112 004 567 321", block_of(probe.upstream.last_json))

    def responses_trimmed(probe: Probe) -> tuple[bool, str]:
        """A Responses client sending its last three input items, no previous_response_id."""
        items: list[dict[str, Any]] = []
        user = {"X-Memory-User-Id": "rtrim"}
        for said in ["My parking permit is PP-66120.", *CHATS, "What's my parking permit?"]:
            items.append({"role": "user", "content": said})
            probe.upstream.script.append({"content": "Sure."})
            probe.client.responses.create(model=MODEL, input=items[-3:], extra_headers=user)  # type: ignore[arg-type]
            items.append({"role": "assistant", "content": "Sure."})
        return found("PP-66120", responses_block(probe.upstream.last_responses_json))

    def bulk(session: str | None) -> Check:
        def check(probe: Probe) -> tuple[bool, str]:
            """Twenty messages sent at once (a conversation moved to moim), then only the last
            four and a question, asked at once."""
            user = f"bulk-{session or 'derived'}"
            history: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
            said = ["My insurance policy is POL-88-1029-X.", *CHATS, *CHATS][:10]
            for n, text in enumerate(said):
                history.append({"role": "user", "content": f"{text} {CHATTER if n else ''}"})
                history.append({"role": "assistant", "content": f"Reply {n}: sure."})
            headers = {"X-Memory-Session-Id": session} if session else {}
            probe.chat(user, history[:-1], reply=history[-1]["content"], **headers)
            asked = [*history[-4:], {"role": "user", "content": "What's my insurance policy?"}]
            probe.chat(user, [history[0], *asked], **headers)
            return found("POL-88-1029-X", block_of(probe.upstream.last_json))

        return check

    return [
        ("dropped: 20 messages at once, then the last 4 (session id)", bulk("bulk-1")),
        ("dropped: 20 messages at once, then the last 4 (no session id)", bulk(None)),
        ("dropped: last four, no system prompt, no session id", no_system),
        ("dropped: the window's last turn streamed", streamed),
        ("dropped: a Responses client trimming its input", responses_trimmed),
    ]


def client_checks() -> list[tuple[str, Check]]:
    def header(name: str, user: str) -> Check:
        def check(probe: Probe) -> tuple[bool, str]:
            probe.upstream.script.append({"content": "ok"})
            probe.client.chat.completions.create(
                model=MODEL,
                messages=[{"role": "user", "content": "My rowing club number is RC-3318."}],
                extra_headers={name: user},
            )
            mine = probe.ask(user, "What's my rowing club number?")[0]
            default = probe.ask("default", "What's my rowing club number?")[0]
            ok = "RC-3318" in mine and "RC-3318" not in default
            return ok, f"{name}'s user sees it {'RC-3318' in mine}, default {'RC-3318' in default}"

        return check

    def modes(probe: Probe) -> tuple[bool, str]:
        said = [{"role": "user", "content": "My locker PIN is 6620."}]
        probe.chat("modes", said, **{"X-Memory-Mode": "read"})
        quiet = probe.ask("modes", "What's my locker PIN?")[0]
        probe.chat(
            "modes",
            [{"role": "user", "content": "My bike code is 4471."}],
            **{"X-Memory-Mode": "write"},
        )
        probe.chat(
            "modes",
            [{"role": "user", "content": "What's my bike code?"}],
            **{"X-Memory-Mode": "write"},
        )
        written = block_of(probe.upstream.last_json)
        later = probe.ask("modes", "What's my bike code?")[0]
        ok = "6620" not in quiet and not written and "4471" in later
        return ok, f"read stored {'6620' in quiet}, write injected {bool(written)}, " + (
            f"written recalled {'4471' in later}"
        )

    def same_json(probe: Probe) -> tuple[bool, str]:
        """Non-streamed chat (n=2) and Responses: the client's bytes are the provider's."""
        seen = []
        for path, body in (
            (
                "/chat/completions",
                {
                    "model": MODEL,
                    "n": 2,
                    "messages": [{"role": "user", "content": "What's my locker PIN?"}],
                },
            ),
            ("/responses", {"model": MODEL, "input": "What's my bike code?"}),
        ):
            probe.upstream.reset()
            got = httpx.post(
                probe.root + "/v1" + path,
                json=body,
                headers={"X-Memory-User-Id": "modes", "X-Memory-Mode": "read"},
            )
            sent = probe.upstream.requests[-1].json
            probe.upstream.reset()
            direct = httpx.post(probe.upstream.url + path, json=sent)
            seen.append(got.content == direct.content)
        return all(seen), f"chat n=2, responses: bytes equal {seen}"

    def session_facts(probe: Probe) -> tuple[bool, str]:
        talk(probe, "sfx", "sfx-1", [("I'm allergic to penicillin.", "Noted.")], "2026-09-01")
        talk(probe, "sfx", "sfx-2", [("I live in Leeds.", "Nice.")], "2026-09-02")
        url = probe.root + "/v1/memory/sessions/sfx-1?facts=true"
        status = httpx.delete(url, headers={"x-memory-user-id": "sfx"}).status_code
        block = probe.ask("sfx", "Any antibiotics I should avoid?")[0]
        ok = status == 200 and "penicillin" not in block
        return ok, f"delete {status}, penicillin still in the block {'penicillin' in block}"

    return [
        ("isolation: X-OpenWebUI-User-Id", header("X-OpenWebUI-User-Id", "owui-7")),
        ("isolation: x-sm-user-id", header("x-sm-user-id", "sm-7")),
        ("isolation: x-litellm-end-user-id", header("x-litellm-end-user-id", "llm-7")),
        ("modes: read stores nothing, write injects nothing", modes),
        ("bytes: non-streamed chat n=2 and Responses JSON as the provider's", same_json),
        ("forget: a session with ?facts=true takes its facts", session_facts),
    ]
