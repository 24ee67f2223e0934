"""More black-box probes of issue 16's classes, cases `bench/acceptance.py` does not cover.

The same running `moim serve` and stand-in (acceptance.py's `running` and `Probe`), the
official openai SDK only: several identifiers in one turn, an identifier the assistant said,
one that changed, content as parts, a `name`, the Responses API, no session header; a
client that cuts the middle, an agent's tool calls, a summary asked at once; a corrected fact,
facts kept per user, one fact forgotten; gpt-4o near its 128k, the injected tokens header
against the block, a context budget; one session id for two users, the user by body, header
and path; forgetting a session (named or derived); Responses streams, `n=2`, a streamed reply
recalled; and (`bench/acceptance_edges.py`) a code mid-way through a long turn at tiers 0 and
2, where two chunks meet, near-alike codes, windows without a system prompt or session id, a
streamed last turn, a Responses client trimming its input, other clients' user headers, the
read and write modes, JSON bodies as the provider's, a session forgotten with its facts. One
line per check, a total, the exit status is the number of failures; `info` lines (a choice
for the owners) are not counted.

    PYTHONPATH=. /work/venv/bin/python bench/acceptance_more.py [--keep DIR] [--source DIR]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from bench.acceptance import FILLERS, MODEL, PAST, SYSTEM, Probe, run_checks  # noqa: E402
from bench.locomo import block_of  # noqa: E402

START, END = "=== Memory Context ===", "=== End Memory ==="
Check = Callable[[Probe], tuple[bool, str]]
LATER = {"X-Memory-Timestamp": "2026-10-28T09:00:00"}


def found(value: str, block: str) -> tuple[bool, str]:
    return value in block, f"{value!r} {'in' if value in block else 'not in'} the block"


def talk(
    probe: Probe, user: str, session: str | None, pairs: list[tuple[Any, str]], day: str
) -> Any:
    """A conversation whose client resends it all; `pairs`: (user content, assistant reply)."""
    history: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
    raw = None
    for minute, (said, reply) in enumerate(pairs):
        history.append(said if isinstance(said, dict) else {"role": "user", "content": said})
        headers = {"X-Memory-Timestamp": f"{day}T10:{minute:02d}:00"}
        if session:
            headers["X-Memory-Session-Id"] = session
        raw = probe.chat(user, history, reply=reply, **headers)
        history.append({"role": "assistant", "content": reply})
    return raw


def small_talk(probe: Probe, user: str, count: int) -> None:
    """Conversations of nothing in particular, so recall has turns to choose among."""
    for n in range(count):
        pairs = [(FILLERS[n % len(FILLERS)], "Sounds like a week!"), ("Thanks, bye.", "Bye!")]
        talk(probe, user, f"{user}-chat-{n}", pairs, f"2026-08-{n + 1:02d}")


def responses_block(body: dict[str, Any]) -> str:
    """The block's text wherever the Responses body carries it."""
    text = json.dumps(body, ensure_ascii=False)
    if START not in text:
        return ""
    return json.loads(f'"{text.split(START, 1)[1].split(END, 1)[0]}"')


# -- exact identifiers ---------------------------------------------------------------------------

TRIP = (
    "Booked the Lisbon trip at last: flight BA 2490 on the 14th, seat 14C by the window, "
    "booking ref K7XQ2P. The hotel is still to sort out."
)


