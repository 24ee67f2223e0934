"""`bench/acceptance_ui.py`'s probes of a prefill continued over a stream, images dropped from
a history, a window cut by tokens mid-message, Open WebUI's and LiteLLM's ids, a
SillyTavern-like prompt, sampling options and a reply cut by `max_tokens`.
"""

from __future__ import annotations

from typing import Any

import httpx

from bench.acceptance import FILLERS, MODEL, SYSTEM, Probe
from bench.acceptance_more import small_talk
from bench.acceptance_ui import LATER, Check, send, stored, times_shown
from bench.locomo import block_of
from memory.block.tokens import count_tokens


def continued_streamed(probe: Probe) -> tuple[bool, str]:
    """A prefill continued over a stream (the way chat UIs ask), the joined answer resent."""
    user = "pref-s"
    small_talk(probe, user, 2)
    start = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "What should I bring to the climbing gym?"},
    ]
    partial = "Bring your shoes, chalk and "
    rest = "the membership card CL-5541-GY, plus water and a towel for after."
    probe.upstream.script.append({"content": rest})
    headers = {"X-Memory-User-Id": user, "X-Memory-Session-Id": "pref-s-1"}
    with probe.client.chat.completions.create(
        model=MODEL,
        stream=True,
        messages=[*start, {"role": "assistant", "content": partial}],  # type: ignore[arg-type]
        extra_headers=headers,
    ) as chunks:
        got = "".join((c.choices[0].delta.content or "") for c in chunks if c.choices)
    joined = {"role": "assistant", "content": partial + got}
    send(probe, user, "pref-s-1", [*start, joined, {"role": "user", "content": "Thanks!"}], "!", 2)
    probe.flush()
    block, _ = probe.ask(user, "What was the membership card for the climbing gym?", **LATER)
    n, pieces = times_shown(block, "CL-5541-GY"), times_shown(block, "chalk")
    return n == 1 and pieces == 1, f"the code shown {n} times, the prefill's words {pieces}"


IMAGE = "https://example.com/receipts/2026-09-20.png"


def image_dropped(probe: Probe) -> tuple[bool, str]:
    """A turn with an image by URL; later requests send the same turn without the image (the
    UI drops old images to save tokens)."""
    user = "img"
    small_talk(probe, user, 2)
    said = "Here's the receipt for the repair, reference RC-7719-IM, keep it for the warranty."
    with_image = {
        "role": "user",
        "content": [
            {"type": "text", "text": said},
            {"type": "image_url", "image_url": {"url": IMAGE}},
        ],
    }
    start = [{"role": "system", "content": SYSTEM}]
    send(probe, user, "img-1", [*start, with_image], "Got it.", 1)
    after = [
        *start,
        {"role": "user", "content": said},
        {"role": "assistant", "content": "Got it."},
        {"role": "user", "content": "When does the warranty end?"},
    ]
    send(probe, user, "img-1", after, "In two years.", 2)
    probe.flush()
    block, _ = probe.ask(user, "What was the repair receipt's reference?", **LATER)
    items = stored(probe, user, "RC-7719-IM")
    n = times_shown(block, "RC-7719-IM")
    return n == 1, f"stored {len(items)} times, shown {n} times"


