"""Through the proxy: a standing state said inside a chatty turn ("we brought in a head chef to
replace Marco, Lena Vogt", "Biscuit's Vetmedin went from 2.5 mg to 5 mg") becomes a fact, so a
question about the present leads its block with the current value, before the old one; and a
question asking for the present keeps the abstention gate open."""

from tests.e2e.test_facts import KNOWN, block_sent, say, section


def test_a_hire_and_an_owned_dose_said_old_value_first_lead_the_block(proxy, upstream):
    say(proxy, "Marco runs our kitchen, he has been head chef since we opened.")
    say(proxy, "Biscuit is on Vetmedin now, 2.5 mg twice a day, for his heart.")
    proxy.flush()
    say(proxy, "Marco left in June, so we brought in a head chef to replace him, Lena Vogt.")
    say(proxy, "And Biscuit's Vetmedin went from 2.5 mg to 5 mg twice a day after the scan.")
    say(proxy, "We hired a van for the move and a plumber to fix the leak.")
    proxy.flush()

    say(proxy, "Who runs the kitchen now?", extra_headers={"X-Memory-Mode": "read"})

    block = block_sent(upstream)
    known = section(block, KNOWN)
    assert {
        "- person (head chef): Lena Vogt",
        "- current (biscuit s vetmedin): 5 mg twice a day",
    } <= set(known)
    assert not any("van" in line or "plumber" in line for line in known)
    assert block.index("Lena Vogt") < block.index("Marco")
