"""Black-box probes of how chat UIs and agents really talk: what the earlier rounds leave out.

The same real `moim serve` and stand-in (acceptance.py's `running` and `Probe`), the official
openai SDK only: an answer continued from a partial assistant message (prefill, "continue"), a
system prompt edited mid-chat, a history resent trimmed or with its markdown normalised, the
same question in two chats, a quoted or pasted earlier answer, an image dropped from the
history, a window cut by tokens mid-message, Open WebUI's and LiteLLM's ids, a SillyTavern-like
prompt (character card, `name`s, example dialogue), sampling options and a reply cut by
`max_tokens`, "stop" pressed mid-stream, a RAG UI's wrapped message. Edits (of a user message,
of an answer) and regenerations are measured only (`info`: how their branches are stored is
being changed). One line per check, a total, the exit status is the number of failures; `info`
lines (a choice for the owners) are not counted. The checks of images, windows, ids,
characters and sampling are in `bench/acceptance_ui2.py`, stops, answers edited and RAG in
`bench/acceptance_ui3.py`. Notes and numbers:
docs/recall-quality.md, "Acceptance probes: how chat UIs talk".

    PYTHONPATH=. /work/venv/bin/python bench/acceptance_ui.py [--keep DIR] [--only TEXT]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.acceptance import SYSTEM, Probe, run_checks  # noqa: E402
from bench.acceptance_more import small_talk  # noqa: E402
from bench.acceptance_round2b import exported  # noqa: E402
from bench.locomo import block_of  # noqa: E402

Check = Callable[[Probe], tuple[bool, str]]
LATER = {"X-Memory-Timestamp": "2026-10-28T09:00:00"}


def send(
    probe: Probe,
    user: str,
    session: str | None,
    messages: list[dict[str, Any]],
    reply: str,
    minute: int,
    **headers: str,
) -> Any:
    """One request of a chat UI, its own history as it chose to send it; the raw response."""
    stamp = {"X-Memory-Timestamp": f"2026-09-20T10:{minute:02d}:00", **headers}
    if session:
        stamp["X-Memory-Session-Id"] = session
    return probe.chat(user, messages, reply=reply, **stamp)


def stored(probe: Probe, user: str, text: str) -> list[dict[str, Any]]:
    """The user's stored messages whose content holds `text`."""
    return [
        i
        for i in exported(probe, user)
        if i.get("type", "message") == "message" and text in str(i.get("content"))
    ]


def times_shown(block: str, text: str) -> int:
    """How many times the block's recalled part shows `text` (two lines of one excerpt that
    both say it count twice)."""
    recalled = block.split("[Relevant past context]", 1)[-1] if block else ""
    return recalled.count(text)


def roles(items: list[dict[str, Any]]) -> str:
    return ", ".join(f"{i['role']}@{str(i.get('session_id'))[:10]}" for i in items)


# -- continue generation -------------------------------------------------------------------------

PARTIAL = "Your packing list: passport, the blue adapter, "
REST = "the charger with tag PK-CONT-77, two warm jumpers and the hiking boots."


def continued(probe: Probe) -> tuple[bool, str]:
    """The UI sends the history ending with a partial assistant message, the model continues it;
    next turn the UI sends the joined message. A new chat asks for the list."""
    user = "pref"
    small_talk(probe, user, 2)
    start = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Make me a packing list for the Norway trip."},
    ]
    send(probe, user, "pref-1", [*start, {"role": "assistant", "content": PARTIAL}], REST, 1)
    joined = {"role": "assistant", "content": PARTIAL + REST}
    later = [*start, joined, {"role": "user", "content": "Perfect, thanks."}]
    send(probe, user, "pref-1", later, "You're welcome!", 2)
    probe.flush()
    block, _ = probe.ask(user, "What was the tag on the charger in my packing list?", **LATER)
    whole = times_shown(block, "PK-CONT-77")
    prefix = times_shown(block, "blue adapter")
    ok = whole == 1 and prefix == 1
    return ok, (
        f"the code shown {whole} times, the prefill's words {prefix}; stored holding "
        f"the prefill {len(stored(probe, user, 'blue adapter'))}, the code "
        f"{len(stored(probe, user, 'PK-CONT-77'))}"
    )