def cut_to(history: list[dict[str, Any]], room: int) -> list[dict[str, Any]]:
    """The newest messages of `history` within `room` tokens, the oldest of them cut to its
    back half when it does not fit whole (a UI that trims by tokens, not by turns)."""
    window: list[dict[str, Any]] = []
    for message in reversed(history):
        tokens = count_tokens(message["content"], MODEL)
        if tokens > room:
            words = message["content"].split()
            return [{**message, "content": " ".join(words[len(words) // 2 :])}, *window]
        window.insert(0, message)
        room -= tokens
    return window


def token_window(probe: Probe) -> tuple[bool, str]:
    """A long chat that the UI cuts to its last ~700 tokens each request, the cut falling inside
    a message (its front half gone). The same chat, then a new one, asks for a detail said in
    a message gone from the window."""
    user = "tokwin"
    said = [
        f"{FILLERS[n % len(FILLERS)]} {FILLERS[(n + 3) % len(FILLERS)]} {FILLERS[(n + 7) % 12]}"
        for n in range(14)
    ]
    said[1] = (
        f"{FILLERS[2]} By the way my insurance policy is IP-4471-TW, renewal in May. "
        + (FILLERS[5])
    )
    history: list[dict[str, Any]] = []
    system = {"role": "system", "content": SYSTEM}
    cuts = 0
    for n, text in enumerate(said):
        history.append({"role": "user", "content": text})
        window = cut_to(history, 700)
        cuts += window[0]["content"] != history[-len(window)]["content"]
        reply = f"Reply {n}: {FILLERS[(n + 1) % len(FILLERS)]}"
        send(probe, user, "tokwin-1", [system, *window], reply, n)
        history.append({"role": "assistant", "content": reply})
    probe.flush()
    history.append({"role": "user", "content": "What was my insurance policy number again?"})
    send(
        probe,
        user,
        "tokwin-1",
        [system, *cut_to(history, 700)],
        "…",
        30,
        **{"X-Memory-Mode": "read"},
    )
    inside = times_shown(block_of(probe.upstream.last_json), "IP-4471-TW")
    block, _ = probe.ask(user, "What's my insurance policy number?", **LATER)
    n = times_shown(block, "IP-4471-TW")
    return n == 1 and inside == 1, (
        f"{cuts} requests cut a message; the code shown {inside} times in the same chat, "
        f"{n} in a new one"
    )


def token_window_stored(probe: Probe) -> tuple[bool, str]:
    """After `token_window`: is a message cut at its front stored again, once per cut?"""
    items = [i for i in stored(probe, "tokwin", "") if i.get("role") in ("user", "assistant")]
    holding = len(stored(probe, "tokwin", "IP-4471-TW"))
    return len(items) == 28, f"{len(items)} messages stored for 28 said, {holding} hold the code"


def open_webui(probe: Probe) -> tuple[bool, str]:
    """Open WebUI's user and chat headers: two chats of one user, then a third asks."""
    ids = {"X-OpenWebUI-User-Id": "owui-user-9"}
    for n, text in enumerate(["My locker is OW-2210-A.", "My desk number is OW-3321-B."]):
        history = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": text}]
        probe.upstream.script.append({"content": "Noted."})
        probe.client.chat.completions.create(
            model=MODEL,
            messages=history,  # type: ignore[arg-type]
            extra_headers={**ids, "X-OpenWebUI-Chat-Id": f"chat-{n}"},
        )
    probe.flush()
    sessions = {i["session_id"] for i in stored(probe, "owui-user-9", "OW-")}
    asked = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "My locker?"}]
    probe.upstream.script.append({"content": "ok"})
    probe.client.chat.completions.create(
        model=MODEL,
        messages=asked,  # type: ignore[arg-type]
        extra_headers={**ids, "X-OpenWebUI-Chat-Id": "chat-2", **LATER},
    )
    block = block_of(probe.upstream.last_json)
    other = probe.ask("default", "My locker?")[0]
    ok = sessions == {"chat-0", "chat-1"} and "OW-2210-A" in block and "OW-2210" not in other
    return ok, f"sessions {sorted(sessions)}, recalled {'OW-2210-A' in block}, default sees it " + (
        str("OW-2210" in other)
    )


def litellm_user(probe: Probe) -> tuple[bool, str]:
    """LiteLLM-style `user` in the body, no header: that user's memory, no one else's."""
    for user, code in (("team-a:alice", "LL-1101-AL"), ("team-a:bob", "LL-2202-BO")):
        probe.upstream.script.append({"content": "Noted."})
        probe.client.chat.completions.create(
            model=MODEL,
            user=user,
            messages=[{"role": "user", "content": f"My parking bay is {code}."}],
        )
    probe.flush()
    probe.upstream.script.append({"content": "ok"})
    probe.client.chat.completions.create(
        model=MODEL,
        user="team-a:alice",
        messages=[{"role": "user", "content": "Which parking bay is mine?"}],
        extra_headers={"X-Memory-Mode": "read", **LATER},
    )
    block = block_of(probe.upstream.last_json)
    ok = "LL-1101-AL" in block and "LL-2202-BO" not in block
    return ok, f"alice's bay {'LL-1101-AL' in block}, bob's {'LL-2202-BO' in block}"


CARD = (
    "You are Captain Mira Vell, a gruff airship pilot of the Northern Reach. Mira's ship is "
    "the Gullwing, registry GW-9090-ST. Mira distrusts the Guild and loves apple brandy."
)


def tavern(probe: Probe) -> tuple[bool, str]:
    """A SillyTavern-like prompt: the character card in system, example dialogue as system
    messages named `example_user`/`example_assistant`, `name` on the chat's turns."""
    user = "tavern"
    examples = [
        {"role": "system", "name": "example_user", "content": "I'm allergic to cats, Captain."},
        {"role": "system", "name": "example_assistant", "content": "Then stay off my deck."},
    ]
    history: list[dict[str, Any]] = [{"role": "system", "content": CARD}, *examples]
    turns = ["Captain, I need passage to Skarholt.", "I can pay with my ring, code RG-5521-TV."]
    for n, text in enumerate(turns):
        history.append({"role": "user", "name": "Ash", "content": text})
        send(probe, user, "tav-1", history, "Hmph. Fine.", n)
        history.append({"role": "assistant", "name": "Mira", "content": "Hmph. Fine."})
    probe.flush()
    facts = httpx.get(probe.root + "/v1/memory/facts", headers={"x-memory-user-id": user}).text
    block, _ = probe.ask(user, "Do I have any allergies? Any pets I should avoid?", **LATER)
    ring, _ = probe.ask(user, "What was the code on my ring?", **LATER)
    example_as_user = [i for i in stored(probe, user, "allergic") if i.get("role") == "user"]
    ok = "cats" not in facts and "allergic to cats" not in block and not example_as_user
    ok = ok and "RG-5521-TV" in ring
    return ok, (
        f"example stored as the user's {len(example_as_user)}, in facts {'cats' in facts}, "
        f"recalled as the user's {'allergic to cats' in block}, ring recalled "
        f"{'RG-5521-TV' in ring}"
    )


def tavern_card(probe: Probe) -> tuple[bool, str]:
    """After `tavern`: the character card (a system prompt) is not recalled as an excerpt."""
    block, _ = probe.ask("tavern", "What's the registry of the airship?", **LATER)
    return times_shown(block, "GW-9090-ST") == 0, f"card in an excerpt {'GW-9090-ST' in block}"


def tavern_examples_as_turns(probe: Probe) -> tuple[bool, str]:
    """Example dialogue sent as user and assistant messages named `example_user` and
    `example_assistant` (another frontend's shape): are they stored and recalled as the
    user's own words?"""
    user = "tavern2"
    history: list[dict[str, Any]] = [
        {"role": "system", "content": CARD},
        {"role": "user", "name": "example_user", "content": "My cabin number is EX-7070-CB."},
        {"role": "assistant", "name": "example_assistant", "content": "Then go below, now."},
        {"role": "user", "name": "Ash", "content": "Captain, I need passage to Skarholt."},
    ]
    send(probe, user, "tav2-1", history, "Hmph. Fine.", 1)
    probe.flush()
    block, _ = probe.ask(user, "What's my cabin number?", **LATER)
    return "EX-7070-CB" not in block, f"the example's code recalled {'EX-7070-CB' in block}"


def sampling(probe: Probe) -> tuple[bool, str]:
    """temperature, seed, logprobs, top_logprobs, stop, max_tokens: unchanged to the provider."""
    options = {
        "temperature": 0.2,
        "seed": 7,
        "logprobs": True,
        "top_logprobs": 2,
        "stop": ["\n\n", "END"],
        "max_tokens": 5,
        "frequency_penalty": 0.1,
    }
    probe.upstream.script.append({"content": "ok"})
    probe.client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "Say something."}],
        extra_headers={"X-Memory-User-Id": "samp"},
        **options,  # type: ignore[arg-type]
    )
    sent = probe.upstream.last_json
    wrong = {k: sent.get(k) for k, v in options.items() if sent.get(k) != v}
    return not wrong, f"changed on the way {wrong}" if wrong else "all seven unchanged"