def identifier_checks() -> list[tuple[str, Check]]:
    def several(question: str, value: str, first: bool) -> Check:
        def check(probe: Probe) -> tuple[bool, str]:
            if first:
                small_talk(probe, "trip", 4)
                talk(probe, "trip", "trip-1", [(TRIP, "Great, enjoy!")], "2026-09-03")
            return found(value, probe.ask("trip", question, **LATER)[0])

        return check

    def assistant_said(probe: Probe) -> tuple[bool, str]:
        small_talk(probe, "booker", 3)
        reply = "Done! Table for four at Luigi's, Friday 8pm. Your confirmation code is LUI-55820."
        pairs = [("Please book a table for four at Luigi's on Friday at 8.", reply)]
        talk(probe, "booker", "book-1", [*pairs, ("Perfect, thanks.", "Enjoy!")], "2026-09-05")
        block, _ = probe.ask("booker", "What was the confirmation code for Luigi's?", **LATER)
        return found("LUI-55820", block)

    def changed(probe: Probe) -> tuple[bool, str]:
        old = "The door code for the building is 7731, don't share it."
        new = "Heads up, the new door code is 4412, the old one 7731 no longer works."
        talk(probe, "door", "door-1", [(old, "Got it.")], "2026-08-02")
        talk(probe, "door", "door-2", [(new, "Thanks for the update.")], "2026-09-12")
        block, _ = probe.ask("door", "What's the door code for the building?", **LATER)
        at_new, at_old = block.find("4412"), block.find("7731")
        ok = at_new >= 0 and (at_old < 0 or at_new < at_old)
        return ok, f"4412 at {at_new}, 7731 at {at_old}"

    def parts(probe: Probe) -> tuple[bool, str]:
        said = {"role": "user", "content": [{"type": "text", "text": "My car reg is KX19 HBT."}]}
        talk(probe, "parts", "parts-1", [(said, "Noted.")], "2026-09-01")
        question = [{"type": "text", "text": "What's my car's registration?"}]
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]
        probe.chat("parts", messages, **{"X-Memory-Mode": "read"})
        return found("KX19 HBT", block_of(probe.upstream.last_json))

    def named(probe: Probe) -> tuple[bool, str]:
        said = {"role": "user", "name": "dana", "content": "My library card is 2298-4410-77."}
        talk(probe, "named", "named-1", [(said, "Noted.")], "2026-09-01")
        return found("2298-4410-77", probe.ask("named", "What's my library card number?")[0])

    def no_session(probe: Probe) -> tuple[bool, str]:
        pairs = [("Hi! Planning a move.", "Exciting!"), ("The removal quote is QT-90417.", "OK.")]
        talk(probe, "nosess", None, pairs, "2026-09-01")
        return found("QT-90417", probe.ask("nosess", "What was the removal quote number?")[0])

    def responses_chained(probe: Probe) -> tuple[bool, str]:
        user = {"X-Memory-User-Id": "resp1"}
        probe.upstream.script.extend([{"content": "Nice."}, {"content": "Noted."}])
        first = probe.client.responses.create(
            model=MODEL, input="I joined the pool this week.", extra_headers=user
        )
        probe.client.responses.create(
            model=MODEL,
            input="My locker code at the pool is 5593-W.",
            previous_response_id=first.id,
            extra_headers=user,
        )
        return found("5593-W", probe.ask("resp1", "What's my pool locker code?")[0])

    def responses_input(probe: Probe) -> tuple[bool, str]:
        items = [
            {"role": "user", "content": "My swim coach is called Teodora Vasquez-Lin."},
            {"role": "assistant", "content": "Nice."},
            {"role": "user", "content": "She trains us on Thursdays."},
        ]
        probe.upstream.script.append({"content": "OK."})
        probe.client.responses.create(
            model=MODEL, input=items, extra_headers={"X-Memory-User-Id": "resp2"}
        )
        probe.upstream.script.append({"content": "OK."})
        probe.client.responses.create(
            model=MODEL,
            input="What's my swim coach's name?",
            extra_headers={"X-Memory-User-Id": "resp2", "X-Memory-Mode": "read"},
        )
        return found("Teodora Vasquez-Lin", responses_block(probe.upstream.last_responses_json))

    return [
        (
            "identifier: flight of three in one turn",
            several("What's my flight number?", "BA 2490", True),
        ),
        ("identifier: seat of three in one turn", several("Which seat did I get?", "14C", False)),
        (
            "identifier: ref of three in one turn",
            several("What was the booking reference?", "K7XQ2P", False),
        ),
        ("identifier: said by the assistant", assistant_said),
        ("identifier: changed, the new value first", changed),
        ("identifier: content as a list of parts", parts),
        ("identifier: a user message with `name`", named),
        ("identifier: no X-Memory-Session-Id", no_session),
        ("identifier: Responses with previous_response_id", responses_chained),
        ("identifier: Responses input list, asked over Responses", responses_input),
    ]


# -- turns the client dropped --------------------------------------------------------------------