def continued_later(probe: Probe) -> tuple[bool, str]:
    """After `continued`: a later turn of the same chat, which holds the joined answer, is not
    shown its pieces (stored apart, so not excluded as the request's own messages)."""
    start = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Make me a packing list for the Norway trip."},
        {"role": "assistant", "content": PARTIAL + REST},
        {"role": "user", "content": "Perfect, thanks."},
        {"role": "assistant", "content": "You're welcome!"},
        {"role": "user", "content": "Which tag was on the charger in the packing list?"},
    ]
    send(probe, "pref", "pref-1", start, "PK-CONT-77.", 3, **{"X-Memory-Mode": "read"})
    block = block_of(probe.upstream.last_json)
    code, prefix = times_shown(block, "PK-CONT-77"), times_shown(block, "blue adapter")
    return code == 0 and prefix == 0, f"pieces of the answer in the window shown {code + prefix}"


def continued_stored(probe: Probe) -> tuple[bool, str]:
    """After `continued`: the answer stored as the client last sent it, whole."""
    items = stored(probe, "pref", "PK-CONT-77")
    whole = [i for i in items if PARTIAL + REST == i.get("content")]
    return bool(whole), f"stored with the code: {[str(i['content'])[:50] for i in items]}"


def continued_again(probe: Probe) -> tuple[bool, str]:
    """The "continue" button twice on a reply cut short: the request ends with the reply so
    far (no new user message), twice; then the joined text in the next turn."""
    user = "cont2"
    start = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Tell me the three steps to reset the boiler."},
    ]
    parts = ["Step one: switch off at the wall. ", "Step two: hold RESET-4410 for ten ", "sec."]
    so_far = ""
    for n, part in enumerate(parts):
        history = [*start, {"role": "assistant", "content": so_far}] if so_far else start
        send(probe, user, "cont2-1", history, part, n)
        so_far += part
    after = [*start, {"role": "assistant", "content": so_far}, {"role": "user", "content": "ok"}]
    send(probe, user, "cont2-1", after, "Good luck!", 5)
    probe.flush()
    block, _ = probe.ask(user, "How long did I have to hold the boiler reset button?", **LATER)
    n = times_shown(block, "RESET-4410")
    items = stored(probe, user, "RESET-4410")
    return n == 1 and "sec" in block, (
        f"the code shown {n} times, whole sentence recalled {'sec.' in block}; "
        f"{len(items)} stored messages hold the code"
    )


# -- the system prompt changed -------------------------------------------------------------------


def system_changed(header: bool) -> Check:
    """The user edits the chat's system prompt after two turns; the chat goes on."""

    def check(probe: Probe) -> tuple[bool, str]:
        user = f"sys{int(header)}"
        session = f"{user}-1" if header else None
        small_talk(probe, user, 2)
        history: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
        said = ["Hi, I'm sorting out my new flat.", "The letterbox key number is LB-6620-SY."]
        for n, text in enumerate(said):
            history.append({"role": "user", "content": text})
            send(probe, user, session, history, "Noted.", n)
            history.append({"role": "assistant", "content": "Noted."})
        history[0] = {"role": "system", "content": "You are a terse assistant. Answer in French."}
        history.append({"role": "user", "content": "And the bins go out on Tuesdays."})
        raw = send(probe, user, session, history, "D'accord.", 3)
        inside = block_of(probe.upstream.last_json)
        probe.flush()
        block, _ = probe.ask(user, "What's my letterbox key number?", **LATER)
        items = stored(probe, user, "LB-6620-SY")
        sessions = {i["session_id"] for i in stored(probe, user, "flat")}
        ok = len(items) == 1 and times_shown(block, "LB-6620-SY") == 1
        ok = ok and "LB-6620-SY" not in inside
        return ok, (
            f"stored {len(items)} times ({roles(items)}), sessions {len(sessions)}, "
            f"session header back {raw.headers.get('x-memory-session-id', '')[:12]}, "
            f"in-chat block has it {'LB-6620-SY' in inside}, a new chat shows it "
            f"{times_shown(block, 'LB-6620-SY')}"
        )

    return check


