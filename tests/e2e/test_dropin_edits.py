"""A chat UI's edits and regenerations, through the official SDK and the real proxy.

The user edits a message they sent, or regenerates an answer; the next requests carry the new
version, not the old. The old one stays in the log but is recalled nowhere, in this
conversation or another (memory/ingest/branches.py), until a request carries it again.
"""

import json

import httpx
import pytest

from tests.e2e.test_recall import block_in

pytestmark = pytest.mark.both_backends

SYSTEM = {"role": "system", "content": "You are a travel assistant."}
HELLO = {"role": "user", "content": "Hi, can you keep track of my trip plans?"}
SURE = {"role": "assistant", "content": "Of course, tell me about your trip."}
SAID = {"role": "user", "content": "My flight to Oslo leaves on Tuesday the 14th from gate B7."}
EDITED = {"role": "user", "content": "My flight to Oslo leaves on Wednesday the 15th from gate B7."}
ASK = "Which day does my flight to Oslo leave, and from which gate?"


def chat(client, messages, **headers):
    reply = client.chat.completions.create(
        model="gpt-4o-mini", messages=messages, extra_headers=headers or None
    )
    return reply.choices[0].message.model_dump(exclude_none=True)


def opened(client, upstream, proxy):
    """The chat's first turn: SURE is the reply to HELLO (an edit is made a turn later)."""
    upstream.script.insert(0, {"content": SURE["content"]})
    chat(client, [SYSTEM, HELLO])
    proxy.flush()


def asked_anew(client, upstream, question=ASK):
    """The block a new conversation's question got."""
    chat(
        client, [{"role": "system", "content": "Be brief."}, {"role": "user", "content": question}]
    )
    return block_in(upstream.last_json["messages"]) or ""


def test_an_edited_message_is_recalled_as_edited_in_every_conversation(proxy, upstream):
    upstream.script[:] = [{"content": "Noted, Tuesday it is."}, {"content": "Noted, Wednesday."}]
    with proxy.client() as client:
        opened(client, upstream, proxy)
        chat(client, [SYSTEM, HELLO, SURE, SAID])
        proxy.flush()
        chat(client, [SYSTEM, HELLO, SURE, EDITED])  # the user edits the message
        while_editing = block_in(upstream.last_json["messages"]) or ""
        proxy.flush()
        upstream.script[:] = [{"content": "ok"}]
        after = asked_anew(client, upstream)

    assert "Tuesday" not in while_editing
    assert "Wednesday the 15th" in after and "Tuesday" not in after
    stored = [m.content for m in proxy.layer.store.messages("default")]
    assert SAID["content"] in stored and EDITED["content"] in stored  # the log keeps both


def test_a_regenerated_answer_is_not_recalled_in_another_conversation(proxy, upstream):
    first = "Your Oslo hotel is the Grand Fjord on Karl Johans gate, room 512."
    second = "Your Oslo hotel is the Harbour Inn on Aker Brygge, room 7."
    upstream.script[:] = [{"content": first}, {"content": second}, {"content": "ok"}]
    ask = {"role": "user", "content": "Remind me which hotel I booked in Oslo?"}
    with proxy.client() as client:
        chat(client, [SYSTEM, ask])
        proxy.flush()
        chat(client, [SYSTEM, ask])  # regenerate
        proxy.flush()
        after = asked_anew(client, upstream, "Which hotel in Oslo, and which room?")

    assert "Harbour Inn" in after and "Grand Fjord" not in after


def test_going_back_to_the_old_branch_recalls_it_again(proxy, upstream):
    upstream.script[:] = [{"content": "Noted."}] * 3 + [{"content": "ok"}]
    reply = {"role": "assistant", "content": "Noted."}
    more = {"role": "user", "content": "And I fly back on Sunday."}
    with proxy.client() as client:
        opened(client, upstream, proxy)
        chat(client, [SYSTEM, HELLO, SURE, SAID])
        proxy.flush()
        chat(client, [SYSTEM, HELLO, SURE, EDITED])
        proxy.flush()
        chat(client, [SYSTEM, HELLO, SURE, SAID, reply, more])  # the UI's other branch
        proxy.flush()
        after = asked_anew(client, upstream)

    assert "Tuesday the 14th" in after


def test_an_edit_in_a_chat_that_opened_with_its_history_goes_once_the_chat_goes_on(proxy, upstream):
    """The client's first request to moim already holds an exchange (moim added mid-chat):
    the user's message in it, edited, is left when the chat goes on from the edit."""
    upstream.script[:] = [{"content": "Noted."}] * 3 + [{"content": "ok"}]
    noted = {"role": "assistant", "content": "Noted."}
    more = {"role": "user", "content": "And I fly back on Sunday."}
    with proxy.client() as client:
        chat(client, [SYSTEM, HELLO, SURE, SAID])
        proxy.flush()
        chat(client, [SYSTEM, HELLO, SURE, EDITED])
        proxy.flush()
        chat(client, [SYSTEM, HELLO, SURE, EDITED, noted, more])
        proxy.flush()
        after = asked_anew(client, upstream)

    assert "Wednesday the 15th" in after and "Tuesday" not in after


def test_a_different_message_after_the_same_opening_leaves_nothing(proxy, upstream):
    """Two conversations that open alike share a derived session: the second one's own
    question is no edit of the first one's, whose turns stay recalled."""
    upstream.script[:] = [{"content": "Noted."}, {"content": "Sure."}, {"content": "ok"}]
    other = {"role": "user", "content": "What's a good museum in Copenhagen for a rainy day?"}
    with proxy.client() as client:
        chat(client, [SYSTEM, HELLO, SURE, SAID])
        proxy.flush()
        chat(client, [SYSTEM, HELLO, SURE, other])
        proxy.flush()
        after = asked_anew(client, upstream)

    assert "Tuesday the 14th" in after


