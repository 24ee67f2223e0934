"""`POST /v1/memory/flush` while the lexical index cannot be written (its directory moved away
under a running moim): flush said `{"flushed": true}` and the stop `every finished turn is
stored and indexed`, while the turn it flushed was not found by its words.

Flush now also asks whether indexing is failing, and says so with a 503 (a failed indexing
pass leaves its turns pending: tests/e2e/test_embedder.py).
"""

import httpx

USER = {"x-memory-user-id": "ops"}


def say(proxy, text):
    said = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": text}]}
    reply = httpx.post(proxy.url + "/chat/completions", json=said, headers=USER, timeout=30)
    assert reply.status_code == 200, reply.text


def test_flush_does_not_say_searchable_while_the_lexical_index_fails(make_proxy):
    proxy = make_proxy(shutdown_timeout=1.0)
    say(proxy, "my kayak is at berth fourteen")
    proxy.flush()
    lexical = proxy.config.db_path.parent / f"{proxy.config.db_path.name}-lexical"
    lexical.rename(lexical.with_name("elsewhere"))  # as removed, at once (tantivy writes in it)
    say(proxy, "my zeppelin is at hangar nine")

    flushed = httpx.post(proxy.root + "/v1/memory/flush", timeout=60)
    assert flushed.status_code == 503, flushed.text
    assert flushed.json()["flushed"] is False
    assert flushed.json()["writer"].startswith("index failing for ")
    readiness = httpx.get(proxy.root + "/health/readiness")
    assert readiness.status_code == 503
    assert readiness.json()["status"] == "failing"
    assert "index failing" in readiness.json()["writer"]
