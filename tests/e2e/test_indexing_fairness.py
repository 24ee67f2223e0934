"""One user's large message does not hold up another user's turn (memory/ingest.py).

A message with more chunks than one indexing pass embeds (`memory.index_slice_chunks`, four
here) is indexed a slice per pass, and turns not yet begun go first. Asserted on order, not
time: chunk ids grow in the order chunks are stored, so Bob's chunks falling between the
first and the last of Alice's shows that Bob's turn was searchable while Alice's message
was still being indexed.
"""

import httpx

ALICE = {"x-memory-user-id": "alice"}
BOB = {"x-memory-user-id": "bob"}


def chat(proxy, text, headers):
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": text}]}
    response = httpx.post(proxy.url + "/chat/completions", json=body, headers=headers, timeout=30)
    assert response.status_code == 200, response.text


def chunk_ids(proxy, user_id, role="user"):
    rows = proxy.layer.store.read(
        "SELECT c.id FROM chunks c JOIN messages m ON m.id = c.message_id "
        "WHERE m.user_id = ? AND m.role = ? ORDER BY c.id",
        (user_id, role),
    )
    return [row[0] for row in rows]


def test_a_short_turn_is_indexed_while_a_large_message_is_still_being_indexed(make_proxy):
    proxy = make_proxy(settings={"index_slice_chunks": 4})
    big = " ".join(f"Line {i}: the reactor temperature reads nominal today." for i in range(800))

    chat(proxy, big, ALICE)  # ~45 kB: ~55 chunks, some fourteen passes
    chat(proxy, "My locker code is quokka4242", BOB)
    proxy.flush()

    alice, bob = chunk_ids(proxy, "alice"), chunk_ids(proxy, "bob")
    assert len(alice) > 40 and len(bob) == 1
    assert alice[0] < bob[0] < alice[-1]
    found = httpx.get(
        proxy.root + "/v1/memory/search", params={"q": "locker code"}, headers=BOB
    ).json()["results"]
    assert "My locker code is quokka4242" in {hit["text"] for hit in found}
    stats = httpx.get(proxy.root + "/v1/memory/stats", headers=ALICE).json()
    assert stats["chunks"] == len(alice) + len(chunk_ids(proxy, "alice", "assistant"))