def cut_by_length(probe: Probe) -> tuple[bool, str]:
    """A reply cut by `max_tokens` (`finish_reason: length`): stored, and how it is marked."""
    cut = "The spare key is with Mrs Okafor at number LN-4402-KE, and the alarm"
    choice = {
        "index": 0,
        "message": {"role": "assistant", "content": cut},
        "finish_reason": "length",
    }
    completion = {
        "id": "chatcmpl-len",
        "object": "chat.completion",
        "created": 1,
        "model": MODEL,
        "choices": [choice],
        "usage": {"prompt_tokens": 20, "completion_tokens": 16, "total_tokens": 36},
    }
    probe.upstream.script.append({"status": 200, "body": completion})
    got = probe.client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "Where's the spare key and how's the alarm set?"}],
        max_tokens=16,
        extra_headers={"X-Memory-User-Id": "len", "X-Memory-Session-Id": "len-1"},
    )
    probe.flush()
    items = stored(probe, "len", "LN-4402-KE")
    block, _ = probe.ask("len", "Who has my spare key?", **LATER)
    marks = {k: v for i in items for k, v in i.items() if k not in ("content", "created_at")}
    ok = got.choices[0].finish_reason == "length" and bool(items) and "LN-4402-KE" in block
    return ok, (
        f"stored {len(items)}, recalled {'LN-4402-KE' in block}, partial "
        f"{[i.get('partial') for i in items]}, fields {sorted(marks)}"
    )


def checks() -> list[tuple[str, Check]]:
    return [
        ("prefill: continued over a stream, recalled once", continued_streamed),
        ("image by URL then dropped from the history: recalled once", image_dropped),
        ("a window cut by tokens mid-message: recalled once", token_window),
        ("info window cut by tokens: the cut messages not stored again", token_window_stored),
        ("Open WebUI user and chat headers: two chats, two sessions, recalled", open_webui),
        ("LiteLLM-style body `user`: the user's memory only", litellm_user),
        ("SillyTavern: example dialogue is not the user's", tavern),
        ("SillyTavern: the character card is not an excerpt", tavern_card),
        (
            "info SillyTavern: examples as named user turns, not the user's",
            tavern_examples_as_turns,
        ),
        ("sampling options reach the provider unchanged", sampling),
        ("info length: a reply cut by max_tokens, stored (marked?)", cut_by_length),
    ]
