"""Pathological text through the real proxy: a message built to make a regex backtrack is
answered with its memory, as any other is (no request waits on moim's CPU).

The official openai SDK talks to moim, moim to the fake upstream; the embedder is the real one.
"""

import pytest

MODEL = "gpt-4o-mini"
TRIPS = [f"On trip {n} we visited museum number {n} and ate at cafe {n}" for n in range(14)]

# 100 kB a message: each was minutes (or hours) of a recall thread before its fix.
ADVERSARIAL = {
    "one long word": "a" * 100_000,  # the abstention gate's identifiers (27 s at 16 kB)
}


@pytest.mark.parametrize("name", ADVERSARIAL)
def test_a_long_adversarial_message_gets_its_memory(make_proxy, name):
    proxy = make_proxy()
    proxy.layer.set_fact("zed", "home_city", "Reno")
    with proxy.client(timeout=120) as client:
        for trip in TRIPS:  # enough history for the abstention gate to judge
            client.chat.completions.create(
                model=MODEL,
                messages=[{"role": "user", "content": trip}],
                extra_headers={"X-Memory-User-Id": "zed"},
            )
        proxy.flush()
        raw = client.chat.completions.with_raw_response.create(
            model=MODEL,
            messages=[{"role": "user", "content": ADVERSARIAL[name] + " which museum?"}],
            extra_headers={"X-Memory-User-Id": "zed"},
        )
    assert raw.headers["x-memory-facts-injected"] == "1"
    assert "x-memory-error" not in raw.headers
    proxy.flush()  # and the writer stores it
    assert proxy.layer.stats("zed").messages == len(TRIPS) * 2 + 2
