"""Distinct user ids never share memory, whichever way they are spelled or sent.

proxy/identity.py: a plain id (letters, digits, `. _ - @ : +`) is its own namespace; any
other is kept whole, percent-encoded behind a `~`; an id over 256 characters is refused
(400, naming where it came from), never cut short. Before, the body's `user` was cleaned
(`john smith` and `john/smith` both became `john_smith`) and cut at 256 characters, so
such users read each other's memory. Each check stores a turn and a fact as one id, through
the official SDK, and looks for them as the others.
"""

import httpx
import openai
import pytest

from proxy.config import ProxyKey

COLOUR = "My favourite colour is ultramarine blue"
QUESTION = "What is my favourite colour?"
# Ids that the old cleaning merged into one namespace, and the plain id they merged into.
LOOKALIKES = ["john smith", "john/smith", "john\tsmith", "john_smith"]
LONG = "a" * 256  # the longest id taken; two longer ids starting with it used to be one


def ask(proxy, user, text=QUESTION):
    """One turn as `user` (the SDK's `user` field), answered by the fake provider's echo."""
    with proxy.client() as client:
        reply = client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": text}], user=user
        )
    assert reply.choices[0].message.content == f"echo: {text}"


def memory_api(proxy, method, path, user, **kwargs):
    response = httpx.request(
        method, proxy.root + path, headers={"x-memory-user-id": user}, timeout=30, **kwargs
    )
    assert response.status_code == 200, response.text
    return response.json()


def sees(proxy, upstream, user):
    """What of the first user's memory `user` gets: recalled text, listed facts, searched."""
    ask(proxy, user)
    recalled = str(upstream.last_json["messages"])
    proxy.flush()
    facts = memory_api(proxy, "GET", "/v1/memory/facts", user)["facts"]
    found = memory_api(proxy, "GET", "/v1/memory/search", user, params={"q": "ultramarine"})
    stats = memory_api(proxy, "GET", "/v1/memory/stats", user)
    return {
        "recalled": "ultramarine" in recalled,
        "facts": [f["value"] for f in facts if f["key"] == "pet"],
        "found": sorted(hit["text"] for hit in found["results"] if "ultramarine" in hit["text"]),
        "messages": stats["messages"] - 2,  # the question just asked and its echo
    }


@pytest.mark.parametrize("owner", LOOKALIKES)
def test_ids_the_old_cleaning_merged_never_see_each_others_memory(proxy, upstream, owner):
    ask(proxy, owner, COLOUR)
    memory_api(proxy, "POST", "/v1/memory/facts", owner, json={"key": "pet", "value": "a cat"})
    proxy.flush()

    assert sees(proxy, upstream, owner) == {
        "recalled": True,
        "facts": ["a cat"],
        "found": [COLOUR, f"echo: {COLOUR}"],
        "messages": 2,
    }
    for other in LOOKALIKES:
        if other != owner:
            assert sees(proxy, upstream, other) == {
                "recalled": False,
                "facts": [],
                "found": [],
                "messages": 0,
            }, other


