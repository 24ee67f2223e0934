"""One user's memory never reaches another (STYLE.md 10: isolation lives in the query).

Fifty users talk at once, each telling moim a secret code word in the same sentence
frame, so every user's memory is a near-duplicate of every other's: only `user_id` tells
them apart. Then each user's recall, search, export and deletion must see their own rows
and nobody else's. All fifty also hold a fact under the same key with their own value
(set through the API, or captured from "My name is …" in chat): listing, history, the
block's facts section and forgetting one user's fact stay per user. Last, everything at
once: all fifty read (recall through the SDK, some streamed, some by the `/u/{user}` path
form; search; facts; export) while twenty keep chatting, five are deleted and five are
deleted and re-imported from their own export; then each store holds exactly its own data.
All fifty users take part in every check; the file runs in about 8 s on two cores.

"Nothing of another user" is checked on text: every user owns one code word (in any
case) and tags what they say with their user id, so any other word or tag in what a user
gets back, or in a body the fake upstream received for them, is a leak. Concurrent chats
are matched to their user by the tag in the last message, never by arrival order.
"""

import json
import random
import re
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor

import httpx
import openai
import pytest

from memory import BLOCK_START
from tests.conftest import CLIENT_LIMITS

pytestmark = pytest.mark.both_backends

WORDS = (
    "marigold obsidian tangerine walrus quasar saffron bramble cobalt juniper lantern "
    "meadowlark nebula orchid pumice quokka rhubarb sequoia tundra umber vermilion "
    "wisteria xylophone yarrow zeppelin acorn bagpipe cinnabar dolphin eucalyptus flamingo "
    "gondola hazelnut iguana jackal kumquat lagoon mongoose nutmeg ocelot paprika "
    "quinoa raccoon sardine tortoise ukulele vulture wombat yodel zucchini albatross"
).split()
USERS = [f"user-{n:02d}" for n in range(len(WORDS))]
SECRET = dict(zip(USERS, WORDS, strict=True))
NAME = {user: word.capitalize() for user, word in SECRET.items()}
QUESTION = "What is my secret code word?"
KNOWN = "[Known about the user]"
TAG = re.compile(r"user-\d\d")


def headers(user):
    return {"x-memory-user-id": user}


def words_in(text):
    lowered = text.lower()
    return {word for word in WORDS if word in lowered}


def leaks(user, text):
    """Other users' code words and user ids found in `text`."""
    return (words_in(text) - {SECRET[user]}) | (set(TAG.findall(text)) - {user})


def chat(client, user, text, mode="auto"):
    """One turn as `user`, the text tagged with the user id; the reply's text."""
    reply = client.chat.completions.create(
        model="gpt-4o-mini",
        extra_headers={**headers(user), "x-memory-mode": mode},
        messages=[{"role": "user", "content": f"({user}) {text}"}],
    )
    return reply.choices[0].message.content


def chats_by_user(upstream):
    """Every chat body the upstream received, grouped by the tag of its last message."""
    bodies = defaultdict(list)
    for recorded in list(upstream.requests):
        if recorded.path == "/v1/chat/completions":
            (user,) = set(TAG.findall(recorded.json["messages"][-1]["content"]))
            bodies[user].append(recorded.json)
    return bodies


def block_of(body):
    """The memory block of a forwarded body, or None."""
    first = body["messages"][0]
    if first["role"] == "system" and first["content"].startswith(BLOCK_START):
        return first["content"]
    return None


def section(block, heading):
    """The lines under one section heading of a block."""
    lines = block.splitlines()
    body = lines[lines.index(heading) + 1 :] if heading in lines else []
    end = next((i for i, line in enumerate(body) if not line.startswith("- ")), len(body))
    return body[:end]


def test_the_code_words_are_distinct_and_no_one_contains_another():
    assert len(set(WORDS)) == 50
    assert all(words_in(word) == {word} for word in WORDS)
    assert all(leaks(user, f"({user}) {SECRET[user]} {NAME[user]}") == set() for user in USERS)
    assert leaks(USERS[0], f"({USERS[1]})") == {USERS[1]}