# -- the history resent otherwise -----------------------------------------------------------------


def resent_otherwise(kind: str) -> Check:
    """The UI resends the chat with the assistant's answer trimmed or its markdown normalised
    (a renamed chat reloaded from the UI's own database)."""

    answer = "**Your plan:**\n\n* Gate code: `GT-5150-MD`\n* Bring ID\n\n"
    again = {
        "trim": answer.strip(),
        "markdown": "Your plan:\n\n- Gate code: GT-5150-MD\n- Bring ID",
        "crlf": answer.strip().replace("\n", "\r\n"),
    }[kind]

    def check(probe: Probe) -> tuple[bool, str]:
        user = f"re-{kind}"
        small_talk(probe, user, 2)
        start = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": "Summarise the plan for the festival."},
        ]
        send(probe, user, f"{user}-1", start, answer, 1)
        later = [
            *start,
            {"role": "assistant", "content": again},
            {"role": "user", "content": "Thanks!"},
        ]
        send(probe, user, f"{user}-1", later, "Enjoy!", 2)
        probe.flush()
        later += [
            {"role": "assistant", "content": "Enjoy!"},
            {"role": "user", "content": "Wait, what was the gate code for the festival?"},
        ]
        send(probe, user, f"{user}-1", later, "GT-5150-MD.", 3, **{"X-Memory-Mode": "read"})
        inside = times_shown(block_of(probe.upstream.last_json), "GT-5150-MD")
        block, _ = probe.ask(user, "What was the gate code for the festival?", **LATER)
        items = stored(probe, user, "GT-5150-MD")
        n = times_shown(block, "GT-5150-MD")
        return inside == 0 and n == 1, (
            f"in the same chat, the answer in its window shown again {inside} times; "
            f"a new chat shows it {n} times; stored {len(items)} times"
        )

    return check


# -- the same words in several chats -------------------------------------------------------------

QUESTION = (
    "I'm comparing two mortgage offers for the flat in Harrogate, one fixed for five years at "
    "4.1 percent and one tracker at base plus 0.6 with no early repayment fee: which one would "
    "you take if rates might fall next year, and what should I ask the broker?"
)


def same_question(probe: Probe) -> tuple[bool, str]:
    """The same long question in two chats, each answered; a third chat asks it again."""
    user = "sameq"
    small_talk(probe, user, 2)
    answers = ["Take the tracker, ask about the cap MQ-1.", "The fixed one, ask about MQ-2 fees."]
    for n, answer in enumerate(answers):
        history = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]
        send(probe, user, f"sameq-{n}", history, answer, n)
    probe.flush()
    block, _ = probe.ask(user, QUESTION, **LATER)
    asked = times_shown(block, "Harrogate")
    told = sum(times_shown(block, code) for code in ("MQ-1", "MQ-2"))
    return told >= 1 and asked <= 1, f"the question shown {asked} times, the answers {told}"


def quoted(probe: Probe) -> tuple[bool, str]:
    """A user message quoting an earlier answer; a new chat asks for what the answer said."""
    user = "quote"
    small_talk(probe, user, 2)
    answer = "The venue's Wi-Fi password is QT-HALL-8841, written on the bar."
    history = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "What's the venue's Wi-Fi password?"},
    ]
    send(probe, user, "quote-1", history, answer, 1)
    history += [
        {"role": "assistant", "content": answer},
        {"role": "user", "content": f"> {answer}\n\nAre you sure? I thought it was on the door."},
    ]
    send(probe, user, "quote-1", history, "Yes, it's on the bar.", 2)
    probe.flush()
    block, _ = probe.ask(user, "What was the venue's Wi-Fi password?", **LATER)
    n = times_shown(block, "QT-HALL-8841")
    return n >= 1, f"the password shown {n} times"


