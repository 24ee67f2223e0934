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


def test_a_new_dose_said_before_a_report_or_as_advised_leads_the_block(proxy, upstream):
    say(proxy, "I take 3 mg of melatonin when we land, it helps with the jet lag.")
    say(proxy, "Pip is on Apoquel now, 16 mg a day, for his itching.")
    proxy.flush()
    say(
        proxy,
        "Quick update on the dog, Pip's Apoquel went from 16 mg to 8 mg a day, Dr Okafor said"
        " halve it since the itching settled over Christmas.",
    )
    say(
        proxy,
        "The GP suggested I drop the melatonin to 1 mg and take it an hour before I want to"
        " sleep rather than on landing, and honestly it's already better.",
    )
    proxy.flush()

    say(proxy, "How much melatonin am I taking now?", extra_headers={"X-Memory-Mode": "read"})

    block = block_sent(upstream)
    known = section(block, KNOWN)
    assert {
        "- medication (melatonin): melatonin 1 mg",
        "- current (pip s apoquel): 8 mg a day",
    } <= set(known)
    assert block.index("melatonin 1 mg") < block.index("3 mg")
    assert block.index("8 mg a day") < block.index("16 mg")


def test_a_name_in_a_role_it_newly_holds_leads_the_block(proxy, upstream):
    say(proxy, "Our manager is Bev, she has run the fostering team for years.")
    proxy.flush()
    say(
        proxy,
        "Bev has gone on a year's secondment to the regional adoption agency, so Dev from the"
        " assessment team is our acting manager. He's fine, just very process-driven.",
    )
    proxy.flush()

    say(proxy, "Who's my manager right now?", extra_headers={"X-Memory-Mode": "read"})

    block = block_sent(upstream)
    assert "- person (manager): Dev" in section(block, KNOWN)
    assert block.index("Dev") < block.index("Bev")


def test_the_keys_to_a_new_home_lead_a_withheld_block_with_the_new_place(proxy, upstream):
    say(proxy, "We rent a flat in Phibsborough, it's small but the twins are only babies.")
    proxy.flush()
    say(
        proxy,
        "Since we got the keys to the house in Drumcondra the boys have their own room and we"
        " finally have a garden, mortgage is terrifying but worth it.",
    )
    proxy.flush()

    say(proxy, "Where do we live now?", extra_headers={"X-Memory-Mode": "read"})

    block = block_sent(upstream)
    assert "- home city: Drumcondra" in section(block, KNOWN)
    assert "Phibsborough" not in block.split("Drumcondra")[0]
