"""Black-box probes of the classes issue 16's hidden acceptance suite expects at 1.00.

The probes talk to a real `moim serve` (a subprocess of this source tree, on a free port, its
own SQLite store) in front of the stand-in provider of `tests/upstream.py`, with the official
openai SDK only, and judge what the provider received (the memory block) and what the client
got (headers, bytes). Classes: exact identifiers, turns the client dropped, facts, tiers,
isolation, forget, streaming. One line per check (`ok` / `FAIL` and what was seen), then a
total; the exit status is the number of failures (capped at 100). `info` lines are not
counted: one depends on timing (a client as fast as the stand-in asks before the writer has
indexed its turns), one shows a behaviour for the owners to decide (a forgotten user's client
resending the old conversation stores it again).

    PYTHONPATH=. /work/venv/bin/python bench/acceptance.py [--keep DIR] [--source DIR]

`--source` runs another build's `moim serve` (`git archive <rev> | tar -x -C DIR`).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
import openai  # noqa: E402
from starlette.responses import Response  # noqa: E402

from bench.harness import serve_proxy  # noqa: E402
from bench.locomo import block_of  # noqa: E402
from memory import count_message_tokens  # noqa: E402
from tests.upstream import Upstream, serve_upstream  # noqa: E402

MODEL, SYSTEM = "gpt-4o-mini", "You are a helpful assistant."
PAST = "[Relevant past context]"
FACTS = "[Known about the user]"
CHATTER = (
    "Anyway, the week has been a blur, the kids had swimming on Tuesday and the neighbours "
    "are redoing their kitchen so there is drilling from eight every morning, which is great "
    "when you work from home. "
)
# Small talk around each identifier, a different pair for each conversation.
FILLERS = [
    "The kids had swimming on Tuesday and the neighbours are redoing their kitchen.",
    "I finally finished that crime novel, the ending was a total let-down honestly.",
    "Work has been hectic, three launches in a row and my manager is on holiday.",
    "We tried the new ramen place on the corner, the broth was amazing but so salty.",
    "My knee has been acting up again since the hike, so I'm taking it easy.",
    "The cat knocked a plant off the windowsill at 3am and woke the whole house.",
    "It has rained every single day this week, the garden is basically a pond.",
    "My brother is visiting next month and I still haven't sorted the spare room.",
    "I've been trying to learn the ukulele, my fingers hate me right now.",
    "The car needs new tyres before winter, another bill to add to the pile.",
    "We watched a documentary about octopuses last night, they are so clever.",
    "Mum called to ask about Christmas plans already, it's only September!",
]
# (what the user says, mid-paragraph; weeks later, asked in other words; the exact string)
IDENTIFIERS = [
    (
        "the serial on the back of the dishwasher is SN-4471-XQ9, the repair guy wanted it",
        "What was the dishwasher's serial again?",
        "SN-4471-XQ9",
    ),
    (
        "my order number for the standing desk is #A-20931-77 and it still hasn't shipped",
        "Which order number did the standing desk have?",
        "#A-20931-77",
    ),
    (
        "the landlord's IBAN for the rent is DE89 3704 0044 0532 0130 00, I keep losing it",
        "What's the bank account I pay rent to?",
        "DE89 3704 0044 0532 0130 00",
    ),
    (
        "the support ticket id is 3f2b8c1e-9a4d-4e7b-b0c2-5d6e7f8a9b01 in their portal",
        "Can you remind me of that support ticket id?",
        "3f2b8c1e-9a4d-4e7b-b0c2-5d6e7f8a9b01",
    ),
    (
        "I set up a billing address dana.k+billing@fastmail.com just for subscriptions",
        "Which e-mail did I make for subscriptions?",
        "dana.k+billing@fastmail.com",
    ),
    (
        "the bug is tracked at https://git.example.org/infra/deploy-tools/-/issues/482?tab=notes",
        "Where was that deploy tools bug tracked?",
        "https://git.example.org/infra/deploy-tools/-/issues/482?tab=notes",
    ),
    (
        "the broken config lives in /etc/nginx/sites-available/shop_v2.conf on the box",
        "Which nginx file was the broken one?",
        "/etc/nginx/sites-available/shop_v2.conf",
    ),
    (
        "we pinned the library to v2.14.3-rc1 because rc2 broke the build",
        "What version did we pin the library to?",
        "v2.14.3-rc1",
    ),
    (
        "the wifi guest code at the cabin is wx7-k3p!q (lowercase, with the bang)",
        "what was that cabin wifi code again?",
        "wx7-k3p!q",
    ),
    (
        "the house sold for 1,284,500.75 in the end, way over asking",
        "How much did the house go for?",
        "1,284,500.75",
    ),
    (
        "my new accountant is called Małgorzata Świętokrzyska, she's brilliant",
        "What's my accountant's name?",
        "Małgorzata Świętokrzyska",
    ),
]

Check = Callable[["Probe"], tuple[bool, str]]


class Probe:
    """The running proxy and stand-in, and the calls every check makes."""

    def __init__(self, root: str, upstream: Upstream, config: Path) -> None:
        self.root, self.upstream, self.config = root, upstream, config
        self.client = openai.OpenAI(base_url=root + "/v1", api_key="sk-test", max_retries=0)

    def chat(
        self,
        user: str,
        messages: list[dict[str, Any]],
        reply: str = "Noted.",
        model: str = MODEL,
        **headers: str,
    ) -> Any:
        """A turn as a chat client sends it; the raw response (its headers)."""
        self.upstream.script.append({"content": reply})
        # The SDK sends headers as ASCII: another id goes as the body's `user`.
        ascii_id = user.isascii()
        extra = {"X-Memory-User-Id": user, **headers} if ascii_id else headers
        return self.client.chat.completions.with_raw_response.create(
            model=model,
            messages=messages,  # type: ignore[arg-type]
            extra_headers=extra,
            extra_body={} if ascii_id else {"user": user},
        )

    def say(self, user: str, session: str, turns: list[str], day: str) -> None:
        """A whole conversation, the client sending the whole history each turn."""
        history: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
        for minute, said in enumerate(turns):
            history.append({"role": "user", "content": said})
            headers = {
                "X-Memory-Session-Id": session,
                "X-Memory-Timestamp": f"{day}T10:{minute:02d}:00",
            }
            self.chat(user, history, **headers)
            history.append({"role": "assistant", "content": "Noted."})

    def ask(self, user: str, question: str, model: str = MODEL, **headers: str) -> tuple[str, Any]:
        """A new conversation asking `question` in read mode: the block and the response."""
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]
        raw = self.chat(user, messages, model=model, **{"X-Memory-Mode": "read", **headers})
        return block_of(self.upstream.last_json), raw

    def flush(self) -> None:
        assert httpx.post(self.root + "/v1/memory/flush", timeout=120).status_code == 200


# -- exact identifiers -------------------------------------------------------------------------


def identifier_checks() -> list[tuple[str, Check]]:
    def setup(probe: Probe) -> None:
        for n, (said, _, _) in enumerate(IDENTIFIERS):
            before, after = FILLERS[n], FILLERS[(n + 5) % len(FILLERS)]
            turn = f"{before} Oh and before I forget, {said}. {after} Anyway, what's for dinner?"
            probe.say("ids", f"ids-{n}", [turn, "Thanks, talk soon."], f"2026-09-{n + 1:02d}")
        probe.flush()

    checks: list[tuple[str, Check]] = []
    for n, (_, question, value) in enumerate(IDENTIFIERS):

        def check(probe: Probe, question: str = question, value: str = value, n: int = n) -> Any:
            if n == 0:
                setup(probe)
            block, _ = probe.ask("ids", question, **{"X-Memory-Timestamp": "2026-10-28T09:00:00"})
            return value in block, f"{value!r} {'in' if value in block else 'not in'} the block"

        checks.append((f"identifier {value}", check))
    checks.append(("identifier: codes among the same small talk, asked by kind", boilerplate))
    checks.append(("identifier: a code never said gets no excerpt", never_said))
    return checks


SAME_TALK = [
    (
        "the serial on the back of the dishwasher is SN-4471-XQ9",
        "What was the dishwasher's serial?",
        "SN-4471-XQ9",
    ),
    (
        "my order number for the standing desk is #A-20931-77",
        "Which order number was the desk?",
        "#A-20931-77",
    ),
    (
        "the wifi guest code at the cabin is wx7-k3p!q",
        "what was that cabin wifi code again?",
        "wx7-k3p!q",
    ),
    (
        "the support ticket id is 3f2b8c1e-9a4d-4e7b",
        "What was the support ticket id?",
        "3f2b8c1e-9a4d-4e7b",
    ),
]


def never_said(probe: Probe) -> tuple[bool, str]:
    """Codes of other kinds were said (the checks above): one never said is not answered."""
    shown = []
    for question in ["What's my passport number?", "What was the garage door code again?"]:
        for user in ("ids", "same"):
            block, _ = probe.ask(user, question)
            if PAST in block:
                shown.append(f"{user}: {question}")
    return not shown, f"excerpts for {shown}" if shown else "no excerpt for 4 questions"


def boilerplate(probe: Probe) -> tuple[bool, str]:
    """Each code said in the same chatty paragraph, a conversation each (a user who pastes the
    same small talk): the code's turn is the lone turn the question's words find."""
    for n, (said, _, _) in enumerate(SAME_TALK):
        turn = f"{CHATTER}Oh and before I forget, {said}. {CHATTER}Anyway, what's for dinner?"
        probe.say("same", f"same-{n}", [turn, "Thanks, talk soon."], f"2026-09-{n + 1:02d}")
    probe.flush()
    missed = []
    for _, question, value in SAME_TALK:
        block, _ = probe.ask("same", question, **{"X-Memory-Timestamp": "2026-10-28T09:00:00"})
        if value not in block:
            missed.append(value)
    return not missed, f"missed {missed}" if missed else f"all {len(SAME_TALK)} in the block"


# -- turns the client dropped ------------------------------------------------------------------

LOCKER = "My gym locker combination is 31-07-19, the one by the sauna."
GARAGE = "The garage door code is 7731-B now."
SMALL_TALK = [
    "I'm planning meals for the week, any ideas for lentils?",
    "Something with spinach would be nice too.",
    "What about a dessert that isn't too sweet?",
    "Could you suggest a wine for the lentil stew?",
    "And a playlist for cooking, something jazzy?",
    "How long does a lentil stew keep in the fridge?",
]


def windowed(
    probe: Probe, user: str, keep: int, summary: bool, settle: bool = True
) -> tuple[str, Any]:
    """A client keeping its system prompt and its last `keep` messages (or a summary of the
    rest); the block of its last turn, which asks for the dropped detail with the garage code
    still in the window. `settle`: the writer has stored the earlier turns before it asks
    (else a client as fast as the stand-in may ask before they are indexed)."""
    history: list[dict[str, Any]] = []
    system = {"role": "system", "content": SYSTEM}
    turns = [LOCKER, *SMALL_TALK, GARAGE, "What was my gym locker combination again?"]
    raw = None
    for said in turns:
        if said == turns[-1] and settle:
            probe.flush()  # the turns before are stored and indexed
        history.append({"role": "user", "content": said})
        window = history[-keep:]
        if summary and len(history) > keep:
            note = "Summary of earlier conversation: the user talked about the gym and meals."
            window = [{"role": "system", "content": note}, *window]
        raw = probe.chat(user, [system, *window], reply=f"Sure: {said[:40]}")
        history.append({"role": "assistant", "content": f"Sure: {said[:40]}"})
    return block_of(probe.upstream.last_json), raw


def dropped_checks() -> list[tuple[str, Check]]:
    def recalled(user: str, summary: bool, settle: bool = True) -> Check:
        def check(probe: Probe) -> tuple[bool, str]:
            block, _ = windowed(probe, user, 4, summary, settle)
            ok = "31-07-19" in block
            return ok, f"dropped locker code {'in' if ok else 'not in'} the block"

        return check

    def not_twice(probe: Probe) -> tuple[bool, str]:
        history = [{"role": "system", "content": SYSTEM}]
        for said in [LOCKER, *SMALL_TALK[:2], GARAGE]:
            history.append({"role": "user", "content": said})
            probe.chat("win3", history)
            history.append({"role": "assistant", "content": "Noted."})
        probe.flush()
        history.append({"role": "user", "content": "Remind me, what's the garage door code?"})
        probe.chat("win3", history[-5:])
        block = block_of(probe.upstream.last_json)
        twice = "7731-B" in block.split(PAST, 1)[-1] if PAST in block else False
        return not twice, f"in-window garage turn {'recalled again' if twice else 'not repeated'}"

    return [
        ("dropped: sliding window of 4 recalls the dropped turn", recalled("win1", False)),
        ("dropped: summarising client recalls the dropped turn", recalled("win2", True)),
        ("dropped: a turn still in the window is not an excerpt", not_twice),
        ("info dropped: asked at once, no flush (timing)", recalled("win4", False, False)),
    ]


# -- facts ---------------------------------------------------------------------------------------


def fact_checks() -> list[tuple[str, Check]]:
    def stated(probe: Probe) -> tuple[bool, str]:
        probe.say("facts1", "f1", ["Just so you know, I'm allergic to penicillin."], "2026-09-01")
        probe.flush()
        block, _ = probe.ask("facts1", "Can you suggest an antibiotic plan to ask my GP about?")
        facts = block.split(PAST, 1)[0]
        return "penicillin" in facts, f"facts section: {facts.strip()[-120:]!r}"

    def changed(probe: Probe) -> tuple[bool, str]:
        probe.say("facts2", "f2a", ["I live in Sheffield, near the station."], "2026-08-01")
        probe.say("facts2", "f2b", ["Big news: I moved to Leeds last week!"], "2026-09-20")
        probe.flush()
        block, _ = probe.ask("facts2", "Which city do I live in now?")
        new, old = block.find("Leeds"), block.find("Sheffield")
        ok = new >= 0 and (old < 0 or new < old)
        return ok, f"Leeds at {new}, Sheffield at {old}"

    return [
        ("facts: a stated fact reaches a later conversation", stated),
        ("facts: a changed fact shows the new value first", changed),
    ]


# -- tiers ---------------------------------------------------------------------------------------


def long_history(tokens: int) -> list[dict[str, Any]]:
    """A conversation of about `tokens` tokens, ending with a question about the memory."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
    n = 0
    while count_message_tokens(messages, MODEL) < tokens:
        n += 1
        messages.append({"role": "user", "content": f"Part {n} of the report: " + CHATTER * 8})
        messages.append({"role": "assistant", "content": "Understood, go on."})
    messages.append({"role": "user", "content": "What was the dishwasher's serial again?"})
    return messages