def test_fifty_users_with_near_identical_memories_never_see_each_other(proxy, upstream):
    client = proxy.client()  # one client for all threads: building one per call costs ~0.3 s

    def tell(user):
        reply = client.chat.completions.create(
            model="gpt-4o-mini",
            extra_headers=headers(user),
            messages=[
                {
                    "role": "user",
                    "content": f"My secret code word is {SECRET[user]} and I love hiking",
                }
            ],
        )
        return reply.choices[0].message.content

    with ThreadPoolExecutor(max_workers=8) as pool:
        replies = dict(zip(USERS, pool.map(tell, USERS), strict=True))
    assert all(words_in(reply) == {SECRET[user]} for user, reply in replies.items())
    proxy.flush()

    with client, httpx.Client(base_url=proxy.root, timeout=30) as http:
        for user in USERS:
            # recall: the block this user's question receives
            client.chat.completions.create(
                model="gpt-4o-mini",
                extra_headers={**headers(user), "x-memory-mode": "read"},
                messages=[{"role": "user", "content": QUESTION}],
            )
            block = upstream.last_json["messages"][0]["content"]
            assert block.startswith("=== Memory Context ===")
            assert words_in(block) == {SECRET[user]}, (user, block)

            # search: only this user's rows
            found = http.get(
                "/v1/memory/search",
                params={"q": "secret code word", "k": 100},
                headers=headers(user),
            ).json()["results"]
            assert found
            assert set().union(*(words_in(hit["text"]) for hit in found)) == {SECRET[user]}
            own_ids = {m.id for m in proxy.layer.store.messages(user)}
            assert {hit["message_id"] for hit in found} <= own_ids

            # export: exactly this user's messages
            lines = http.get("/v1/memory/export", headers=headers(user)).text.splitlines()
            exported = [httpx.Response(200, content=line).json() for line in lines]
            assert {item["id"] for item in exported} == own_ids
            assert len(exported) == 2
            assert set().union(*(words_in(item["content"]) for item in exported)) == {SECRET[user]}

        before = {
            user: http.get("/v1/memory/stats", headers=headers(user)).json() for user in USERS
        }
        assert all(stats["messages"] == 2 and stats["chunks"] >= 2 for stats in before.values())

        deleted = http.delete("/v1/memory", headers=headers(USERS[0]))
        assert deleted.json() == {"user_id": USERS[0], "deleted": True, "messages": 2}
        after = {user: http.get("/v1/memory/stats", headers=headers(user)).json() for user in USERS}
        gone = after.pop(USERS[0])
        assert (gone["messages"], gone["chunks"], gone["sessions"]) == (0, 0, 0)
        assert after == {user: stats for user, stats in before.items() if user != USERS[0]}

        # the deleted user's question now recalls nothing at all: no one else's rows
        client.chat.completions.create(
            model="gpt-4o-mini",
            extra_headers=headers(USERS[0]),
            messages=[{"role": "user", "content": QUESTION}],
        )
        assert words_in(str(upstream.last_json["messages"])) == set()
        # search finds that question, just stored, and nothing of anyone else's
        found = http.get(
            "/v1/memory/search", params={"q": "secret code word"}, headers=headers(USERS[0])
        ).json()["results"]
        own_ids = {m.id for m in proxy.layer.store.messages(USERS[0])}
        assert {hit["message_id"] for hit in found} <= own_ids
        assert set().union(*(words_in(hit["text"]) for hit in found)) == set()


