"""memory/block/order.py: which hit opens an excerpt first when one conversation crowds the tier."""

from dataclasses import replace

from memory.block.excerpts import build_excerpts
from memory.records import Tier
from tests.memory.block.test_excerpts import hit

TWO = Tier(0, 2, 120)
FIRST = "I am a keeper at Delamere Wildlife Park, on the red panda section, the best job going."
SECOND = "Kiri is our oldest red panda, she is twelve and grumpy."
NEWER = "I've moved over to the elephant team, started Monday."


def sessions(excerpts):
    return sorted((e.session_id, e.text.split(": ", 1)[1]) for e in excerpts)


def crowded(newer_role="user", newer_at=3, second_at=2):
    """Two turns of the first conversation that need an excerpt each, then a newer one."""
    later = hit(newer_at, NEWER, session_id="s-2")
    return [
        hit(1, FIRST),
        hit(second_at, SECOND),
        replace(later, chunk=replace(later.chunk, role=newer_role)),
    ]


def test_a_newer_conversations_user_turn_opens_an_excerpt_before_a_second_of_one_conversation():
    excerpts = build_excerpts(crowded(), TWO, [], "now", present=True)
    assert sessions(excerpts) == [("s-1", FIRST), ("s-2", NEWER)]


def test_only_for_a_question_about_the_present():
    excerpts = build_excerpts(crowded(), TWO, [], "now")
    assert sessions(excerpts) == [("s-1", FIRST), ("s-1", SECOND)]


def test_a_reply_of_a_newer_conversation_waits_its_turn():
    excerpts = build_excerpts(crowded(newer_role="assistant"), TWO, [], "now", present=True)
    assert sessions(excerpts) == [("s-1", FIRST), ("s-1", SECOND)]


def test_a_turn_said_before_what_the_block_holds_of_the_conversation_waits_its_turn():
    hits = crowded(newer_at=1, second_at=3)
    hits[0] = hit(2, FIRST)  # the first conversation's turns come after the other one
    excerpts = build_excerpts(hits, TWO, [], "now", present=True)
    assert sessions(excerpts) == [("s-1", FIRST), ("s-1", SECOND)]


def test_with_room_for_all_nothing_is_left_out():
    excerpts = build_excerpts(crowded(), Tier(0, 3, 120), [], "now", present=True)
    assert sessions(excerpts) == [("s-1", FIRST), ("s-1", SECOND), ("s-2", NEWER)]