def truthful(block: str, raw: Any) -> str | None:
    """What the `x-memory-*` headers get wrong about `block`, or None."""
    h = raw.headers
    excerpts = block.count("• ")
    if (int(h["x-memory-tokens-injected"]) > 0) != bool(block):
        return f"tokens-injected {h['x-memory-tokens-injected']} with block={bool(block)}"
    if int(h["x-memory-chunks-injected"]) != excerpts:
        return f"chunks-injected {h['x-memory-chunks-injected']} but {excerpts} excerpts"
    return None


def tier_checks() -> list[tuple[str, Check]]:
    def near_limit(
        model: str, tokens: int, max_tokens: int | None, window: int, field: str = "max_tokens"
    ) -> Check:
        def check(probe: Probe) -> tuple[bool, str]:
            messages = long_history(tokens)
            probe.upstream.script.append({"content": "ok"})
            extra = {field: max_tokens} if max_tokens else {}
            raw = probe.client.chat.completions.with_raw_response.create(
                model=model,
                messages=messages,  # type: ignore[arg-type]
                extra_headers={"X-Memory-User-Id": "ids", "X-Memory-Mode": "read"},
                **extra,  # type: ignore[arg-type]
            )
            sent = probe.upstream.last_json
            block = block_of(sent)
            used = count_message_tokens(sent["messages"], "gpt-4o", exact=True)
            fits = used + (max_tokens or 0) <= window
            wrong = truthful(block, raw)
            tier = raw.headers["x-memory-tier"]
            seen = f"tier {tier}, {used}+{max_tokens or 0} of {window} tokens, block={bool(block)}"
            return fits and wrong is None, seen + (f"; {wrong}" if wrong else "")

        return check

    def room(probe: Probe) -> tuple[bool, str]:
        block, raw = probe.ask("ids", "What was the dishwasher's serial again?")
        wrong = truthful(block, raw)
        return wrong is None, wrong or f"tier {raw.headers['x-memory-tier']}, headers match"

    def refused(probe: Probe) -> tuple[bool, str]:
        """A local model moim does not know (taken as 128k) refusing the request with the
        block for its length: sent again as the client sent it, the headers saying so."""
        words = "This model's maximum context length is 8192 tokens."
        error = {"message": words, "type": "invalid_request_error", "param": "messages"}
        probe.upstream.script.extend(
            [{"status": 400, "body": {"error": {**error, "code": "context_length_exceeded"}}}]
        )
        block, raw = probe.ask("ids", "What was the dishwasher's serial again?", model="local-8k")
        sent = [r for r in probe.upstream.requests if r.path.endswith("/chat/completions")][-2:]
        first = block_of(json.loads(sent[0].body)) if len(sent) == 2 else ""
        h = raw.headers
        ok = bool(first) and not block and h["x-memory-tokens-injected"] == "0"
        ok = ok and h["x-memory-chunks-injected"] == "0"
        seen = f"status {raw.http_response.status_code}, first try block={bool(first)}, "
        return (
            ok,
            seen + f"resent block={bool(block)}, tokens-injected {h['x-memory-tokens-injected']}",
        )

    return [
        ("tiers: headers match the block (room to spare)", room),
        ("tiers: an unknown model refusing the block's length", refused),
        ("tiers: gpt-3.5-turbo at 60% of 16k", near_limit("gpt-3.5-turbo", 9800, None, 16385)),
        ("tiers: gpt-3.5-turbo at 75% of 16k", near_limit("gpt-3.5-turbo", 12300, None, 16385)),
        ("tiers: gpt-3.5-turbo, max_tokens 4000", near_limit("gpt-3.5-turbo", 12000, 4000, 16385)),
        (
            "tiers: gpt-3.5-turbo at 55%, max_completion_tokens 7000",
            near_limit("gpt-3.5-turbo", 9000, 7000, 16385, "max_completion_tokens"),
        ),
        (
            "tiers: gpt-3.5-turbo at 40%, max_tokens 9300",
            near_limit("gpt-3.5-turbo", 6500, 9300, 16385),
        ),
        ("tiers: gpt-4 (8k) at 90%", near_limit("gpt-4", 7300, None, 8192)),
        ("tiers: gpt-4 (8k), max_tokens 1500", near_limit("gpt-4", 6500, 1500, 8192)),
    ]