def pasted(probe: Probe) -> tuple[bool, str]:
    """An earlier assistant answer pasted into a new chat as the user's message: the block of
    that request does not repeat it."""
    user = "paste"
    small_talk(probe, user, 2)
    answer = (
        "Here is the itinerary: ferry PX-3390 at 07:40 from Hirtshals, arrive Kristiansand "
        "10:55, then the coastal road to Mandal."
    )
    start = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Plan the crossing to Norway."},
    ]
    send(probe, user, "paste-1", start, answer, 1)
    probe.flush()
    fresh = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": answer + "\n\nCan you turn this ferry plan into a checklist?"},
    ]
    send(probe, user, "paste-2", fresh, "Sure.", 2, **{"X-Memory-Mode": "read"})
    block = block_of(probe.upstream.last_json)
    n = times_shown(block, "PX-3390")
    return n == 0, f"the pasted answer shown again {n} times"


# -- edits and regenerations (measured only) -----------------------------------------------------


def edited_earlier(probe: Probe) -> tuple[bool, str]:
    """The first user message of three edited; the chat goes on from the edit."""
    user = "edit1"
    base = {"role": "system", "content": SYSTEM}
    old = [base, {"role": "user", "content": "My flight lands at gate ED-OLD-12."}]
    send(probe, user, "edit1-1", old, "Noted.", 1)
    old += [{"role": "assistant", "content": "Noted."}, {"role": "user", "content": "Taxi?"}]
    send(probe, user, "edit1-1", old, "Yes, book one.", 2)
    new = [base, {"role": "user", "content": "My flight lands at gate ED-NEW-34."}]
    send(probe, user, "edit1-1", new, "Noted.", 3)
    new += [{"role": "assistant", "content": "Noted."}, {"role": "user", "content": "Thanks."}]
    send(probe, user, "edit1-1", new, "Bye.", 4)
    probe.flush()
    block, _ = probe.ask(user, "Which gate does my flight land at?", **LATER)
    old_in, new_in = "ED-OLD-12" in block, "ED-NEW-34" in block
    return new_in and not old_in, f"the edit recalled {new_in}, the replaced text {old_in}"


def regenerated_thrice(probe: Probe) -> tuple[bool, str]:
    """An answer regenerated twice; the user keeps the second of three and goes on."""
    user = "regen3"
    history = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Pick a code name for the project."},
    ]
    names = ["RG-OSPREY-1", "RG-KESTREL-2", "RG-MERLIN-3"]
    for n, name in enumerate(names):
        send(probe, user, "regen3-1", history, f"How about {name}?", n)
    kept = [*history, {"role": "assistant", "content": f"How about {names[1]}?"}]
    send(probe, user, "regen3-1", [*kept, {"role": "user", "content": "Go with it."}], "OK!", 5)
    probe.flush()
    block, _ = probe.ask(user, "Which code name did we pick for the project?", **LATER)
    seen = [name for name in names if name in block]
    return seen == [names[1]], f"names in the block {seen}"


def checks() -> list[tuple[str, Check]]:
    return [
        ("prefill: a continued answer recalled, the prefill not twice", continued),
        ("prefill: a later turn of the chat is not shown the answer's pieces", continued_later),
        ("prefill: the joined answer stored whole", continued_stored),
        ("prefill: 'continue' twice on a cut reply, recalled once and whole", continued_again),
        ("system prompt edited mid-chat (session header): stored once", system_changed(True)),
        ("system prompt edited mid-chat (no session id): stored once", system_changed(False)),
        ("resent trimmed: shown once", resent_otherwise("trim")),
        ("resent with markdown normalised: shown once", resent_otherwise("markdown")),
        ("resent with CRLF line ends: shown once", resent_otherwise("crlf")),
        ("same long question in two chats, asked again", same_question),
        ("a message quoting an earlier answer", quoted),
        ("an earlier answer pasted in a new chat is not repeated", pasted),
        ("info edit: the first of three user messages edited", edited_earlier),
        ("info regenerate: three answers, the second kept", regenerated_thrice),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", type=Path, help="a directory for the store and log, kept")
    parser.add_argument("--source", type=Path, default=ROOT, help="the build to serve")
    parser.add_argument("--only", help="run the checks whose name has this text")
    args = parser.parse_args()
    from bench.acceptance_ui2 import checks as more
    from bench.acceptance_ui3 import checks as rest

    everything = [*checks(), *more(), *rest()]
    chosen = [c for c in everything if not args.only or args.only in c[0]]
    run_checks(chosen, args.keep, args.source, "moim-accept-ui-")


if __name__ == "__main__":
    main()
