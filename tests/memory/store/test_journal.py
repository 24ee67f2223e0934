"""memory/store/journal.py: finished turns survive in an append-only file until they are stored.

A full disk is /dev/full behind the journal's path: writes to it fail with ENOSPC even for
root, which a read-only file or directory would not do.
"""

import dataclasses
import errno
import json
import os

import pytest

from memory import Journal, Turn
from memory.store.journal import turn_line, turn_line_bytes


def turn(k):
    return Turn(
        user_id="u",
        session_id="s",
        model="m",
        messages=({"role": "user", "content": f"turn {k}"},),
        reply={"role": "assistant", "content": f"reply {k}"},
        created_at=float(k),
    )


def contents(journal):
    return [t.messages[0]["content"] for t in journal.replay()]


def test_turns_come_back_in_order(tmp_path):
    journal = Journal(tmp_path / "j")
    for k in range(3):
        journal.append(turn(k))
    assert contents(journal) == ["turn 0", "turn 1", "turn 2"]
    assert journal.replay()[1] == turn(1)


def test_text_with_unicode_line_separators_comes_back_whole(tmp_path):
    journal = Journal(tmp_path / "j")
    texts = ["a\u2028b", "c\u2029d", "e\x85f", "g\rh\ni", "plain"]
    for text in texts:
        journal.append(
            Turn(
                user_id="u",
                session_id="s",
                model="m",
                messages=({"role": "user", "content": text},),
                reply=None,
                created_at=0.0,
            )
        )
    assert contents(journal) == texts


def test_a_torn_last_line_is_skipped(tmp_path):
    journal = Journal(tmp_path / "j")
    journal.append(turn(0))
    with open(tmp_path / "j", "ab") as handle:
        handle.write(b'{"user_id": "u", "sess')  # a crash in the middle of a write
    assert contents(journal) == ["turn 0"]


def test_keep_last_keeps_the_newest_turns_and_appending_goes_on(tmp_path):
    journal = Journal(tmp_path / "j")
    for k in range(5):
        journal.append(turn(k))

    journal.keep_last(2)
    journal.append(turn(5))

    assert contents(journal) == ["turn 3", "turn 4", "turn 5"]
    assert contents(Journal(tmp_path / "j")) == ["turn 3", "turn 4", "turn 5"]
    journal.keep_last(0)
    assert contents(journal) == [] and journal.size() == 0


def test_a_rewritten_journal_stays_private_as_it_was_made(tmp_path):
    # It holds users' turns: created 0600, and so after keep_last or a forgotten user's drop.
    journal = Journal(tmp_path / "j")
    for k in range(3):
        journal.append(turn(k))
    assert os.stat(tmp_path / "j").st_mode & 0o777 == 0o600

    journal.keep_last(2)
    assert os.stat(tmp_path / "j").st_mode & 0o777 == 0o600
    journal.drop_user("someone else")
    assert os.stat(tmp_path / "j").st_mode & 0o777 == 0o600
    assert contents(journal) == ["turn 1", "turn 2"]


def test_dropping_one_session_of_a_user_keeps_their_others_and_other_users(tmp_path):
    """`DELETE /v1/memory/sessions/{id}`: a replay must not store that session's turns again."""
    from dataclasses import replace

    journal = Journal(tmp_path / "j")
    journal.append(replace(turn(0), user_id="alice", session_id="s2"))
    journal.append(replace(turn(1), user_id="alice", session_id="s3"))
    journal.append(replace(turn(2), user_id="carol", session_id="s2"))

    journal.drop_user("alice", "s2")

    assert [(t.user_id, t.session_id) for t in journal.replay()] == [
        ("alice", "s3"),
        ("carol", "s2"),
    ]


def test_clear_empties_it(tmp_path):
    journal = Journal(tmp_path / "j")
    journal.append(turn(0))
    journal.clear()
    journal.append(turn(1))
    assert contents(journal) == ["turn 1"]


def test_replaying_a_large_journal_holds_one_turn_at_a_time(tmp_path):
    import tracemalloc

    journal = Journal(tmp_path / "j")
    big = "x" * 10_000
    for k in range(2_000):  # ~20 MB, as a long overload that spilled every turn leaves it
        journal.append(
            Turn(
                user_id="u",
                session_id="s",
                model="m",
                messages=({"role": "user", "content": f"{k} {big}"},),
                reply=None,
                created_at=float(k),
            )
        )
    tracemalloc.start()
    try:
        count = sum(1 for _ in journal.turns())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == 2_000
    assert peak < 1_000_000, f"{peak} bytes at the peak: the journal was read whole"


# -- a journal that fails, and comes back -------------------------------------------------------


def broken(path, target="/dev/full"):
    """Make `path` name a device that refuses writes, as a full disk would (ENOSPC, even for
    root), in one atomic step."""
    link = path.with_name(path.name + ".link")
    link.symlink_to(target)
    os.replace(link, path)