# -- isolation -----------------------------------------------------------------------------------


def isolation_checks() -> list[tuple[str, Check]]:
    def near_copies(probe: Probe) -> tuple[bool, str]:
        base = ["My sister's wedding is in Porto in June.", "The hotel is the Grande Hotel {}."]
        for user, name in (("twin-a", "Infante"), ("twin-b", "Batalha")):
            probe.say(user, f"{user}-s", [base[0], base[1].format(name)], "2026-09-01")
        probe.flush()
        a, _ = probe.ask("twin-a", "Which hotel are we staying at for the wedding?")
        b, _ = probe.ask("twin-b", "Which hotel are we staying at for the wedding?")
        ok = "Infante" in a and "Batalha" not in a and "Batalha" in b and "Infante" not in b
        return ok, f"a has Infante {'Infante' in a}/Batalha {'Batalha' in a}; b the reverse ok {ok}"

    ids = ["alice", "Alice", "ａｌｉｃｅ", "ali\u200bce", "café", "cafe\u0301", "alice bob"]

    def variants(probe: Probe) -> tuple[bool, str]:
        for n, user in enumerate(ids):
            probe.say(user, f"v{n}", [f"My lucky number is {1000 + n}, remember it."], "2026-09-01")
        probe.flush()
        wrong = []
        for n, user in enumerate(ids):
            block, _ = probe.ask(user, "What's my lucky number?")
            found = set(re.findall(r"\b10\d\d\b", block))
            if found != {str(1000 + n)}:
                wrong.append(f"{user!r}: {sorted(found)}")
        return not wrong, "; ".join(wrong) or f"{len(ids)} ids each see only their own"

    def path_form(probe: Probe) -> tuple[bool, str]:
        path = openai.OpenAI(base_url=probe.root + "/u/b%C3%B6b%20k/v1", api_key="k", max_retries=0)
        probe.upstream.script.append({"content": "ok"})
        path.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "My bike lock code is 5521."}]
        )
        probe.flush()
        block, _ = probe.ask("böb k", "What is my bike lock code?")
        other, _ = probe.ask("bob k", "What is my bike lock code?")
        ok = "5521" in block and "5521" not in other
        return (
            ok,
            f"user 'böb k' (body) sees it: {'5521' in block}; 'bob k' sees it: {'5521' in other}",
        )

    return [
        ("isolation: near-copy histories", near_copies),
        ("isolation: ids by case, width, zero-width, NFC/NFD, space", variants),
        ("isolation: /u/{id}/v1 path is the header's user", path_form),
    ]


