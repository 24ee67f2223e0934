"""Through the proxy: a correction ("Actually it's Salford, not Manchester") writes the new
value on the fact that held the old one, so the block leads with it and the old value is
superseded in the fact's history (memory/facts/corrections.py)."""

from tests.e2e.test_facts import KNOWN, api, block_sent, say, section
from tests.e2e.test_recall import block_in, sent_messages
from tests.e2e.test_recall import say as say_in


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


def test_a_correction_later_in_the_same_conversation_comes_before_what_it_corrects(proxy, upstream):
    # No fact holds a course's day: the excerpt itself names Thursday first.
    first = "My manager wants me on the tissue viability course, it runs on Tuesday afternoons."
    fix = "Sorry, I meant Thursday, not Tuesday, my clinic is on Tuesdays."
    said = {"role": "user", "content": first}
    say_in(proxy, [said], "ruth")
    reply = {"role": "assistant", "content": f"echo: {first}"}
    say_in(proxy, [said, reply, {"role": "user", "content": fix}], "ruth")
    proxy.flush()
    question = [{"role": "user", "content": "Which afternoon is my tissue viability course?"}]
    say_in(proxy, question, "ruth", X_Memory_Mode="read")
    block = block_in(sent_messages(upstream))
    assert first in block and fix in block
    assert block.index("Thursday") < block.index("Tuesday")


def _conversation(proxy, user, first, fix):
    """`user` says `first`, then `fix` in the same conversation."""
    said = {"role": "user", "content": first}
    say_in(proxy, [said], user)
    reply = {"role": "assistant", "content": f"echo: {first}"}
    say_in(proxy, [said, reply, {"role": "user", "content": fix}], user)


def test_a_correction_by_kind_alone_rewrites_only_the_dose_the_conversation_is_about(
    proxy, upstream
):
    say(proxy, "I'm on 50 mg of sertraline.", user="ruth")
    say(proxy, "I'm on 10 mg of amlodipine as well.", user="ruth")
    _conversation(
        proxy, "ruth", "The sertraline makes me sleepy in the mornings.", "Correction: it's 100 mg."
    )
    # Another thing's dose: 'make that' corrects the carprofen, of which no fact is held.
    _conversation(
        proxy, "ruth", "My dog Rex is on carprofen, 75 mg a day.", "Oops, make that 60 mg."
    )
    proxy.flush()

    say(proxy, "What doses am I on?", user="ruth", extra_headers={"X-Memory-Mode": "read"})

    known = section(block_sent(upstream), KNOWN)
    assert {
        "- medication (sertraline): sertraline 100 mg",
        "- medication (amlodipine): amlodipine 10 mg",
    } == set(known)


def test_a_correction_naming_its_thing_leads_the_block_when_no_fact_held_the_old_value(
    proxy, upstream
):
    # No rule captures a class's evening: the correction in a later conversation is the fact.
    first = "The pottery classes run on Wednesday evenings at the studio on Mill Lane."
    say(proxy, first, user="ruth")
    proxy.flush()
    fix = "Oh, one correction, I said Wednesday earlier but it's Thursday evenings for the classes."
    say(proxy, fix, user="ruth")
    proxy.flush()

    question = "Which evening are my pottery classes?"
    say(proxy, question, user="ruth", extra_headers={"X-Memory-Mode": "read"})

    block = block_sent(upstream)
    assert section(block, KNOWN) == ["- current (classes): Thursday evenings"]
    assert block.index("Thursday") < block.index("Wednesday")
