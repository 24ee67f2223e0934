"""Forgetting a user (`DELETE /v1/memory`) leaves nothing of them where a later request, a
restart or an operator's tool could find it: not the store (tests/e2e/test_memory_api.py),
and not what the running proxy holds beside it: the inspector's recent requests, the
Responses API replies it remembers, and the write-ahead journal (tests/proxy/test_writer.py:
it keeps stored turns while other users' turns are queued, and is replayed at start and after
a spill), nor the database's files: their words are erased from the SQLite file, its WAL and
the lexical index once the writer is idle (memory/store/scrub.py).
"""

import time
from pathlib import Path

import httpx

from memory.store.fts import owner_token
from tests.e2e.test_inspector import KAYAK, chat
from tests.e2e.test_responses import CABIN, CAR, create, stored


def forget(proxy, user):
    answer = httpx.delete(proxy.url + "/memory", headers={"x-memory-user-id": user}, timeout=60)
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_the_inspector_shows_no_request_of_a_forgotten_user(proxy):
    chat(proxy, "alice", KAYAK)
    proxy.flush()
    chat(proxy, "alice", "Where is my kayak kept?", x_request_id="req-kayak")
    with httpx.Client(base_url=proxy.root, timeout=60) as client:
        assert KAYAK in client.get("/ui/users/alice/why", params={"request": "req-kayak"}).text

        forget(proxy, "alice")

        why = client.get("/ui/users/alice/why")
        one = client.get("/ui/users/alice/why", params={"request": "req-kayak"})
    assert "req-kayak" not in why.text and KAYAK not in why.text
    assert KAYAK not in one.text


def test_a_reply_of_a_forgotten_user_is_continued_as_one_moim_never_saw(proxy):
    first, opened = create(proxy, "erin", input=CABIN)
    proxy.flush()

    forget(proxy, "erin")
    _, continued = create(proxy, "erin", input=CAR, previous_response_id=first.id)
    proxy.flush()

    # the forgotten session is not reopened: the chain starts a session of its own
    session = continued["x-memory-session-id"]
    assert session != opened["x-memory-session-id"]
    assert {s for s, *_ in stored(proxy, "erin")} == {session}


def files_holding(directory, data):
    return [f.name for f in Path(directory).rglob("*") if f.is_file() and data in f.read_bytes()]


def test_a_forgotten_users_words_leave_the_database_files(proxy):
    word = "zanzibarquokka"
    chat(proxy, "zed", f"My pet {word} sleeps in the garden shed")
    chat(proxy, "ann", "I keep my radiator budget in a notebook")
    proxy.flush()
    directory = Path(proxy.config.memory.db_path).parent
    assert files_holding(directory, word.encode())

    forget(proxy, "zed")

    def left():
        """What of zed the files still hold: their words, their terms in the indexes."""
        lexical = proxy.layer.store.lexical.terms_of(owner_token("zed"))
        return files_holding(directory, word.encode()) + lexical

    deadline = time.monotonic() + 60  # the writer erases them once it is idle
    while left() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert files_holding(directory, word.encode()) == []
    assert files_holding(directory, owner_token("zed").encode()) == []
    assert proxy.layer.store.lexical.terms_of(owner_token("zed")) == []
    assert proxy.layer.store.lexical.terms_of(owner_token("ann"))


def test_a_reply_streaming_while_its_user_is_forgotten_is_not_stored_after(proxy, upstream):
    """The request began before the forget: its turn (the whole history it resent, the
    kayak with it) was stored once its stream ended, after `DELETE /v1/memory` had answered,
    and recalled from then on."""
    chat(proxy, "kim", KAYAK)
    history = [
        {"role": "user", "content": KAYAK},
        {"role": "assistant", "content": "echo: " + KAYAK},
        {"role": "user", "content": "Count slowly"},
    ]
    headers = {"X-Memory-User-Id": "kim"}
    with proxy.client() as client:
        with client.chat.completions.create(
            model="slow", messages=history, stream=True, extra_headers=headers
        ) as stream:
            next(stream)  # under way
            forget(proxy, "kim")
            said = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert said  # the client got its answer as ever

    proxy.flush()
    assert proxy.layer.store.messages("kim") == []
    chat(proxy, "kim", "Where is my kayak kept?", x_memory_mode="read")
    assert "marina" not in str(upstream.last_json["messages"])