# -- forget --------------------------------------------------------------------------------------


def forget_checks() -> list[tuple[str, Check]]:
    def over_http(probe: Probe) -> tuple[bool, str]:
        probe.say("gone1", "g1", ["My passport number is K8812345Z."], "2026-09-01")
        probe.flush()
        before, _ = probe.ask("gone1", "What's my passport number?")
        answer = httpx.delete(probe.root + "/v1/memory", headers={"x-memory-user-id": "gone1"})
        after, _ = probe.ask("gone1", "What's my passport number?")
        ok = "K8812345Z" in before and answer.status_code == 200 and "K8812345Z" not in after
        return (
            ok,
            f"before {'K8812345Z' in before}, delete {answer.status_code}, "
            f"after {'K8812345Z' in after}",
        )

    def over_cli(probe: Probe) -> tuple[bool, str]:
        probe.say("gone2", "g2", ["My locker PIN at work is 4490-Q."], "2026-09-01")
        probe.flush()
        before, _ = probe.ask("gone2", "What's my locker PIN at work?")
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "proxy.cli",
                "memory",
                "delete",
                "--config",
                str(probe.config),
                "--user",
                "gone2",
                "--yes",
            ],
            capture_output=True,
            text=True,
            cwd=probe.config.parent,
            timeout=300,
        )
        after, _ = probe.ask("gone2", "What's my locker PIN at work?")
        facts = httpx.get(probe.root + "/v1/memory/facts", headers={"x-memory-user-id": "gone2"})
        ok = "4490-Q" in before and done.returncode == 0 and "4490-Q" not in after
        ok = ok and "4490" not in facts.text
        return ok, (
            f"before {'4490-Q' in before}, cli exit {done.returncode} "
            f"{done.stderr.strip()[-200:]!r}, after {'4490-Q' in after}, facts {facts.text[:80]!r}"
        )

    def a_fact(probe: Probe) -> tuple[bool, str]:
        probe.say("gone3", "g3", ["I'm vegetarian, by the way."], "2026-09-01")
        probe.flush()
        listed = httpx.get(probe.root + "/v1/memory/facts", headers={"x-memory-user-id": "gone3"})
        keys = [f["key"] for f in listed.json().get("facts", listed.json().get("data", []))]
        for key in keys:
            httpx.delete(
                probe.root + f"/v1/memory/facts/{key}", headers={"x-memory-user-id": "gone3"}
            )
        block, _ = probe.ask("gone3", "Any dinner ideas for tonight?")
        facts = block.split(PAST, 1)[0]
        ok = bool(keys) and "vegetarian" not in facts
        return ok, f"facts deleted {keys}, facts section after: {facts.strip()[:100]!r}"

    def resent(probe: Probe) -> tuple[bool, str]:
        """The forgotten user's client goes on with the old conversation, resending its
        history: what moim stores is what the request holds, the forgotten turns included."""
        history = [{"role": "system", "content": SYSTEM}]
        history.append({"role": "user", "content": "My passport number is K8812345Z."})
        probe.chat("gone4", history, **{"X-Memory-Session-Id": "g4"})
        probe.flush()
        httpx.delete(probe.root + "/v1/memory", headers={"x-memory-user-id": "gone4"})
        history.append({"role": "assistant", "content": "Noted."})
        history.append({"role": "user", "content": "Thanks! What's the weather in Paris?"})
        probe.chat("gone4", history, **{"X-Memory-Session-Id": "g4"})
        probe.flush()
        after, _ = probe.ask("gone4", "What's my passport number?")
        back = "K8812345Z" in after
        return not back, f"the resent turn {'is stored and recalled again' if back else 'is not'}"

    return [
        ("forget: DELETE /v1/memory, then nothing recalled", over_http),
        ("info forget: the old conversation resent after the forget", resent),
        ("forget: moim memory delete (CLI) while serving", over_cli),
        ("forget: DELETE /v1/memory/facts/{key}", a_fact),
    ]


