"""Forgetting one conversation (`DELETE /v1/memory/sessions/{id}`) through the real proxy.

A user asks "delete that chat": its messages, chunks, vectors and lexical entries go, so
nothing of it is searched, recalled or exported after, a restart included; the user's other
conversations stay, as do facts (they are the user's) unless `?facts=true`.
"""

import json
import time

import pytest

from memory import Settings
from proxy.config import Config
from tests.e2e.test_embedder import serving
from tests.e2e.test_forget import files_holding
from tests.e2e.test_memory_api import (
    KAYAK,
    KAYAK_QUESTION,
    MODEL,
    PASTA,
    api,
    recalled_block,
    search,
    stats,
)

PASTA_QUESTION = "Which cheese goes into my carbonara?"
DETAIL = "berth number 14"


def say_in(proxy, user, session, text):
    """`user` says `text` in conversation `session`."""
    with proxy.client() as client:
        client.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": text}],
            extra_headers={"X-Memory-User-Id": user, "X-Memory-Session-Id": session},
        )


def forget_session(proxy, user, session, **params):
    return api(proxy, "DELETE", f"/v1/memory/sessions/{session}", user, params=params)


def exported(proxy, user):
    answer = api(proxy, "GET", "/v1/memory/export", user)
    assert answer.status_code == 200
    return [json.loads(line) for line in answer.text.splitlines()]


def assert_only_pasta_left(proxy, upstream, user):
    """Nothing of the kayak chat is found, recalled or exported; the pasta chat is."""
    assert all(DETAIL not in hit["text"] for hit in search(proxy, user, "kayak marina berth"))
    assert search(proxy, user, "carbonara guanciale")[0]["text"] == PASTA
    block = recalled_block(proxy, upstream, user, KAYAK_QUESTION)
    assert block is None or DETAIL not in block
    assert PASTA in recalled_block(proxy, upstream, user, PASTA_QUESTION)
    texts = [item.get("content") for item in exported(proxy, user)]
    assert PASTA in texts and not [t for t in texts if t and DETAIL in t]


@pytest.mark.both_backends
def test_a_forgotten_session_is_never_recalled_and_the_users_other_session_still_is(
    make_proxy, upstream
):
    proxy = make_proxy(settings={"capture_facts": False})
    say_in(proxy, "alice", "s-kayak", KAYAK)
    say_in(proxy, "alice", "s-pasta", PASTA)
    say_in(proxy, "bob", "s-kayak", KAYAK)  # the same session id, another user's
    proxy.flush()
    assert DETAIL in recalled_block(proxy, upstream, "alice", KAYAK_QUESTION)  # vectors in RAM

    answer = forget_session(proxy, "alice", "s-kayak")

    assert answer.status_code == 200, answer.text
    assert answer.json() == {
        "user_id": "alice",
        "session_id": "s-kayak",
        "deleted": True,
        "messages": 2,
        "facts": 0,
    }
    assert stats(proxy, "alice") | {"pending": 0} == {
        "user_id": "alice",
        "messages": 2,
        "chunks": 2,
        "facts": 0,
        "sessions": 1,
        "pending": 0,
        "failed": 0,
    }
    assert_only_pasta_left(proxy, upstream, "alice")
    assert "berth" not in {t.word for t in proxy.layer.store.vocabulary("alice")}
    assert DETAIL in recalled_block(proxy, upstream, "bob", KAYAK_QUESTION)  # not bob's


def test_a_session_the_user_does_not_have_is_a_404_and_changes_nothing(make_proxy, upstream):
    proxy = make_proxy(settings={"capture_facts": False})
    say_in(proxy, "bob", "s-bob", KAYAK)
    proxy.flush()

    unknown = forget_session(proxy, "alice", "s-bob")  # bob's session, asked for by alice
    bad = forget_session(proxy, "bob", "s-bob", facts="maybe")

    assert unknown.status_code == 404
    error = unknown.json()["error"]
    assert (error["type"], error["code"], error["param"]) == (
        "not_found_error",
        "session_not_found",
        "session_id",
    )
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "facts"
    assert stats(proxy, "bob")["messages"] == 2
    assert search(proxy, "bob", "kayak marina")[0]["text"] == KAYAK


def test_facts_stay_unless_asked_and_then_only_those_the_session_taught(make_proxy, upstream):
    proxy = make_proxy()  # facts captured from what the user says
    say_in(proxy, "dana", "s-name", "Hi! My name is Dana.")
    say_in(proxy, "dana", "s-city", "I live in Berlin")
    say_in(proxy, "dana", "s-kayak", KAYAK)
    proxy.flush()

    def keys():
        facts = api(proxy, "GET", "/v1/memory/facts", "dana").json()["facts"]
        return sorted(f["key"] for f in facts)

    assert {"name", "home_city"} <= set(keys())
    kept = forget_session(proxy, "dana", "s-name")
    assert kept.json()["facts"] == 0 and "name" in keys()

    dropped = forget_session(proxy, "dana", "s-city", facts="true")

    assert dropped.status_code == 200 and dropped.json()["facts"] == 1
    assert "home_city" not in keys() and "name" in keys()
    assert not [i for i in exported(proxy, "dana") if "Berlin" in json.dumps(i)]


def test_a_forgotten_session_stays_forgotten_after_a_restart_and_leaves_the_files(
    tmp_path, upstream, embedder
):
    config = Config(
        memory=Settings(db_path=tmp_path / "moim.db", capture_facts=False),
        upstream_base_url=upstream.url,
    )
    with serving(config, embedder) as proxy:
        say_in(proxy, "alice", "s-kayak", KAYAK)
        say_in(proxy, "alice", "s-pasta", PASTA)
        proxy.flush()
        assert forget_session(proxy, "alice", "s-kayak").status_code == 200
        assert_only_pasta_left(proxy, upstream, "alice")

    with serving(config, embedder) as proxy:
        assert_only_pasta_left(proxy, upstream, "alice")
        assert stats(proxy, "alice")["sessions"] == 1
        deadline = time.monotonic() + 60  # the writer erases its words once it is idle
        while files_holding(tmp_path, DETAIL.encode()) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert files_holding(tmp_path, DETAIL.encode()) == []


def test_a_reply_streaming_while_its_session_is_forgotten_is_not_stored_after(proxy, upstream):
    """The request began before the forget: its turn (the history it resent) would be stored
    once its stream ended, bringing the forgotten session back."""
    say_in(proxy, "kim", "s-kayak", KAYAK)
    say_in(proxy, "kim", "s-pasta", PASTA)
    proxy.flush()
    history = [
        {"role": "user", "content": KAYAK},
        {"role": "assistant", "content": "echo: " + KAYAK},
        {"role": "user", "content": "Count slowly"},
    ]
    headers = {"X-Memory-User-Id": "kim", "X-Memory-Session-Id": "s-kayak"}
    with proxy.client() as client:
        with client.chat.completions.create(
            model="slow", messages=history, stream=True, extra_headers=headers
        ) as stream:
            next(stream)  # under way
            assert forget_session(proxy, "kim", "s-kayak").status_code == 200
            said = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert said  # the client got its answer as ever

    proxy.flush()
    assert {m.session_id for m in proxy.layer.store.messages("kim")} == {"s-pasta"}
