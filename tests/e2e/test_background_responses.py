"""A Responses API reply written in the background (`background: true`) is stored when polled.

The provider answers such a request at once, `queued` and with no output; the client then
polls `GET /v1/responses/{id}` (a pass-through) until the reply is `completed`. moim stored
the request's messages and never the reply: the model's answer was missing from memory. Here
the official SDK polls as its docs show, and the fake provider answers `in_progress` to the
first poll and `completed` after (tests/upstream_responses.py's `Background`). A background
response streamed is read from its stream; one whose client left early is stored whole from
the resumed events (`?stream=true`), not as the part the first stream carried: the provider
writes on without the client.
"""

import httpx

from tests.e2e.test_remember import wait_until
from tests.e2e.test_responses import BOUND_KEYS, create, stored
from tests.upstream import LONG_REPLY

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


def test_a_background_stream_left_early_is_stored_whole_from_its_resumed_events(proxy, upstream):
    headers = {"X-Memory-User-Id": "sue"}
    with proxy.client() as client:
        with client.responses.create(
            model="slow", input="Count slowly", background=True, stream=True, extra_headers=headers
        ) as events:
            for event in events:
                if event.type == "response.created":
                    response_id = event.response.id
                if event.type == "response.output_text.delta":
                    break
        wait_until(lambda: upstream.disconnects == 1)  # moim saw the client leave
        resumed = client.responses.retrieve(response_id, stream=True)
        said = "".join(e.delta for e in resumed if e.type == "response.output_text.delta")

    assert said == LONG_REPLY
    proxy.flush()
    assert [(role, content, partial) for _, role, content, partial in stored(proxy, "sue")] == [
        ("user", "Count slowly", False),
        ("assistant", LONG_REPLY, False),
    ]


def test_a_background_stream_read_to_its_end_is_stored_from_it(proxy, upstream):
    events, _ = create(proxy, "sam", stream=True, input=SAID, background=True)

    assert events[-1].type == "response.completed"
    proxy.flush()
    assert [c for _, _, c, _ in stored(proxy, "sam")] == [SAID, "echo: " + SAID]


def test_with_proxy_keys_a_user_polls_and_cancels_their_own_background_reply(make_proxy, upstream):
    """A stored response is the provider account's, so a user's key could not poll one: the
    reply of a user's own `background: true` request never reached them (403). Their own
    replies are theirs to poll and cancel; another user's stay refused, nothing forwarded."""
    proxy = make_proxy(keys=BOUND_KEYS, upstream_api_key="sk-provider")
    with proxy.client(api_key="sk-ann-key") as ann:
        queued = ann.responses.create(model="gpt-4o-mini", input=SAID, background=True)
        other = ann.responses.create(model="gpt-4o-mini", input="And Porto?", background=True)
    forwarded = len(upstream.requests)

    ben = {"Authorization": "Bearer sk-ben-key"}
    for method, path in (("GET", queued.id), ("POST", other.id + "/cancel")):
        refused = httpx.request(method, f"{proxy.url}/responses/{path}", headers=ben)
        assert refused.status_code == 403
        assert refused.json()["error"]["code"] == "account_endpoint_needs_admin"
    assert len(upstream.requests) == forwarded

    with proxy.client(api_key="sk-ann-key") as ann:
        statuses = [ann.responses.retrieve(queued.id).status for _ in range(2)]
    assert statuses == ["in_progress", "completed"]
    ann = {"Authorization": "Bearer sk-ann-key"}
    cancel = httpx.post(f"{proxy.url}/responses/{other.id}/cancel", headers=ann)
    # forwarded, the provider's answer relayed (the stand-in has no cancel: its 404)
    assert (cancel.status_code, upstream.requests[-1].path) == (
        404,
        f"/v1/responses/{other.id}/cancel",
    )
    proxy.flush()
    assert ("assistant", "echo: " + SAID) in [(r, c) for _, r, c, _ in stored(proxy, "ann")]