# -- streaming -----------------------------------------------------------------------------------


def stream_bytes(base_url: str, body: dict[str, Any], headers: dict[str, str]) -> bytes:
    client = openai.OpenAI(base_url=base_url, api_key="sk-test", max_retries=0)
    with client.chat.completions.with_streaming_response.create(
        **body, extra_headers=headers
    ) as response:
        return b"".join(response.iter_bytes())


def streaming_checks() -> list[tuple[str, Check]]:
    def same_bytes(model: str, options: dict[str, Any]) -> Check:
        def check(probe: Probe) -> tuple[bool, str]:
            body = {
                "model": model,
                "stream": True,
                **options,
                "messages": [
                    {"role": "user", "content": "What was the dishwasher's serial again?"}
                ],
            }
            probe.upstream.reset()
            got = stream_bytes(probe.root + "/v1", body, {"X-Memory-User-Id": "ids"})
            sent = probe.upstream.last_json
            probe.upstream.reset()
            direct = stream_bytes(probe.upstream.url, sent, {})
            block = bool(block_of(sent))
            return got == direct, f"{len(got)} bytes vs upstream's {len(direct)}, block={block}"

        return check

    def error_event(probe: Probe) -> tuple[bool, str]:
        body = {
            "model": "stream-error",
            "stream": True,
            "messages": [{"role": "user", "content": "What was the dishwasher's serial again?"}],
        }
        got = stream_bytes(probe.root + "/v1", body, {"X-Memory-User-Id": "ids"})
        direct = stream_bytes(probe.upstream.url, probe.upstream.last_json, {})
        return got == direct, f"{len(got)} bytes vs upstream's {len(direct)}: {got[-90:]!r}"

    return [
        (
            "streaming: bytes equal upstream's, include_usage",
            same_bytes(MODEL, {"stream_options": {"include_usage": True}}),
        ),
        ("streaming: tool-call deltas", same_bytes("tool-call", {"tools": [WEATHER_TOOL]})),
        ("streaming: logprobs chunks", same_bytes("logprobs", {"logprobs": True})),
        ("streaming: an upstream error event", error_event),
    ]


