"""A client that slides its window and names no session stays in one session even when it
sends its next turn before the writer has stored the last one (a fast client, a backlog):
the turns it continues are looked up among those still queued too.

The backlog is real: another connection holds SQLite's write lock, so the writer cannot store
until it lets go (reads go on meanwhile, as WAL allows).
"""

from tests.e2e.test_recall import say
from tests.e2e.test_store_locked import BUSY_TIMEOUT, locked

SYSTEM = {"role": "system", "content": "You are a travel assistant."}
CABIN = "We booked a cabin near Lake Tahoe with a wood stove"
CAR = "The rental car for the trip is a blue Subaru Outback"


def test_a_sliding_window_continues_a_turn_not_yet_stored(make_proxy, upstream):
    proxy = make_proxy(settings={"busy_timeout": BUSY_TIMEOUT})
    first = [SYSTEM, {"role": "user", "content": CABIN}]
    second = [*first, {"role": "assistant", "content": "echo: " + CABIN}]
    second.append({"role": "user", "content": CAR})
    # The window slides: the opening exchange is dropped, so the derived id is another one.
    third = [SYSTEM, *second[-2:], {"role": "assistant", "content": "echo: " + CAR}]
    third.append({"role": "user", "content": "And how long is the drive from the airport?"})
    with locked(proxy.config.db_path):
        opened = say(proxy, first, "dave")["x-memory-session-id"]
        say(proxy, second, "dave")
        assert say(proxy, third, "dave")["x-memory-session-id"] == opened
    proxy.flush()
    sessions = {m.session_id for m in proxy.layer.store.messages("dave")}
    assert sessions == {opened}
