"""A turn is recalled as soon as its answer ends, not once the writer gets to it.

The writer stores and indexes finished turns in the background; a script that ends one
conversation and asks about it in a new one at once would otherwise find nothing of it. A
request that reads memory waits (`memory.recall_wait`) for its user's turns it does not
carry: of other conversations, and of its own that the client dropped (a sliding window); the
turns of its own conversation it resends, it never waits for.
"""

import httpx
import pytest

from tests.e2e.test_recall import block_in, say, sent_messages

pytestmark = pytest.mark.both_backends

CHATTER = (
    "We spent most of Saturday sorting the garage, which had turned into a museum of "
    "half-finished projects: two bikes with flat tyres, a box of cables nobody can name, "
    "the old tent from the Brecon trip and a shelf of paint tins in colours we never used. "
)
REPLY = (
    "That sounds like a satisfying weekend. A good way to keep it that way is to give every "
    "shelf one purpose, label the boxes on the side you see, and keep a donation box by the "
    "door so anything you have not used in a year has somewhere to go. "
)
CODE = "My gym locker code is LK-5512-ZQ, by the way."


def a_long_conversation() -> list[dict[str, str]]:
    """Enough turns that indexing them takes the writer far longer than a request."""
    messages = []
    for number in range(6):
        said = CHATTER * 2 + (CODE if number == 3 else "")
        messages += [{"role": "user", "content": said}, {"role": "assistant", "content": REPLY}]
    return messages[:-1]


ASK = [{"role": "user", "content": "What is my gym locker code?"}]


def test_a_detail_said_a_moment_ago_is_recalled_in_a_new_conversation(proxy, upstream):
    say(proxy, a_long_conversation(), "ines", X_Memory_Session_Id="garage")
    headers = say(proxy, ASK, "ines", X_Memory_Session_Id="asking", X_Memory_Mode="read")
    assert "LK-5512-ZQ" in (block_in(sent_messages(upstream)) or "")
    assert float(headers["x-memory-waited-ms"]) > 0
    assert "x-memory-unsearchable-turns" not in headers


def test_the_next_round_of_the_same_conversation_does_not_wait(proxy, upstream):
    conversation = a_long_conversation()
    say(proxy, conversation, "ines", X_Memory_Session_Id="garage")
    conversation += [
        {"role": "assistant", "content": "Noted."},
        {"role": "user", "content": "And the bikes?"},
    ]
    headers = say(proxy, conversation, "ines", X_Memory_Session_Id="garage")
    assert "x-memory-waited-ms" not in headers


def test_a_resent_history_without_a_session_id_does_not_wait(proxy, upstream):
    conversation = a_long_conversation()
    upstream.script.append({"content": "Noted, all of it."})
    say(proxy, conversation, "ines")
    conversation += [
        {"role": "assistant", "content": "Noted, all of it."},
        {"role": "user", "content": "And the bikes?"},
    ]
    headers = say(proxy, conversation, "ines")
    assert "x-memory-waited-ms" not in headers


def test_a_turn_the_client_dropped_from_its_window_is_waited_for(proxy, upstream):
    """A client that keeps a summary and the last message in place of the history asks at
    once about what it dropped: the same conversation, but the request does not carry it."""
    say(proxy, a_long_conversation(), "ines", X_Memory_Session_Id="garage")
    summary = {"role": "system", "content": "Summary so far: the user sorted the garage."}
    headers = say(proxy, [summary, *ASK], "ines", X_Memory_Session_Id="garage")
    assert "LK-5512-ZQ" in (block_in(sent_messages(upstream)) or "")
    assert float(headers["x-memory-waited-ms"]) > 0


def test_a_history_sent_at_once_then_only_its_end_is_waited_for(proxy, upstream):
    """A client that sends a long history in one request, then only its last messages: the
    turn's last message is resent, its earlier ones (the code's) are not."""
    conversation = a_long_conversation()
    upstream.script.append({"content": "Noted."})
    say(proxy, conversation, "ines", X_Memory_Session_Id="garage")
    end = [*conversation[-3:], {"role": "assistant", "content": "Noted."}, *ASK]
    headers = say(proxy, end, "ines", X_Memory_Session_Id="garage")
    assert "LK-5512-ZQ" in (block_in(sent_messages(upstream)) or "")
    assert float(headers["x-memory-waited-ms"]) > 0


def test_a_reply_said_alike_in_another_conversation_does_not_count_as_resent(proxy, upstream):
    """A provider that answers "Noted." every time: the new conversation resends a "Noted.",
    which is not the turn that holds the code."""
    upstream.script.append({"content": "Noted."})
    say(proxy, a_long_conversation(), "ines", X_Memory_Session_Id="garage")
    asking = [
        {"role": "user", "content": "Hi again."},
        {"role": "assistant", "content": "Noted."},
        *ASK,
    ]
    headers = say(proxy, asking, "ines", X_Memory_Session_Id="asking", X_Memory_Mode="read")
    assert "LK-5512-ZQ" in (block_in(sent_messages(upstream)) or "")
    assert float(headers["x-memory-waited-ms"]) > 0


def test_another_users_turns_are_not_waited_for(proxy, upstream):
    say(proxy, a_long_conversation(), "ines", X_Memory_Session_Id="garage")
    headers = say(proxy, ASK, "omar", X_Memory_Session_Id="asking")
    assert "x-memory-waited-ms" not in headers


def test_with_no_wait_the_response_says_what_recall_could_not_find(make_proxy, upstream):
    proxy = make_proxy(recall_wait=0.0)
    say(proxy, a_long_conversation(), "ines", X_Memory_Session_Id="garage")
    headers = say(proxy, ASK, "ines", X_Memory_Session_Id="asking", X_Memory_Mode="read")
    assert headers["x-memory-unsearchable-turns"] == "1"
    proxy.flush()
    headers = say(proxy, ASK, "ines", X_Memory_Session_Id="again", X_Memory_Mode="read")
    assert "x-memory-unsearchable-turns" not in headers
    assert "LK-5512-ZQ" in (block_in(sent_messages(upstream)) or "")


def test_the_memory_api_search_finds_a_turn_that_just_ended(proxy, upstream):
    say(proxy, a_long_conversation(), "ines", X_Memory_Session_Id="garage")
    found = httpx.get(
        proxy.root + "/v1/memory/search",
        params={"q": "gym locker code", "k": 3},
        headers={"X-Memory-User-Id": "ines"},
    )
    assert found.status_code == 200
    assert any("LK-5512-ZQ" in hit["text"] for hit in found.json()["results"])