WEATHER_TOOL = {
    "type": "function",
    "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {}}},
}
ERROR_EVENTS = [
    {
        "id": "chatcmpl-err",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "stream-error",
        "choices": [
            {"index": 0, "delta": {"role": "assistant", "content": "Part"}, "finish_reason": None}
        ],
    },
    {"error": {"message": "The server had an error.", "type": "server_error", "code": None}},
]


def with_error_streams(upstream: Upstream) -> None:
    """The stand-in answers model `stream-error` with a 200 stream whose last event is an error
    (as OpenAI's does when it fails mid-reply), and no `[DONE]`."""
    chosen = upstream._next_reply

    def reply(model: str, messages: Any, script: Any) -> Any:
        if model == "stream-error":
            text = "".join(f"data: {json.dumps(e)}\n\n" for e in ERROR_EVENTS)
            return Response(text, media_type="text/event-stream")
        return chosen(model, messages, script)

    upstream._next_reply = reply  # type: ignore[method-assign]


# -- running -------------------------------------------------------------------------------------


@contextmanager
def running(home: Path, source: Path) -> Iterator[Probe]:
    with serve_upstream() as upstream:
        with_error_streams(upstream)
        db = home / "moim.db"
        with serve_proxy(upstream.url, db, source=source) as handle:
            yield Probe(handle.root, upstream, db.with_suffix(".yaml"))