def test_fifty_users_with_the_same_fact_key_each_see_only_their_own_value(proxy, upstream):
    client = proxy.client()
    api = httpx.Client(base_url=proxy.root + "/v1/memory", timeout=30)

    def facts(user, status="active"):
        response = api.get("/facts", params={"status": status}, headers=headers(user))
        return response.raise_for_status().json()["facts"]

    def history(user, key):
        response = api.get(f"/facts/{key}/history", headers=headers(user))
        return [(f["value"], f["status"]) for f in response.raise_for_status().json()["facts"]]

    def state(user):
        fact = {"key": "code", "value": SECRET[user]}
        api.post("/facts", json=fact, headers=headers(user)).raise_for_status()
        chat(client, user, f"Hello. My name is {NAME[user]}.")

    def restate(user):
        fact = {"key": "code", "value": f"{SECRET[user]} again"}
        api.post("/facts", json=fact, headers=headers(user)).raise_for_status()

    def check(user):
        assert {(f["key"], f["value"]) for f in facts(user)} == {
            ("code", f"{SECRET[user]} again"),
            ("name", NAME[user]),
        }
        assert leaks(user, json.dumps(facts(user, "all"))) == set()
        assert history(user, "code") == [
            (SECRET[user], "superseded"),
            (f"{SECRET[user]} again", "active"),
        ]
        assert history(user, "name") == [(NAME[user], "active")]
        chat(client, user, "What do you know about me?", mode="read")

    with client, api, ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(state, USERS))
        proxy.flush()
        list(pool.map(restate, USERS))
        list(pool.map(check, USERS))

        bodies = chats_by_user(upstream)
        assert sorted(bodies) == USERS
        for user, sent in bodies.items():
            assert all(leaks(user, json.dumps(body)) == set() for body in sent), user
            recall = [body for body in sent if "know about me" in str(body["messages"][-1])]
            assert len(recall) == 1
            assert sorted(section(block_of(recall[0]), KNOWN)) == [
                f"- code: {SECRET[user]} again",
                f"- name: {NAME[user]}",
            ]

        # a fact's id names it only for its owner
        owner, stranger = USERS[1], USERS[2]
        owned = next(f for f in facts(owner) if f["key"] == "code")
        by_id = f"/facts/{owned['id']}"
        assert api.delete(by_id, headers=headers(stranger)).status_code == 404
        assert api.get(by_id + "/history", headers=headers(stranger)).status_code == 404
        assert owned in facts(owner)
        solo = api.post("/facts", json={"key": "solo", "value": "x"}, headers=headers(owner))
        assert solo.status_code == 200
        assert api.get("/facts/solo/history", headers=headers(stranger)).status_code == 404
        assert api.delete("/facts/solo", headers=headers(stranger)).status_code == 404

        before = dict(zip(USERS, pool.map(facts, USERS), strict=True))
        forgotten = api.delete("/facts/code", headers=headers(USERS[0]))
        assert forgotten.status_code == 200
        assert forgotten.json()["value"] == f"{SECRET[USERS[0]]} again"
        after = dict(zip(USERS, pool.map(facts, USERS), strict=True))
        assert after.pop(USERS[0]) == [f for f in before[USERS[0]] if f["key"] == "name"]
        assert after == {user: listed for user, listed in before.items() if user != USERS[0]}
        assert history(USERS[0], "code") == [
            (SECRET[USERS[0]], "superseded"),
            (f"{SECRET[USERS[0]]} again", "archived"),
        ]
        assert history(USERS[3], "code")[-1] == (f"{SECRET[USERS[3]]} again", "active")

        for user in USERS[:2]:
            upstream.reset()
            chat(client, user, "What do you know about me?", mode="read")
            known = section(block_of(upstream.last_json), KNOWN)
            assert f"- name: {NAME[user]}" in known
            assert (f"- code: {SECRET[user]} again" in known) == (user != USERS[0])


WRITERS = USERS[:20]  # keep adding turns while everyone reads
DELETED = USERS[40:45]  # forgotten while everyone reads
REIMPORTED = USERS[45:]  # forgotten, then given their own export back, while everyone reads
STABLE = USERS[20:40]
PATH_FORM = {user for n, user in enumerate(USERS) if n % 10 == 3}  # /u/{user}/v1/…
NOTES = 3
VOLATILE = {"id", "superseded_by", "source_message_id", "last_injected_at"}


def note(user, n):
    return f"note {n}: a {SECRET[user]} sits by the window"


def parse(jsonl):
    return [json.loads(line) for line in jsonl.splitlines()]


def data(items):
    """Exported items without what may change when they are stored again (ids, stamps)."""
    return [{k: v for k, v in item.items() if k not in VOLATILE} for item in items]


