"""proxy/writer_forgotten.py: the forgotten users a request's turn is checked against, bounded.

Every `DELETE /v1/memory` stayed in the writer's map for the process's life. The guarantee the
map is for (a reply streaming while its user is forgotten is not stored after: tests/e2e/
test_forget.py) holds past the bound: a request that arrived before a forget no longer kept
by user is taken as forgotten.
"""

from proxy.writer_forgotten import ForgottenUsers


def test_the_map_keeps_the_newest_forgets_only():
    forgotten = ForgottenUsers(kept=3)

    for n in range(10):
        forgotten.add(f"user-{n}")

    assert len(forgotten) == 3


def test_a_user_forgotten_after_a_request_arrived_is_forgotten_for_it():
    forgotten = ForgottenUsers(kept=3)
    forgotten.add("ana")
    mark = forgotten.mark()

    assert not forgotten.forgotten_since("ana", mark)  # forgotten before it arrived
    forgotten.add("ana")
    assert forgotten.forgotten_since("ana", mark)
    assert not forgotten.forgotten_since("bo", mark)


def test_past_the_bound_an_older_request_is_taken_as_forgotten_a_newer_one_is_not():
    forgotten = ForgottenUsers(kept=3)
    before = forgotten.mark()
    forgotten.add("ana")  # dropped below, by the three after it
    after = forgotten.mark()
    for name in ("bo", "cy", "di"):
        forgotten.add(name)

    assert len(forgotten) == 3
    assert forgotten.forgotten_since("ana", before)  # no longer known by user: not stored
    assert forgotten.forgotten_since("eve", before)  # the same caution for anyone
    assert not forgotten.forgotten_since("ana", after)
    assert not forgotten.forgotten_since("eve", after)
    assert forgotten.forgotten_since("bo", after)


def test_a_forgotten_session_is_forgotten_for_its_requests_only():
    """`DELETE /v1/memory/sessions/{id}` marks (user, session): the user's other sessions'
    requests, and another user's session of the same id, are still stored."""
    forgotten = ForgottenUsers(kept=3)
    mark = forgotten.mark()

    forgotten.add(("ana", "s1"))

    assert forgotten.forgotten_since(("ana", "s1"), mark)
    assert not forgotten.forgotten_since(("ana", "s2"), mark)
    assert not forgotten.forgotten_since(("bo", "s1"), mark)
    assert not forgotten.forgotten_since("ana", mark)