def test_one_id_reaches_one_namespace_by_header_body_and_path(proxy, upstream):
    ask(proxy, "john smith", COLOUR)
    proxy.flush()
    assert memory_api(proxy, "GET", "/v1/memory/stats", "john smith")["user_id"] == (
        "~john%20smith"
    )
    via_path = httpx.post(
        proxy.root + "/u/john%20smith/v1/chat/completions",
        json={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": QUESTION}]},
        timeout=30,
    )
    assert via_path.status_code == 200, via_path.text
    assert "ultramarine" in str(upstream.last_json["messages"])


def test_an_apps_safety_identifier_keeps_its_users_apart(proxy, upstream):
    """OpenAI's successor to the body's `user`: sent alone, it names the user."""
    with proxy.client() as client:
        said = [{"role": "user", "content": COLOUR}]
        client.chat.completions.create(model="gpt-4o-mini", messages=said, safety_identifier="u1")
        proxy.flush()
        asked = [{"role": "user", "content": QUESTION}]
        client.chat.completions.create(model="gpt-4o-mini", messages=asked, safety_identifier="u2")
        as_other = str(upstream.last_json["messages"])
        client.chat.completions.create(model="gpt-4o-mini", messages=asked, safety_identifier="u1")
        as_owner = str(upstream.last_json["messages"])

    assert "ultramarine" in as_owner and "ultramarine" not in as_other
    assert upstream.last_json["safety_identifier"] == "u1"  # forwarded as sent


def test_two_long_ids_with_one_beginning_are_refused_not_merged(proxy, upstream):
    for user in (LONG + "1", LONG + "2"):
        with pytest.raises(openai.BadRequestError) as refused:
            ask(proxy, user, COLOUR)
        assert refused.value.body == {
            "message": "user: a user id is at most 256 characters",
            "type": "invalid_request_error",
            "param": "user",
            "code": "invalid_user_id",
        }
    assert upstream.requests == []  # nothing forwarded
    too_long = httpx.get(
        proxy.root + "/v1/memory/stats", headers={"x-memory-user-id": LONG + "1"}, timeout=30
    )
    assert too_long.status_code == 400
    assert too_long.json()["error"]["param"] == "X-Memory-User-Id"

    ask(proxy, LONG, COLOUR)  # 256 characters: taken, and its own
    proxy.flush()
    assert memory_api(proxy, "GET", "/v1/memory/stats", LONG)["messages"] == 2
    assert memory_api(proxy, "GET", "/v1/memory/stats", LONG[:-1] + "b")["messages"] == 0
    assert proxy.layer.store.read("SELECT DISTINCT user_id FROM messages") == [(LONG,)]


def test_a_key_for_listed_users_acts_for_those_ids_only(make_proxy, upstream):
    proxy = make_proxy(
        keys=(
            ProxyKey("sk-johns-team", users=("john smith",)),
            ProxyKey("sk-bound-to-john", user_id="john smith"),
        ),
        upstream_api_key="sk-provider",
    )

    def stats(key, user):
        return httpx.get(
            proxy.root + "/v1/memory/stats",
            headers={"authorization": f"Bearer {key}", "x-memory-user-id": user},
            timeout=30,
        )

    assert stats("sk-johns-team", "john smith").json()["user_id"] == "~john%20smith"
    for lookalike in ("john_smith", "john/smith"):
        refused = stats("sk-johns-team", lookalike)
        assert refused.status_code == 403, refused.text
    assert stats("sk-bound-to-john", "john_smith").json()["user_id"] == "~john%20smith"


# Ids whose last character's UTF-8 ends in a byte Python counts as whitespace in Latin-1
# (0x85, 0xA0: `à` is C3 A0, `々` E3 80 85): a header's value was stripped before it was read as
# UTF-8, so `voilà` lost its last byte and was read as `voilÃ`, another user's id.
ENDING_IN_A0 = [("voilà", "voilÃ"), ("Ġ", "Ä"), ("佐々", "ä½\x90ã\x80")]


@pytest.mark.parametrize(("user", "other"), ENDING_IN_A0)
def test_an_id_sent_in_a_header_as_utf8_is_that_id_and_no_other(proxy, upstream, user, other):
    as_header = {"x-memory-user-id": user.encode()}  # as a client sends a UTF-8 id: its bytes
    with proxy.client() as client:
        said = [{"role": "user", "content": COLOUR}]
        client.chat.completions.create(model="gpt-4o-mini", messages=said, extra_headers=as_header)
    proxy.flush()

    stats = httpx.get(proxy.root + "/v1/memory/stats", headers=as_header, timeout=30).json()
    assert (stats["user_id"], stats["messages"]) == (user, 2)
    ask(proxy, user)  # the same id in the body's `user`: the same user
    assert "ultramarine" in str(upstream.last_json["messages"])
    ask(proxy, other)
    assert "ultramarine" not in str(upstream.last_json["messages"])