def test_reads_writes_deletes_and_reimports_at_once_never_cross_users(proxy, upstream):
    """Every user reads (recall through the SDK, streamed for some, by the path form for
    some; search; facts; export) twice while twenty users keep chatting, five are deleted
    and five deleted and re-imported; every answer holds only its own user's words."""
    client = proxy.client(http_client=openai.DefaultHttpxClient(limits=CLIENT_LIMITS))
    api = httpx.Client(base_url=proxy.root + "/v1/memory", timeout=60, limits=CLIENT_LIMITS)
    by_path = {
        user: client.with_options(base_url=f"{proxy.root}/u/{user}/v1") for user in PATH_FORM
    }

    def say(user, text, mode, stream):
        """A turn by header, or by the path form with no header at all; the reply text."""
        sdk, extra = (by_path[user], {}) if user in PATH_FORM else (client, headers(user))
        reply = sdk.chat.completions.create(
            model="gpt-4o-mini",
            extra_headers={**extra, "x-memory-mode": mode},
            messages=[{"role": "user", "content": f"({user}) {text}"}],
            stream=stream,
        )
        if stream:
            return "".join(chunk.choices[0].delta.content or "" for chunk in reply if chunk.choices)
        return reply.choices[0].message.content

    def export(user):
        return api.get("/export", headers=headers(user)).raise_for_status().text

    def stats(user):
        return api.get("/stats", headers=headers(user)).raise_for_status().json()

    def setup(user):
        say(user, f"My secret code word is {SECRET[user]} and I love hiking", "auto", False)
        fact = {"key": "code", "value": SECRET[user]}
        api.post("/facts", json=fact, headers=headers(user)).raise_for_status()

    def read(user):
        settled = user in STABLE or user in WRITERS
        reply = say(user, QUESTION, "read", stream=USERS.index(user) % 3 == 0)
        assert reply == f"echo: ({user}) {QUESTION}"

        found = (
            api.get("/search", params={"q": "secret code word", "k": 100}, headers=headers(user))
            .raise_for_status()
            .json()["results"]
        )
        assert leaks(user, json.dumps(found)) == set(), user
        facts = api.get("/facts", headers=headers(user)).raise_for_status().json()["facts"]
        assert leaks(user, json.dumps(facts)) == set(), user
        exported = export(user)
        assert leaks(user, exported) == set(), user
        if settled:
            own = {m.id for m in proxy.layer.store.messages(user)}
            assert found and {hit["message_id"] for hit in found} <= own, user
            assert [(f["key"], f["value"]) for f in facts] == [("code", SECRET[user])]
        if user in STABLE:
            assert exported == snapshot[user]

    def write(user, n):
        reply = say(user, note(user, n), "auto", stream=n == 1)
        assert reply == f"echo: ({user}) {note(user, n)}"

    def delete(user):
        deleted = api.delete(proxy.root + "/v1/memory", headers=headers(user))
        assert deleted.json() == {"user_id": user, "deleted": True, "messages": 2}

    def reimport(user):
        delete(user)
        imported = api.post("/import", content=snapshot[user], headers=headers(user))
        assert imported.json() == {"user_id": user, "imported": 2, "facts": 1}

    tasks = [(read, user) for user in USERS * 2]
    tasks += [(write, user, n) for user in WRITERS for n in range(NOTES)]
    tasks += [(delete, user) for user in DELETED] + [(reimport, user) for user in REIMPORTED]
    random.Random(50).shuffle(tasks)

    with client, api, ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(setup, USERS))
        proxy.flush()
        snapshot = dict(zip(USERS, pool.map(export, USERS), strict=True))
        before = dict(zip(USERS, pool.map(stats, USERS), strict=True))
        assert all(len(parse(snapshot[user])) == 3 for user in USERS)  # 2 messages, 1 fact

        for done in [pool.submit(*task) for task in tasks]:
            done.result()  # re-raises a task's failed assertion
        proxy.flush()

        after = dict(zip(USERS, pool.map(stats, USERS), strict=True))
        exports = dict(zip(USERS, map(parse, pool.map(export, USERS)), strict=True))
        for user in USERS:
            assert leaks(user, json.dumps(exports[user])) == set(), user
        for user in STABLE:
            assert after[user] == before[user]
            assert exports[user] == parse(snapshot[user])
        for user in REIMPORTED:
            assert after[user] == before[user]
            assert data(exports[user]) == data(parse(snapshot[user]))
        for user in DELETED:
            assert (after[user]["messages"], after[user]["chunks"]) == (0, 0)
            assert (after[user]["facts"], after[user]["sessions"]) == (0, 0)
            assert exports[user] == []
        for user in WRITERS:
            said = {item["content"] for item in exports[user] if item["type"] == "message"}
            notes = {f"({user}) {note(user, n)}" for n in range(NOTES)}
            assert said == {*notes, *(f"echo: {text}" for text in notes)} | {
                item["content"] for item in parse(snapshot[user]) if item["type"] == "message"
            }
            assert after[user] == {
                **before[user],
                "messages": 2 + 2 * NOTES,
                "chunks": after[user]["chunks"],
                "sessions": 1 + NOTES,
            }
            assert data(exports[user][-1:]) == data(parse(snapshot[user])[-1:])  # the fact

        # every body the upstream got for a user holds only that user's words and id; the
        # settled users' recall blocks hold their code word and exactly their own fact
        for user, sent in chats_by_user(upstream).items():
            assert all(leaks(user, json.dumps(body)) == set() for body in sent), user
            recalls = [body for body in sent if QUESTION in str(body["messages"][-1])]
            assert len(recalls) == 2
            if user in STABLE or user in WRITERS:
                assert all(words_in(block_of(body)) == {SECRET[user]} for body in recalls)
                assert all(
                    section(block_of(b), KNOWN) == [f"- code: {SECRET[user]}"] for b in recalls
                )

        # now that it has settled, the deleted recall nothing and the re-imported their own
        upstream.reset()
        list(pool.map(lambda user: say(user, QUESTION, "read", False), DELETED + REIMPORTED))

    bodies = chats_by_user(upstream)
    assert all(block_of(body) is None for user in DELETED for body in bodies[user])
    for user in REIMPORTED:
        (body,) = bodies[user]
        assert words_in(block_of(body)) == {SECRET[user]}
        assert section(block_of(body), KNOWN) == [f"- code: {SECRET[user]}"]
