"""A Responses API provider that gives a reply id out again: every turn is still stored.

moim links each Responses reply id to its session and took a turn whose id was linked already
for a journal replayed after a crash, storing nothing of it. A provider whose ids repeat (a
stand-in answering `resp_1` each time, a local server whose counter restarts) then had every
later turn of that user dropped, whatever conversation it was in. A replay is the same turn
(its session and time); another turn with that id is stored, and the id names the newest.
"""

import pytest

pytestmark = pytest.mark.both_backends
USER = {"x-memory-user-id": "ines"}
SAID = ["My gym locker is LK-4410.", "The boiler code is BC-7720.", "My bike lock is 3-9-1."]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_turns_whose_reply_ids_repeat_are_each_stored(proxy, upstream, stream):
    with proxy.client(default_headers=USER) as client:
        for text in SAID:
            upstream.reset()  # the stand-in counts its ids from 1 again: `resp_test_1` each time
            made = client.responses.create(model="gpt-4o-mini", input=text, stream=stream)
            if stream:
                assert [e.response.id for e in made if e.type == "response.completed"] == [
                    "resp_test_1"
                ]
    proxy.flush()

    stored = [(m.role, m.content) for m in proxy.layer.store.messages("ines")]
    assert [content for role, content in stored if role == "user"] == SAID


def test_a_continued_reply_whose_id_came_back_continues_the_newest(proxy, upstream):
    with proxy.client(default_headers=USER) as client:
        client.responses.create(model="gpt-4o-mini", input=SAID[0])
        upstream.reset()
        first = client.responses.create(model="gpt-4o-mini", input=SAID[1])
        upstream.response_ids.add(first.id)
        client.responses.create(model="gpt-4o-mini", input="Thanks!", previous_response_id=first.id)
    proxy.flush()

    sessions = {m.content: m.session_id for m in proxy.layer.store.messages("ines")}
    assert sessions["Thanks!"] == sessions[SAID[1]] != sessions[SAID[0]]


def test_a_dated_sessions_turns_whose_reply_ids_repeat_are_each_stored(proxy, upstream):
    # A backfill dates every turn of a session alike (bench/locomo.py: the session's date):
    # the same session, time and reply id is still another turn when it says something new.
    dated = {**USER, "x-memory-session-id": "day-1", "x-memory-timestamp": "2024-03-01"}
    with proxy.client(default_headers=dated) as client:
        for text in SAID:
            upstream.reset()
            client.responses.create(model="gpt-4o-mini", input=text)
    proxy.flush()

    stored = [(m.role, m.content) for m in proxy.layer.store.messages("ines")]
    assert [content for role, content in stored if role == "user"] == SAID
