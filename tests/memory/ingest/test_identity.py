"""memory/ingest/identity.resent_keys: a resent history lined up with what its session stored.

Each case is a history as a client resends it after earlier turns were stored (`stored`, in
the order stored); the assertion names which of its messages are new.
"""

from memory.ingest import identity
from memory.ingest.identity import content_hash, message_keys, resent_keys
from memory.remembered import Remembered

SYSTEM = {"role": "system", "content": "Be terse."}


def said(*texts):
    """Alternating user and assistant messages ("u:yes", "a:Done.")."""
    roles = {"u": "user", "a": "assistant"}
    return [{"role": roles[t[0]], "content": t[2:]} for t in texts]


def new_ones(history, stored_history):
    """The texts of `history` that are not already stored, as `store_new_messages` skips."""
    stored = message_keys(stored_history)
    keys = resent_keys(history, stored)
    assert len(set(keys)) == len(keys)
    return [m["content"] for m, key in zip(history, keys, strict=True) if key not in stored]


def test_the_whole_history_sent_again_is_numbered_as_message_keys():
    history = [SYSTEM, *said("u:yes", "a:Done.", "u:yes", "a:Done.", "u:yes")]
    assert resent_keys(history, message_keys(history[:4])) == message_keys(history)


def test_a_window_that_slid_past_repeats_keeps_only_its_new_messages_new():
    stored = [SYSTEM, *said("u:Book it", "a:Done.", "u:yes", "a:Done.", "u:Pay", "a:Done.")]
    window = [SYSTEM, *said("a:Done.", "u:Pay", "a:Done.", "u:yes", "a:Done.")]
    assert new_ones(window, stored) == ["yes", "Done."]


def test_a_regenerated_reply_is_new_and_the_same_reply_again_is_not():
    stored = said("u:Name my boat", "a:Sea Breeze")
    assert new_ones(said("u:Name my boat", "a:Wavedancer"), stored) == ["Wavedancer"]
    assert new_ones(said("u:Name my boat", "a:Sea Breeze"), stored) == []


def test_a_branch_continued_after_an_edit_finds_its_own_messages_among_the_abandoned_ones():
    stored = said("u:Hi", "a:Hello", "u:Lisbon?", "a:Sunny", "u:Porto?", "a:Rain")
    stored += said("u:Faro?", "a:Warm")  # the user edited "Lisbon?" into "Faro?"
    history = said("u:Hi", "a:Hello", "u:Faro?", "a:Warm", "u:Hotels?", "a:Three")
    assert new_ones(history, stored) == ["Hotels?", "Three"]


def test_a_summary_in_place_of_the_oldest_turns_is_new_and_the_kept_turns_are_not():
    stored = [SYSTEM, *said("u:yes", "a:Done.", "u:Feed the cat", "a:Done.", "u:yes", "a:Done.")]
    history = [SYSTEM, *said("u:Summary: chores agreed", "u:yes", "a:Done.", "u:yes", "a:Done.")]
    assert new_ones(history, stored) == ["Summary: chores agreed", "yes", "Done."]


def test_a_history_of_one_word_over_and_over_is_numbered_as_sent_past_the_work_bound():
    """Lining up tries each place of a message among the stored ones: for a session of "yes"
    and "ok" alternating, every other place, each with a run to the end (quadratic: 4,000
    stored and 1,000 sent took 1.6 s of the writer). Past its bound the history is numbered
    as sent (`message_keys`), as before lining up; a window of distinct words is still lined
    up."""
    session = said(*(("u:yes", "a:ok") * 2000))
    window = session[-1000:] + said("u:yes")
    assert resent_keys(window, message_keys(session)) == message_keys(window)
    distinct = said(*(f"u:message {i}" for i in range(4000)))
    slid = distinct[-1000:] + said("u:yes")
    assert resent_keys(slid, message_keys(distinct))[:1000] == message_keys(distinct)[-1000:]


def call(arguments):
    function = {"name": "get_weather", "arguments": arguments}
    return {"role": "assistant", "tool_calls": [{"id": "call_1", "function": function}]}


def test_a_calls_arguments_written_anew_are_the_same_call_and_other_arguments_another():
    assert content_hash(call('{"city": "Paris", "days": [1, 2]}')) == content_hash(
        call('{"city":"Paris","days":[1,2]}')
    )
    assert content_hash(call('{"city":"Paris"}')) != content_hash(call('{"city":"Lyon"}'))
    assert content_hash(call('{"days":1,"city":"Paris"}')) != content_hash(
        call('{"city":"Paris","days":1}')
    )  # key order kept: what the provider wrote is hashed as it wrote it


def test_arguments_that_are_not_json_text_are_hashed_as_they_are():
    for arguments in ("city=Paris", '"\\ud800"', "[" * 100_000, None):
        assert content_hash(call(arguments)) == content_hash(call(arguments))
    assert content_hash(call("city=Paris")) != content_hash(call("city = Paris"))


def test_a_calls_hash_is_remembered_without_its_text_and_as_it_was_first_made(monkeypatch):
    """An agent's history resends its calls with every request: a call's hash is looked up,
    not its arguments parsed again, held under Python's hash of what was sent (no text), at
    most as many as `_CALL_HASHES` holds, and let go when a user is forgotten."""
    identity.forget_recent_hashes()
    monkeypatch.setattr(identity, "_CALL_HASHES", Remembered(3))
    first = content_hash(call('{"city": "Paris"}'))
    parsed = []
    monkeypatch.setattr(identity, "_arguments", lambda a: parsed.append(a) or a)

    assert content_hash(call('{"city": "Paris"}')) == first  # remembered: not parsed again
    assert parsed == []
    for city in ("Lyon", "Nice", "Metz", "Caen"):
        content_hash(call(f'{{"city":"{city}"}}'))
    assert len(identity._CALL_HASHES) == 3
    content_hash(call('{"city": "Paris"}'))  # the oldest went first: made again
    assert parsed == [
        '{"city":"Lyon"}',
        '{"city":"Nice"}',
        '{"city":"Metz"}',
        '{"city":"Caen"}',
        '{"city": "Paris"}',
    ]
    identity.forget_recent_hashes()
    assert len(identity._CALL_HASHES) == 0


def test_arguments_sent_as_an_object_are_hashed_as_before():
    """Not a string (a client's mistake the provider may refuse): hashed, never cached."""
    as_object = call({"city": "Paris"})
    assert content_hash(as_object) == content_hash(call({"city": "Paris"}))
    assert content_hash(as_object) != content_hash(call({"city": "Lyon"}))


def test_a_long_tool_results_hash_is_remembered_without_its_text(monkeypatch):
    """An agent resends its tool results (2-20 kB each) with every request: a long result's
    hash is looked up, not made again, held under Python's hash of the text (no text); the
    digest is the one it always was (`_hash` of it), and a forget lets it go."""
    identity.forget_recent_hashes()
    result = {"role": "tool", "tool_call_id": "call_1", "content": "line: ok\n" * 1000}
    first = content_hash(result)
    assert first == identity._hash("tool", None, result["content"], [], "call_1")
    made = []
    monkeypatch.setattr(identity, "_hash", lambda *fields, **media: made.append(fields) or "")

    assert content_hash(dict(result)) == first  # remembered: not hashed again
    assert made == []
    identity.forget_recent_hashes()
    content_hash(result)
    assert len(made) == 1
