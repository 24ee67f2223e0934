"""Through the proxy: a turn that says nothing ("Thanks, sounds good!", "ok great") is stored
and exported like any turn but never shown as a recalled excerpt (memory/recall/empty_turns.py),
even when the question shares its words."""

import html

import httpx

from tests.e2e.test_facts import api
from tests.e2e.test_recall import block_in, say, sent_messages


def test_a_turn_that_says_nothing_is_kept_but_never_an_excerpt(proxy, upstream):
    said = (
        "Thanks, sounds good!",
        "The good news is the kayak club sounds keen on the Porto trip.",
        "ok great",
    )
    replies = ("You're welcome!", "That's promising for the trip.", "Glad to hear it!")
    upstream.script.extend({"content": reply} for reply in replies)
    for text in said:
        say(proxy, [{"role": "user", "content": text}], "tove")
    proxy.flush()
    asked = "Thanks, sounds good: what's the news on the kayak club, ok?"
    read = {"X_Memory_Mode": "read", "X_Request_Id": "req-thanks"}
    say(proxy, [{"role": "user", "content": asked}], "tove", **read)
    block = block_in(sent_messages(upstream)) or ""
    assert said[1] in block
    assert said[0] not in block and "ok great" not in block
    with api(proxy, "tove") as client:
        exported = client.get("/export").text
    assert said[0] in exported and "ok great" in exported

    # The inspector's "why this block" says why it was left out: it says nothing, not "weak".
    why = httpx.get(proxy.root + "/ui/users/tove/why", params={"request": "req-thanks"})
    assert why.status_code == 200
    left_out = html.unescape(why.text[why.text.index("Left out") :])
    [row] = [row for row in left_out.split("<tr class=")[1:] if said[0] in row]
    assert row.startswith('"empty"') and "says nothing" in row, row
