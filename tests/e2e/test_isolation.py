"""One user's memory never reaches another (STYLE.md 10: isolation lives in the query).

Fifty users talk at once, each telling moim a secret code word in the same sentence
frame, so every user's memory is a near-duplicate of every other's: only `user_id` tells
them apart. Then each user's recall, search, export and deletion must see their own rows
and nobody else's.
"""

from concurrent.futures import ThreadPoolExecutor

import httpx

WORDS = (
    "marigold obsidian tangerine walrus quasar saffron bramble cobalt juniper lantern "
    "meadowlark nebula orchid pumice quokka rhubarb sequoia tundra umber vermilion "
    "wisteria xylophone yarrow zeppelin acorn bagpipe cinnabar dolphin eucalyptus flamingo "
    "gondola hazelnut iguana jackal kumquat lagoon mongoose nutmeg ocelot paprika "
    "quinoa raccoon sardine tortoise ukulele vulture wombat yodel zucchini albatross"
).split()
USERS = [f"user-{n:02d}" for n in range(len(WORDS))]
SECRET = dict(zip(USERS, WORDS, strict=True))
QUESTION = "What is my secret code word?"


def headers(user):
    return {"x-memory-user-id": user}


def words_in(text):
    return {word for word in WORDS if word in text}


def test_the_code_words_are_distinct_and_no_one_contains_another():
    assert len(set(WORDS)) == 50
    assert all(words_in(word) == {word} for word in WORDS)


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
        assert (
            http.get(
                "/v1/memory/search", params={"q": "secret code word"}, headers=headers(USERS[0])
            ).json()["results"]
            == []
        )
