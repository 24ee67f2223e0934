"""`bench/acceptance_ui.py`'s probes of "stop" pressed mid-stream, an answer edited in the UI,
a RAG UI's message wrapped in its documents.
"""

from __future__ import annotations

from bench.acceptance import MODEL, SYSTEM, Probe
from bench.acceptance_more import small_talk
from bench.acceptance_ui import LATER, Check, send, stored, times_shown
from bench.locomo import block_of


def stopped(probe: Probe) -> tuple[bool, str]:
    """The user presses "stop" mid-stream; the UI keeps what it showed and the chat goes on
    with it. The same chat asks later; a new chat asks."""
    user = "stop"
    small_talk(probe, user, 2)
    reply = "The locker at the station is ST-8080-LK, second row, and " + "then more. " * 40
    start = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Where did I leave the suitcase at the station?"},
    ]
    probe.upstream.script.append({"content": reply, "delay": 0.05})
    shown = ""
    with probe.client.chat.completions.create(
        model=MODEL,
        stream=True,
        messages=start,  # type: ignore[arg-type]
        extra_headers={"X-Memory-User-Id": user, "X-Memory-Session-Id": "stop-1"},
    ) as chunks:
        for chunk in chunks:
            shown += (chunk.choices[0].delta.content or "") if chunk.choices else ""
            if len(shown) > 90:
                break
    later = [
        *start,
        {"role": "assistant", "content": shown.strip()},
        {"role": "user", "content": "OK. And what time does the station close?"},
    ]
    send(probe, user, "stop-1", later, "At midnight.", 5)
    probe.flush()
    later += [
        {"role": "assistant", "content": "At midnight."},
        {"role": "user", "content": "Which locker was it again at the station?"},
    ]
    send(probe, user, "stop-1", later, "…", 6, **{"X-Memory-Mode": "read"})
    inside = times_shown(block_of(probe.upstream.last_json), "ST-8080-LK")
    block, _ = probe.ask(user, "Which locker did I use at the station?", **LATER)
    n = times_shown(block, "ST-8080-LK")
    kept = [len(str(i["content"])) for i in stored(probe, user, "ST-8080-LK")]
    return inside == 0 and n == 1, (
        f"the UI showed {len(shown)} chars; stored {kept}; the same chat shows the code "
        f"{inside} times, a new chat {n}"
    )


def assistant_edited(probe: Probe) -> tuple[bool, str]:
    """The user edits the assistant's answer in the UI (Open WebUI allows it) and goes on."""
    user = "aedit"
    start = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "What's the meeting room for the offsite?"},
    ]
    send(probe, user, "aedit-1", start, "It's room AE-OLD-101.", 1)
    fixed = {"role": "assistant", "content": "It's room AE-NEW-202."}
    send(probe, user, "aedit-1", [*start, fixed, {"role": "user", "content": "Thanks."}], "!", 2)
    probe.flush()
    block, _ = probe.ask(user, "Which meeting room is the offsite in?", **LATER)
    old, new = "AE-OLD-101" in block, "AE-NEW-202" in block
    return new and not old, f"the edited answer recalled {new}, the replaced one {old}"


RAG = (
    "### Task:\nRespond to the user query using the provided context.\n\n<context>\n"
    "Returns policy, section 4: items bought online can be returned within 30 days with the "
    "receipt; the returns desk code is RG-4410-DOC.\n</context>\n\n<user_query>\n{}\n"
    "</user_query>"
)


def retrieved_context(probe: Probe) -> tuple[bool, str]:
    """A UI that wraps the last user message in its retrieved documents for the outgoing request
    only (a RAG template), and resends the bare message next turn: is the document text recalled
    later as the user's words?"""
    user = "rag"
    small_talk(probe, user, 2)
    asked = "Can I still return the lamp I bought online last week?"
    system = {"role": "system", "content": SYSTEM}
    send(probe, user, "rag-1", [system, {"role": "user", "content": RAG.format(asked)}], "Yes.", 1)
    later = [
        system,
        {"role": "user", "content": asked},
        {"role": "assistant", "content": "Yes."},
        {"role": "user", "content": "Great, thanks."},
    ]
    send(probe, user, "rag-1", later, "Anytime.", 2)
    probe.flush()
    block, _ = probe.ask(user, "What was the returns desk code?", **LATER)
    as_user = [i for i in stored(probe, user, "RG-4410-DOC") if i.get("role") == "user"]
    return "RG-4410-DOC" not in block, (
        f"the document's code recalled {'RG-4410-DOC' in block}; stored in "
        f"{len(as_user)} user messages"
    )


def checks() -> list[tuple[str, Check]]:
    return [
        ("stop pressed mid-stream, the chat goes on with what was shown", stopped),
        ("info edit: the assistant's answer edited in the UI", assistant_edited),
        ("info RAG: documents wrapped around the user's message, recalled?", retrieved_context),
    ]
