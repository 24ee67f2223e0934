"""A change said after the old value: the block names the new value first.

"We swapped Kanazawa for Hiroshima" names the old city first; the turn leads the block (newest
first), so a reader taking the first value for the current one read Kanazawa. The words past
the old value now lead the block (memory/block/latest.py; docs/recall-quality.md, "Nineteenth
pass"). Through the real proxy, the official SDK and the real embedder.
"""

import pytest

from tests.e2e.test_recall import block_in, remember_apart, say, sent_messages

pytestmark = pytest.mark.both_backends

PLAN = "For our Japan trip in October we'll do three cities: Tokyo, Kyoto and Kanazawa."
OTHER = "My sister Clara teaches violin at the conservatory in Lisbon."
CHANGE = "Small change to the Japan trip: we swapped Kanazawa for Hiroshima, easier by train."


def test_the_new_city_comes_before_the_old_one_in_the_block(proxy, upstream):
    remember_apart(proxy, "kenji", PLAN, OTHER, CHANGE)
    asked = "Which cities are we visiting on our Japan trip?"
    say(proxy, [{"role": "user", "content": asked}], "kenji", X_Memory_Mode="read")
    block = (block_in(sent_messages(upstream)) or "").lower()
    assert CHANGE.lower() in block and PLAN.lower() in block
    assert "…for hiroshima, easier by train." in block
    assert -1 < block.index("hiroshima") < block.index("kanazawa")