def dropped_checks() -> list[tuple[str, Check]]:
    chatter = [
        "Can you suggest a quick weekday pasta?",
        "Something without mushrooms please.",
        "How about a side salad?",
        "And a dessert with berries?",
        "What wine goes with that?",
        "How long do leftovers keep?",
    ]

    def middle(probe: Probe) -> tuple[bool, str]:
        """A client keeping the opening pair and the last three messages, cutting the middle."""
        turns = ["Hi, I need help planning meals.", "My bike lock code is 2207, by the way."]
        turns += [*chatter, "What was my bike lock code?"]
        history: list[dict[str, Any]] = []
        for said in turns:
            history.append({"role": "user", "content": said})
            window = history[:2] + history[2:][-3:] if len(history) > 5 else history
            probe.chat("mid", [{"role": "system", "content": SYSTEM}, *window], reply="Sure.")
            history.append({"role": "assistant", "content": "Sure."})
        return found("2207", block_of(probe.upstream.last_json))

    def summary_at_once(probe: Probe) -> tuple[bool, str]:
        """Last four messages and a summary, asked at once (no flush)."""
        history: list[dict[str, Any]] = []
        turns = ["My passport expires on 2027-03-14, I need to renew it.", *chatter]
        for said in [*turns, "When does my passport expire?"]:
            history.append({"role": "user", "content": said})
            note = {"role": "system", "content": "Summary: the user asked for meal ideas."}
            window = [note, *history[-4:]] if len(history) > 4 else history
            probe.chat("sum", [{"role": "system", "content": SYSTEM}, *window], reply="Sure.")
            history.append({"role": "assistant", "content": "Sure."})
        return found("2027-03-14", block_of(probe.upstream.last_json))

    def agent(probe: Probe) -> tuple[bool, str]:
        """An agent's history with a tool call and its result; the opening turn dropped."""
        call = {"id": "call_1", "type": "function"}
        call["function"] = {"name": "get_invoice", "arguments": '{"account": "ACC-77120-Z"}'}
        history: list[dict[str, Any]] = [
            {"role": "user", "content": "My customer account is ACC-77120-Z, check my invoice."},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_1", "content": '{"invoice": "INV-3391"}'},
            {"role": "assistant", "content": "Your last invoice is INV-3391, 120.50 EUR."},
        ]
        for said in chatter[:4]:
            history.append({"role": "user", "content": said})
            probe.chat("agent", [{"role": "system", "content": SYSTEM}, *history[-6:]])
            history.append({"role": "assistant", "content": "Noted."})
        history.append({"role": "user", "content": "What was my customer account number?"})
        probe.chat("agent", [{"role": "system", "content": SYSTEM}, *history[-5:]])
        return found("ACC-77120-Z", block_of(probe.upstream.last_json))

    def assistant_dropped(probe: Probe) -> tuple[bool, str]:
        """The assistant's own dropped reply, asked for in the same conversation."""
        history: list[dict[str, Any]] = []
        replies = ["Your temporary PIN is 8836; change it after logging in.", *["Sure."] * 6]
        turns = ["Can you give me a temporary PIN for the portal?", *chatter]
        for said, reply in zip(
            [*turns, "What was the temporary PIN you gave me?"], [*replies, "?"], strict=True
        ):
            history.append({"role": "user", "content": said})
            probe.chat("asst", [{"role": "system", "content": SYSTEM}, *history[-4:]], reply=reply)
            history.append({"role": "assistant", "content": reply})
        return found("8836", block_of(probe.upstream.last_json))

    return [
        ("dropped: a client cutting the middle", middle),
        ("dropped: summary and last 4, asked at once", summary_at_once),
        ("dropped: an agent with tool calls in history", agent),
        ("dropped: the assistant's own dropped reply", assistant_dropped),
    ]


# -- facts ---------------------------------------------------------------------------------------


def facts_of(probe: Probe, user: str) -> list[dict[str, Any]]:
    answer = httpx.get(probe.root + "/v1/memory/facts", headers={"x-memory-user-id": user})
    return list(answer.json()["facts"])


