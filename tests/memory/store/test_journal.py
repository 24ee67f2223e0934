"""memory/store/journal.py: finished turns survive in an append-only file until they are stored."""

from memory import Journal, Turn


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
