"""The lexical index beside the database lost under a running moim (its directory moved away,
removed, or something else in its place).

Before: flush said `{"flushed": true}` while the turn it flushed was not found by its words,
and then, for as long as moim ran, recall searched the index's stale segments (still open),
indexing failed at each pass, and `/health` said ok. Now FTS5, in the database itself,
answers at once; the index is reopened and rebuilt in the background (tried again every
`REOPEN_EVERY` seconds while that fails), and `/health`, readiness and `/metrics` say
"degraded" with the reason meanwhile.
"""

import httpx

from memory.store import lexical_sync

USER = {"x-memory-user-id": "ops"}


def say(proxy, text):
    said = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": text}]}
    reply = httpx.post(proxy.url + "/chat/completions", json=said, headers=USER, timeout=30)
    assert reply.status_code == 200, reply.text


def found_by_words(proxy, word):
    """The stored user turns `word` finds by its words (a lexical rank), as recall ranks."""
    found = httpx.get(proxy.url + "/memory/search", params={"q": word}, headers=USER).json()
    return [h["text"] for h in found["results"] if h["lexical_rank"] and h["role"] == "user"]


def degraded(proxy):
    return "moim_lexical_index_degraded 1.0" in httpx.get(proxy.root + "/metrics").text


def test_a_lexical_index_lost_under_moim_is_said_and_fts5_answers_until_it_is_rebuilt(
    make_proxy, monkeypatch
):
    proxy = make_proxy(shutdown_timeout=1.0)
    say(proxy, "my kayak is at berth fourteen")
    proxy.flush()
    lexical = proxy.config.db_path.parent / f"{proxy.config.db_path.name}-lexical"
    lexical.rename(lexical.with_name("elsewhere"))  # as removed, at once (tantivy writes in it)
    lexical.write_text("not a directory")  # and nothing can be made in its place yet
    say(proxy, "my zeppelin is at hangar nine")

    flushed = httpx.post(proxy.root + "/v1/memory/flush", timeout=60)
    assert flushed.json() == {"flushed": True, "pending": 0}, flushed.text
    assert found_by_words(proxy, "zeppelin") == ["my zeppelin is at hangar nine"]
    assert found_by_words(proxy, "kayak") == ["my kayak is at berth fourteen"]
    health = httpx.get(proxy.root + "/health")
    assert health.status_code == 200
    assert health.json()["status"] == "degraded"
    assert health.json()["lexical_index"].startswith("lexical index unavailable (EEXIST)")
    readiness = httpx.get(proxy.root + "/health/readiness")
    assert readiness.status_code == 200
    assert readiness.json()["status"] == "degraded" and "lexical_index" in readiness.json()
    assert degraded(proxy)

    lexical.unlink()  # room again: the next try reopens and rebuilds it
    monkeypatch.setattr(lexical_sync, "REOPEN_EVERY", 0.0)
    httpx.get(proxy.root + "/health")
    assert proxy.layer.store.wait_for_lexical_index(timeout=30)
    assert httpx.get(proxy.root + "/health").json() == {"status": "ok"}
    assert not degraded(proxy)
    assert found_by_words(proxy, "zeppelin") == ["my zeppelin is at hangar nine"]
    chunks = proxy.layer.stats("ops").chunks
    assert len(proxy.layer.store.lexical.held_ids()) == chunks == 4  # the index holds all