def run_checks(
    checks: list[tuple[str, Check]], keep: Path | None, source: Path, prefix: str = "moim-accept-"
) -> None:
    """Run `checks` against one `moim serve` of `source` (its store in `keep`, else a temporary
    directory), print a line each and the total, and exit with the number of failures (capped
    at 100). A check that raises has failed; the others go on. `info` checks are not counted."""
    with tempfile.TemporaryDirectory(prefix=prefix) as scratch:
        home = keep or Path(scratch)
        home.mkdir(parents=True, exist_ok=True)
        failed = counted = 0
        with running(home, source) as probe:
            for name, check in checks:
                try:
                    ok, seen = check(probe)
                except Exception as exc:  # a check that raised failed; the others go on
                    ok, seen = False, f"raised {type(exc).__name__}: {exc}"[:300]
                if name.startswith("info "):  # timing or a choice for the owners: not counted
                    print(f"info {name[5:]}: {'ok' if ok else 'missed'}, {seen}", flush=True)
                    continue
                counted += 1
                failed += not ok
                print(f"{'ok  ' if ok else 'FAIL'} {name}: {seen}", flush=True)
    print(f"total: {counted - failed}/{counted} ok")
    sys.exit(min(failed, 100))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", type=Path, help="a directory for the store and log, kept")
    parser.add_argument("--source", type=Path, default=ROOT, help="the build to serve")
    args = parser.parse_args()
    checks = [
        *identifier_checks(),
        *dropped_checks(),
        *fact_checks(),
        *tier_checks(),
        *isolation_checks(),
        *forget_checks(),
        *streaming_checks(),
    ]
    run_checks(checks, args.keep, args.source)


if __name__ == "__main__":
    main()
