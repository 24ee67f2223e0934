"""Through the proxy: a correction ("Actually it's Salford, not Manchester") writes the new
value on the fact that held the old one, so the block leads with it and the old value is
superseded in the fact's history (memory/facts/corrections.py)."""

from tests.e2e.test_facts import KNOWN, api, block_sent, say, section


def test_a_correction_in_a_later_turn_leads_the_block_with_the_corrected_value(proxy, upstream):
    say(proxy, "We've just moved, I live in Manchester now, near the canal.")
    say(proxy, "The physio is now on Tuesdays, after work.")
    proxy.flush()
    say(proxy, "Actually it's Salford, not Manchester, I always mix them up.")
    say(proxy, "Sorry, I meant Wednesdays, not Tuesdays.")
    say(proxy, "It's a marathon, not a sprint, this whole move.")
    proxy.flush()

    say(proxy, "Where do I live, and when is my physio?", extra_headers={"X-Memory-Mode": "read"})

    block = block_sent(upstream)
    known = section(block, KNOWN)
    assert {"- home city: Salford", "- current (physio): Wednesdays"} <= set(known)
    for new, old in (("Salford", "Manchester"), ("Wednesdays", "Tuesdays")):
        assert old not in block or block.index(new) < block.index(old)
    with api(proxy) as client:
        home = client.get("/facts/home_city/history").json()["facts"]
    assert [(f["value"], f["status"]) for f in home] == [
        ("Manchester", "superseded"),
        ("Salford", "active"),
    ]
