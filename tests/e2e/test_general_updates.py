"""Through the proxy: a change said with the old value first ("we left X for Y", "swapped X for
Y", "no more X, it's Y now") becomes a fact under the thing's key, so the block names the
current value before the old one, and the next change supersedes it in the fact's history."""

import pytest

from tests.e2e.test_facts import KNOWN, api, block_sent, say, section


def test_a_change_said_old_value_first_leads_the_block_with_the_new_value(proxy, upstream):
    say(proxy, "We live in Manchester, in a terrace near the park.")
    say(proxy, "My new car is a Skoda Octavia, very sensible.")
    proxy.flush()
    say(proxy, "Big year: we left Manchester for Sheffield in the spring.")
    say(proxy, "We swapped the old car for a Kia Sportage, the Skoda kept breaking down.")
    say(proxy, "I swapped shifts with Dave on Friday, and I moved the sofa to the other wall.")
    proxy.flush()

    say(proxy, "Where do we live and what do we drive?", extra_headers={"X-Memory-Mode": "read"})

    block = block_sent(upstream)
    known = section(block, KNOWN)
    assert {"- home city: Sheffield", "- current (car): Kia Sportage"} <= set(known)
    assert not any("Dave" in line or "sofa" in line for line in known)
    for new, old in (("Sheffield", "Manchester"), ("Kia Sportage", "Skoda")):
        assert old not in block or block.index(new) < block.index(old)
    with api(proxy) as client:
        car = client.get("/facts/current:car/history").json()["facts"]
    assert [(f["value"], f["status"]) for f in car] == [
        ("Skoda Octavia", "superseded"),
        ("Kia Sportage", "active"),
    ]


NAMED_OLD_FIRST = [
    # (the old value said, the newer turn naming it first, the question, the fact, new, old)
    (
        "My home lab is a little Intel NUC under the desk.",
        "The NUC died. I replaced the old server with a Synology NAS running Docker.",
        "What runs my home lab these days?",
        "- current (server): Synology NAS",  # a clause after the name ends the value
        "Synology",
        "NUC",
    ),
    (
        "I drive an old Vauxhall Astra to work, it's got 150,000 miles on it.",
        "Bad week: the old Astra finally died, so we've bought a second-hand Skoda Fabia.",
        "What car do I drive now?",
        "- current (car): Skoda Fabia",  # a car said by its make
        "Skoda Fabia",
        "Astra",
    ),
]


@pytest.mark.parametrize(("first", "later", "question", "fact", "new", "old"), NAMED_OLD_FIRST)
def test_a_newer_turn_naming_the_old_value_first_still_leads_the_block_with_the_new(
    proxy, upstream, first, later, question, fact, new, old
):
    say(proxy, first)
    proxy.flush()
    say(proxy, later)
    proxy.flush()

    say(proxy, question, extra_headers={"X-Memory-Mode": "read"})

    block = block_sent(upstream)
    assert fact in section(block, KNOWN)
    assert block.index(new) < block.index(old)