MOVED = {"role": "user", "content": "I live in Paris now."}


def moved_then_wished(client, upstream, proxy):
    """Berlin is on file; a chat says the user lives in Paris now, then the user edits that
    into a wish. Returns the facts before the edit and after it."""
    upstream.script[:] = [{"content": "Noted."}] * 4
    wish = {"role": "user", "content": "I'd love to live in Paris now."}
    chat(client, [{"role": "user", "content": "I live in Berlin."}], **{"x-memory-session-id": "h"})
    proxy.flush()
    opened(client, upstream, proxy)
    chat(client, [SYSTEM, HELLO, SURE, MOVED])
    proxy.flush()
    before = _facts(proxy)
    chat(client, [SYSTEM, HELLO, SURE, wish])  # the user edits it into a wish
    proxy.flush()
    return before, _facts(proxy)


def test_a_fact_said_in_an_edited_away_message_goes_and_the_old_one_comes_back(proxy, upstream):
    with proxy.client() as client:
        before, after = moved_then_wished(client, upstream, proxy)

    assert before.get("home_city") == "Paris"
    assert after.get("home_city") == "Berlin"


def test_going_back_to_a_branch_brings_back_the_fact_it_said(proxy, upstream):
    noted = {"role": "assistant", "content": "Noted."}
    more = {"role": "user", "content": "And I work from home on Fridays."}
    with proxy.client() as client:
        _, edited = moved_then_wished(client, upstream, proxy)
        chat(client, [SYSTEM, HELLO, SURE, MOVED, noted, more])  # the UI's first branch
        proxy.flush()

    assert edited.get("home_city") == "Berlin"
    assert _facts(proxy).get("home_city") == "Paris"


def _facts(proxy):
    found = httpx.get(proxy.root + "/v1/memory/facts", headers=proxy.admin_headers()).json()
    return {f["key"]: f["value"] for f in found["facts"]}


def test_an_export_keeps_an_edited_away_message_and_an_import_keeps_it_left(proxy, upstream):
    replies = ["Noted, Tuesday.", "Noted, Wednesday.", "ok"]
    upstream.script[:] = [{"content": text} for text in replies]
    with proxy.client() as client:
        opened(client, upstream, proxy)
        chat(client, [SYSTEM, HELLO, SURE, SAID])
        proxy.flush()
        chat(client, [SYSTEM, HELLO, SURE, EDITED])
        proxy.flush()
    exported = httpx.get(proxy.root + "/v1/memory/export", headers=proxy.admin_headers())
    bob = {"X-Memory-User-Id": "bob"}
    imported = httpx.post(
        proxy.root + "/v1/memory/import", headers=bob, content=exported.content, timeout=60
    )
    with proxy.client(default_headers=bob) as client:
        after = asked_anew(client, upstream)

    items = [json.loads(line) for line in exported.text.splitlines()]
    left = [i["content"] for i in items if i.get("left")]
    assert left == [SAID["content"], "Noted, Tuesday."] and imported.status_code == 200
    assert "Wednesday the 15th" in after and "Tuesday" not in after


def test_a_few_shot_prompts_next_input_edits_nothing(proxy, upstream):
    """A pipeline's few-shot prompt: the same instruction and worked example before each
    input, so every request shares one derived session and picks up from the example. Its
    inputs follow one template (most words alike), but each is a request of its own, not an
    edit of the one before: the example was sent with the input, never answered to the user."""
    instruction = {"role": "system", "content": "Extract the travel facts from the note."}
    example = {"role": "user", "content": "Note: I will visit Rome in May with my sister."}
    answer = {"role": "assistant", "content": "destination=Rome; month=May; companion=sister"}
    first = {"role": "user", "content": "Note: My flight to Lisbon leaves on Tuesday from gate C4."}
    second = {"role": "user", "content": "Note: My flight to Oslo leaves on Friday from gate B7."}
    upstream.script[:] = [
        {"content": "destination=Lisbon; day=Tuesday; gate=C4"},
        {"content": "destination=Oslo; day=Friday; gate=B7"},
        {"content": "ok"},
    ]
    with proxy.client() as client:
        chat(client, [instruction, example, answer, first])
        proxy.flush()
        chat(client, [instruction, example, answer, second])
        proxy.flush()
        after = asked_anew(client, upstream, "Which day does my flight to Lisbon leave?")

    assert "Tuesday from gate C4" in after


def test_an_older_message_edited_in_a_named_session_leaves_all_that_followed(proxy, upstream):
    """A chat UI that names its chats (`X-OpenWebUI-Chat-Id`): the user edits an older
    message; the turns after it on the old branch are recalled nowhere either."""
    replies = ["Noted, Tuesday.", "Gate B7 is in terminal 2.", "Noted, Wednesday.", "ok"]
    upstream.script[:] = [{"content": text} for text in replies]
    named = {"X-OpenWebUI-Chat-Id": "chat-42"}
    tuesday = {"role": "assistant", "content": "Noted, Tuesday."}
    gate = {"role": "user", "content": "Which terminal is gate B7 in for my Tuesday flight?"}
    upstream.script.insert(0, {"content": SURE["content"]})
    with proxy.client() as client:
        chat(client, [SYSTEM, HELLO], **named)  # the chat's first turn: SURE is its reply
        chat(client, [SYSTEM, HELLO, SURE, SAID], **named)
        chat(client, [SYSTEM, HELLO, SURE, SAID, tuesday, gate], **named)
        proxy.flush()
        chat(client, [SYSTEM, HELLO, SURE, EDITED], **named)
        proxy.flush()
        after = asked_anew(client, upstream)

    assert "Wednesday the 15th" in after and "Tuesday" not in after
