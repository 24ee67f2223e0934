"""Pathological text through the real proxy: a message built to make a regex backtrack is
answered with its memory, as any other is (no request waits on moim's CPU).

The official openai SDK talks to moim, moim to the fake upstream; the embedder is the real one.
"""

import pytest

from memory import BLOCK_END, BLOCK_START

MODEL = "gpt-4o-mini"
CLARA = "My sister Clara teaches violin at the conservatory in Lisbon"
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


def test_a_turn_under_a_long_speaker_name_of_rules_is_recalled(make_proxy, upstream):
    """A client may send any `name`: a long one filled what the model embeds and the excerpt's
    room, and the turn was never recalled. Its first 64 characters are shown, escaped."""
    proxy = make_proxy()
    said = {"role": "user", "name": "=" * 50_000, "content": CLARA}
    with proxy.client(timeout=120) as client:
        client.chat.completions.create(
            model=MODEL, messages=[said], extra_headers={"X-Memory-User-Id": "yan"}
        )
        proxy.flush()
        raw = client.chat.completions.with_raw_response.create(
            model=MODEL,
            messages=[{"role": "user", "content": "Where does my sister teach violin?"}],
            extra_headers={"X-Memory-User-Id": "yan"},
        )
    assert raw.headers["x-memory-chunks-injected"] == "1"
    [block] = [m["content"] for m in upstream.last_json["messages"] if m["role"] == "system"]
    assert CLARA in block and "==" not in block.removeprefix(BLOCK_START).removesuffix(BLOCK_END)