def test_an_append_to_a_full_disk_raises_and_the_next_one_after_it_is_freed_works(tmp_path):
    journal = Journal(tmp_path / "j")
    journal.append(turn(0))
    kept = (tmp_path / "j").read_bytes()
    broken(tmp_path / "j")

    with pytest.raises(OSError) as raised:
        journal.append(turn(1))
    assert raised.value.errno == errno.ENOSPC
    with pytest.raises(OSError):
        journal.probe()

    (tmp_path / "j").unlink()
    (tmp_path / "j").write_bytes(kept + b'{"user_id": "u", "sess')  # and a line torn by it
    journal.append(turn(2))  # starts on a fresh line: only the torn one is lost
    journal.probe()
    assert contents(journal) == ["turn 0", "turn 2"]


def test_a_journal_replaced_while_running_is_written_where_the_path_says(tmp_path):
    journal = Journal(tmp_path / "j")
    journal.append(turn(0))
    (tmp_path / "j").rename(tmp_path / "elsewhere")
    (tmp_path / "j").mkdir()  # the path is now a directory: appends there fail

    with pytest.raises(OSError):
        journal.append(turn(1))
    with pytest.raises(OSError):
        journal.clear()

    (tmp_path / "j").rmdir()
    journal.append(turn(2))  # a fresh journal at the same path
    assert contents(journal) == ["turn 2"]
    assert contents(Journal(tmp_path / "elsewhere")) == ["turn 0"]


def test_a_journal_that_is_not_a_regular_file_is_refused_rather_than_read_for_ever(tmp_path):
    journal = Journal(tmp_path / "j")
    broken(tmp_path / "j", "/dev/zero")  # reads as endless zeros, never a line end

    with pytest.raises(OSError):
        list(journal.turns())
    with pytest.raises(OSError):
        journal.keep_last(1)


def test_a_missing_journal_holds_no_turns_and_clearing_recreates_it(tmp_path):
    journal = Journal(tmp_path / "j")
    (tmp_path / "j").unlink()
    assert contents(journal) == [] and journal.size() == 0
    journal.clear()
    assert (tmp_path / "j").is_file()


def test_keep_last_counts_turns_not_empty_lines(tmp_path):
    journal = Journal(tmp_path / "j")
    for k in range(3):
        journal.append(turn(k))
        with open(tmp_path / "j", "ab") as handle:
            handle.write(b"\n")  # as after a torn line
    journal.keep_last(2)
    assert contents(journal) == ["turn 1", "turn 2"]


def test_a_probe_leaves_the_journal_as_it_was(tmp_path):
    journal = Journal(tmp_path / "j")
    journal.append(turn(0))
    before = (tmp_path / "j").read_bytes()
    journal.probe()
    assert (tmp_path / "j").read_bytes() == before


def test_count_is_the_lines_that_may_hold_a_turn_not_empty_ones(tmp_path):
    journal = Journal(tmp_path / "j")
    assert journal.count() == 0
    for k in range(3):
        journal.append(turn(k))
        with open(tmp_path / "j", "ab") as handle:
            handle.write(b"\n")  # as after a torn line
    assert journal.count() == 3
    (tmp_path / "j").unlink()
    assert journal.count() == 0


def test_a_turn_with_its_messages_as_text_is_journaled_with_that_text_and_replays_the_same(
    tmp_path,
):
    journal = Journal(tmp_path / "j")
    text = '[ {"role":"user",  "content":"Caf\\u00e9 \\/"} ]'
    written = dataclasses.replace(turn(1), messages=({"role": "user", "content": "Café /"},))
    journal.append(dataclasses.replace(written, messages_json=text))
    line = (tmp_path / "j").read_text()
    assert line.count("\n") == 1 and line.endswith("\n")
    assert f'"messages":{text}' in line
    assert journal.replay() == [written]


def test_a_reply_to_a_forced_function_replays_with_its_answer_in_the_call(tmp_path):
    """After a crash the turn is stored from the journal: its call's arguments are still
    its text (`Turn.answer_in_call`)."""
    journal = Journal(tmp_path / "j")
    forced = dataclasses.replace(turn(1), answer_in_call=True)
    journal.append(forced)
    journal.append(turn(2))
    assert journal.replay() == [forced, turn(2)]


@pytest.mark.parametrize("reply", ["ok", "ok — done", "ok 😀"])
@pytest.mark.parametrize("said", ["plain", "Café", "𝄞 clef"])
def test_a_line_is_written_as_turn_line_says_whatever_its_text(tmp_path, reply, said):
    """The messages' text is encoded apart from the rest of the line (`turn_line_bytes`):
    the same bytes as the whole line's, ASCII or not on either side."""
    journal = Journal(tmp_path / "j")
    messages = ({"role": "user", "content": said},)
    written = dataclasses.replace(
        turn(1), messages=messages, reply={"role": "assistant", "content": reply}
    )
    for kept in (None, json.dumps(list(messages), ensure_ascii=False)):
        journal.append(dataclasses.replace(written, messages_json=kept))
        line = dataclasses.replace(written, messages_json=kept)
        assert turn_line_bytes(line) == (turn_line(line) + "\n").encode()
    assert journal.replay() == [written, written]
