"""The bounded maps of Responses API replies kept in RAM: newest kept, a user's dropped."""

from memory import ResponseLink
from proxy.background import Awaited, BackgroundReplies
from proxy.recent_responses import RecentResponses


def test_recent_responses_keep_the_newest_and_drop_a_forgotten_user():
    recent = RecentResponses(size=2)
    recent.note("ana", "resp_1", ResponseLink("s1", 10))
    recent.note("bo", "resp_2", ResponseLink("s2", 20))
    recent.note("ana", "resp_1", ResponseLink("s1", 11))  # noted again: newest now
    recent.note("ana", "resp_3", ResponseLink("s3", 30))
    assert recent.get("bo", "resp_2") is None  # the oldest went
    assert recent.get("ana", "resp_1") == ResponseLink("s1", 11)
    assert recent.get("bo", "resp_1") is None  # another user's id is not theirs
    recent.drop("ana")
    assert recent.get("ana", "resp_1") is None
    assert recent.get("ana", "resp_3") is None


def test_background_replies_are_taken_once_and_dropped_with_their_user():
    awaited = BackgroundReplies(size=2)
    awaited.note("resp_1", Awaited("ana", "s1", "m"))
    awaited.note("resp_2", Awaited("bo", "s2", "m"))
    awaited.note("resp_3", Awaited("ana", "s3", "m"))
    assert awaited.get("resp_1") is None  # past the bound, the oldest went
    assert awaited.done("resp_2") == Awaited("bo", "s2", "m")
    assert awaited.done("resp_2") is None  # a second poll stores nothing
    awaited.drop("ana")
    assert awaited.get("resp_3") is None
