import random
import unicodedata

import pytest

from memory.ingest.chunking import chunk_spans, chunk_text


def _uncovered(text, size, overlap):
    """Positions of non-whitespace characters of `text` that no chunk contains."""
    covered = set()
    for start, end in chunk_spans(text, size, overlap):
        covered.update(range(start, end))
    return [i for i, ch in enumerate(text) if not ch.isspace() and i not in covered]


def test_empty_and_whitespace_only_text_gives_no_chunks():
    assert chunk_text("") == []
    assert chunk_text(" \n\t  \u3000") == []


def test_short_text_is_one_stripped_chunk():
    assert chunk_text("  hello world \n") == ["hello world"]


def test_text_of_exactly_size_characters_is_one_chunk():
    text = "ab " * 333 + "c"
    assert len(text) == 1000
    assert chunk_text(text) == [text]


def test_size_is_measured_after_stripping():
    text = "   " + "x" * 1000 + "\n\n"
    assert chunk_text(text) == ["x" * 1000]


def test_one_character_over_size_without_whitespace_is_cut_hard_with_overlap():
    assert chunk_text("a" * 1001) == ["a" * 1000, "a" * 201]


def test_one_character_over_size_snaps_the_cut_to_whitespace():
    text = "word " * 200 + "z"
    assert len(text) == 1001
    assert chunk_text(text) == [
        ("word " * 200).strip(),
        ("word " * 40).strip() + " z",
    ]


def test_consecutive_chunks_overlap_by_about_overlap_characters():
    text = " ".join(f"w{i:03d}" for i in range(600))
    chunks = chunk_text(text)
    assert [chunk[:9] for chunk in chunks] == ["w000 w001", "w160 w161", "w320 w321", "w480 w481"]
    assert [len(chunk) for chunk in chunks] == [999, 999, 999, 599]
    spans = chunk_spans(text)
    overlaps = [spans[i][1] - spans[i + 1][0] for i in range(len(spans) - 1)]
    assert overlaps == [199, 199, 199]


def test_chunks_never_end_or_start_inside_a_word():
    text = " ".join(["alpha", "beta", "gamma", "delta", "epsilon"] * 100)
    words = set(text.split())
    for chunk in chunk_text(text, size=97, overlap=23):
        assert set(chunk.split()) <= words


def test_small_windows_snap_to_words():
    assert chunk_text("one two three four five six", size=12, overlap=6) == [
        "one two",
        "two three",
        "three four",
        "four five",
        "five six",
    ]


def test_next_start_snaps_forward_so_a_long_word_can_eat_the_overlap():
    assert chunk_text("one two three four five six", size=10, overlap=4) == [
        "one two",
        "two three",
        "four five",
        "six",
    ]


def test_cjk_without_spaces_is_cut_hard_by_characters():
    text = "東京" * 30
    assert chunk_text(text, size=20, overlap=5) == [
        "東京" * 10,
        "京" + "東京" * 9 + "東",
        "東京" * 10,
        "京" + "東京" * 7,
    ]


def test_emoji_count_as_one_character_each():
    text = "🙂" * 25
    assert chunk_text(text, size=10, overlap=2) == ["🙂" * 10, "🙂" * 10, "🙂" * 9]


def test_hard_cut_never_separates_a_combining_mark_from_its_letter():
    text = "e\u0301" * 15
    chunks = chunk_text(text, size=10, overlap=3)
    assert chunks == ["e\u0301" * 5] * 4 + ["e\u0301" * 3]
    assert all(not unicodedata.combining(chunk[0]) for chunk in chunks)


def test_combining_characters_in_words_are_kept_whole():
    text = " ".join(["café", "cafe\u0301", "naïve", "nai\u0308ve"] * 40)
    chunks = chunk_text(text, size=50, overlap=10)
    assert all(len(chunk) <= 50 for chunk in chunks)
    assert set(" ".join(chunks).split()) == {"café", "cafe\u0301", "naïve", "nai\u0308ve"}
    assert _uncovered(text, 50, 10) == []


@pytest.mark.parametrize("seed", range(20))
def test_no_chunk_is_longer_than_size_and_every_character_is_covered(seed):
    rng = random.Random(seed)
    alphabet = ["a", "b", "é", "東", "🙂", " ", " ", "\n", "x" * 30, "e\u0301"]
    text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 3000)))
    size = rng.randrange(20, 400)
    overlap = rng.randrange(0, size)
    chunks = chunk_text(text, size=size, overlap=overlap)
    assert all(0 < len(chunk) <= size for chunk in chunks)
    assert all(chunk == chunk.strip() for chunk in chunks)
    assert _uncovered(text, size, overlap) == []


def test_chunking_is_deterministic():
    text = " ".join(f"token{i}" for i in range(2000))
    assert chunk_text(text) == chunk_text(text)


def test_spans_are_offsets_into_the_unstripped_text():
    text = "  aaaa bbbb\n\n cccc dddd  "
    assert chunk_spans(text, size=9, overlap=0) == [(2, 11), (14, 23)]
    assert chunk_text(text, size=9, overlap=0) == ["aaaa bbbb", "cccc dddd"]


def test_zero_overlap_tiles_the_text():
    assert chunk_text("aaaa bbbb cccc dddd", size=9, overlap=0) == ["aaaa bbbb", "cccc dddd"]


@pytest.mark.parametrize(("size", "overlap"), [(0, 0), (10, 10), (10, -1)])
def test_impossible_window_settings_are_rejected(size, overlap):
    with pytest.raises(ValueError):
        chunk_text("text", size=size, overlap=overlap)
