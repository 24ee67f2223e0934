"""A Responses API reply written in the background (`background: true`) is stored when polled.

The provider answers such a request at once, `queued` and with no output; the client then
polls `GET /v1/responses/{id}` (a pass-through) until the reply is `completed`. moim stored
the request's messages and never the reply: the model's answer was missing from memory. Here
the official SDK polls as its docs show, and the fake provider answers `in_progress` to the
first poll and `completed` after (tests/upstream_responses.py's `Background`).
"""

import httpx

from tests.e2e.test_responses import create, stored

SAID = "My sister Clara teaches violin at the conservatory in Lisbon"


def poll(proxy, response_id, times):
    """The statuses `client.responses.retrieve` saw, polling `times` times."""
    with proxy.client() as client:
        return [client.responses.retrieve(response_id).status for _ in range(times)]


def test_a_background_reply_is_stored_once_when_a_poll_finds_it_completed(proxy, upstream):
    queued, _ = create(proxy, "bea", input=SAID, background=True)

    statuses = poll(proxy, queued.id, 3)

    assert (queued.status, statuses) == ("queued", ["in_progress", "completed", "completed"])
    proxy.flush()
    session = stored(proxy, "bea")[0][0]
    assert stored(proxy, "bea") == [
        (session, "user", SAID, False),
        (session, "assistant", "echo: " + SAID, False),
    ]


def test_a_background_reply_continued_by_id_stays_in_its_session(proxy, upstream):
    queued, _ = create(proxy, "ben", input=SAID, background=True)
    poll(proxy, queued.id, 2)

    create(proxy, "ben", input="And my brother?", previous_response_id=queued.id)

    proxy.flush()
    assert [(role, content) for _, role, content, _ in stored(proxy, "ben")] == [
        ("user", SAID),
        ("assistant", "echo: " + SAID),
        ("user", "And my brother?"),
        ("assistant", "echo: And my brother?"),
    ]
    assert len({session for session, *_ in stored(proxy, "ben")}) == 1


def test_a_background_request_that_stores_nothing_has_nothing_stored_at_its_poll(proxy, upstream):
    queued, _ = create(proxy, "bo", input=SAID, background=True, headers={"X-Memory-Mode": "off"})

    poll(proxy, queued.id, 2)

    proxy.flush()
    assert stored(proxy, "bo") == []


def test_a_forgotten_users_background_reply_is_not_stored_by_a_later_poll(proxy, upstream):
    queued, _ = create(proxy, "flo", input=SAID, background=True)
    proxy.flush()
    headers = {"X-Memory-User-Id": "flo"}
    assert httpx.delete(proxy.url + "/memory", headers=headers).status_code == 200

    poll(proxy, queued.id, 2)

    proxy.flush()
    assert stored(proxy, "flo") == []