def fact_checks() -> list[tuple[str, Check]]:
    def corrected(probe: Probe) -> tuple[bool, str]:
        talk(
            probe, "diet", "d1", [("I'm vegan, so no animal products please.", "OK.")], "2026-08-01"
        )
        fix = "Actually I'm vegetarian, not vegan: I do eat eggs and cheese."
        talk(probe, "diet", "d2", [(fix, "Thanks.")], "2026-09-01")
        facts = probe.ask("diet", "Any dinner ideas for tonight?")[0].split(PAST, 1)[0]
        veg, vegan = facts.find("vegetarian"), re.search(r"\bvegan\b", facts)
        ok = veg >= 0 and (vegan is None or veg < vegan.start())
        return ok, f"facts section: {facts.strip()[-160:]!r}"

    def per_user(probe: Probe) -> tuple[bool, str]:
        talk(probe, "fa", "fa-1", [("I'm allergic to shellfish.", "Noted.")], "2026-09-01")
        talk(probe, "fb", "fb-1", [("I love seafood.", "Nice.")], "2026-09-01")
        mine = probe.ask("fa", "Is the seafood platter OK for me?")[0]
        other = probe.ask("fb", "Is the seafood platter OK for me?")[0]
        ok = "shellfish" in mine and "shellfish" not in other
        return ok, f"owner sees it {'shellfish' in mine}, other user {'shellfish' in other}"

    def one_forgotten(probe: Probe) -> tuple[bool, str]:
        pairs = [("I'm vegetarian.", "OK."), ("I'm allergic to penicillin.", "Noted.")]
        talk(probe, "fone", "fone-1", pairs, "2026-09-01")
        probe.flush()
        before = facts_of(probe, "fone")
        gone = [f["key"] for f in before if "vegetarian" in json.dumps(f)]
        for key in gone:
            httpx.delete(
                probe.root + f"/v1/memory/facts/{key}", headers={"x-memory-user-id": "fone"}
            )
        facts = probe.ask("fone", "Any antibiotics and dinner ideas?")[0].split(PAST, 1)[0]
        ok = bool(gone) and "vegetarian" not in facts and "penicillin" in facts
        return ok, f"deleted {gone} of {len(before)}; facts after: {facts.strip()[-120:]!r}"

    def job(probe: Probe) -> tuple[bool, str]:
        talk(probe, "job", "j1", [("I work as a nurse at St Mary's.", "Nice.")], "2026-07-01")
        moved = "Big change: I left nursing, I'm a software tester at Acme now."
        talk(probe, "job", "j2", [(moved, "Congrats!")], "2026-09-01")
        block = probe.ask("job", "Where do I work these days?")[0]
        new, old = block.find("Acme"), block.find("St Mary")
        ok = new >= 0 and (old < 0 or new < old)
        return ok, f"Acme at {new}, St Mary's at {old}"

    def name(probe: Probe) -> tuple[bool, str]:
        talk(
            probe,
            "named2",
            "n1",
            [("Hi! My name is Oluwaseun, friends call me Seun.", "Hi!")],
            "2026-09-01",
        )
        return found("Seun", probe.ask("named2", "What should you call me?")[0])

    return [
        ("facts: a job that changed, the new one first", job),
        ("facts: the user's name in a new conversation", name),
        ("facts: corrected later, asked in a new conversation", corrected),
        ("facts: one user's fact never in another's block", per_user),
        ("facts: one fact forgotten, the other kept", one_forgotten),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", type=Path, help="a directory for the store and log, kept")
    parser.add_argument("--source", type=Path, default=ROOT, help="the build to serve")
    args = parser.parse_args()
    from bench.acceptance_edges import (
        client_checks,
        kind_checks,
        long_turn_checks,
        window_checks,
    )
    from bench.acceptance_wire import (  # they import this module's helpers
        forget_checks,
        isolation_checks,
        streaming_checks,
        tier_checks,
    )

    checks = [
        *identifier_checks(),
        *dropped_checks(),
        *fact_checks(),
        *tier_checks(),
        *isolation_checks(),
        *forget_checks(),
        *streaming_checks(),
        *kind_checks(),
        *long_turn_checks(),
        *window_checks(),
        *client_checks(),
    ]
    run_checks(checks, args.keep, args.source, "moim-accept-")


if __name__ == "__main__":
    main()
