"""memory/recall/later.py: the later user turn on the subject of a kept hit is kept too."""

import numpy as np

from memory.recall.later import later_by_keyword, later_on_same_subject
from memory.recall.scoring import Ranked
from memory.records import Chunk, Hit

DAY = 86_400.0
T0 = 1_700_000_000.0


def hit(chunk_id, day, role="user", similarity=0.4, session="s-1"):
    chunk = Chunk(
        chunk_id,
        100 + chunk_id,
        "ana",
        session,
        role,
        None,
        f"turn {chunk_id}",
        T0 + day * DAY,
        f"hash{chunk_id}",
    )
    return Hit(chunk, 1.0 - chunk_id / 100, similarity, chunk_id, None)


def unit(*components):
    vector = np.array(components, dtype=np.float32)
    return vector / np.linalg.norm(vector)


# Three subjects on three axes: where Ana lives (x), her job (y), her cat (z).
HOME, JOB, CAT = unit(1, 0, 0), unit(0, 1, 0), unit(0, 0, 1)
NEAR_HOME = unit(1, 0.3, 0.3)  # cosine 0.92 with HOME, 0.28 with JOB and CAT
LESS_NEAR_HOME = unit(1, 0.85, 0.85)  # cosine 0.64 with HOME


def select(kept, dropped, vectors, min_similarity=0.5, top=3, min_query_similarity=0.0):
    out = later_on_same_subject(
        kept, [*kept, *dropped], vectors, min_similarity, top, min_query_similarity
    )
    return [h.chunk.id for h in out]


def test_a_dropped_later_turn_close_to_a_kept_hit_is_kept_after_the_kept_hits():
    old_home, job = hit(1, day=0), hit(2, day=1)
    new_home, cat = hit(3, day=30, similarity=0.27), hit(4, day=31, similarity=0.2)
    vectors = {1: HOME, 2: JOB, 3: NEAR_HOME, 4: CAT}
    assert select([old_home, job], [new_home, cat], vectors) == [1, 2, 3]


def test_an_earlier_turn_is_not_kept_however_close():
    old_home, new_home = hit(1, day=0), hit(3, day=30)
    assert select([new_home], [old_home], {1: HOME, 3: NEAR_HOME}) == [3]


def test_a_later_turn_on_another_subject_is_not_kept():
    home, cat = hit(1, day=0), hit(4, day=30)
    assert select([home], [cat], {1: HOME, 4: CAT}) == [1]


def test_the_chunk_to_chunk_threshold_decides():
    home, near = hit(1, day=0), hit(3, day=30)
    vectors = {1: HOME, 3: LESS_NEAR_HOME}
    assert select([home], [near], vectors, min_similarity=0.6) == [1, 3]
    assert select([home], [near], vectors, min_similarity=0.7) == [1]


def test_of_several_later_turns_the_closest_is_kept():
    home, near, less_near = hit(1, day=0), hit(3, day=30), hit(5, day=60)
    vectors = {1: HOME, 3: NEAR_HOME, 5: LESS_NEAR_HOME}
    assert select([home], [less_near, near], vectors) == [1, 3]


def test_an_assistant_turn_is_not_kept():
    home, reply = hit(1, day=0), hit(3, day=30, role="assistant")
    assert select([home], [reply], {1: HOME, 3: NEAR_HOME}) == [1]


def test_a_later_turn_too_far_from_the_question_is_not_kept():
    home, new_home = hit(1, day=0), hit(3, day=30, similarity=0.1)
    vectors = {1: HOME, 3: NEAR_HOME}
    assert select([home], [new_home], vectors, min_query_similarity=0.2) == [1]
    assert select([home], [new_home], vectors, min_query_similarity=0.05) == [1, 3]


def test_only_the_first_top_kept_hits_look_for_a_later_turn():
    job, home, new_home = hit(2, day=0), hit(1, day=0), hit(3, day=30)
    vectors = {1: HOME, 2: JOB, 3: NEAR_HOME}
    assert select([job, home], [new_home], vectors, top=1) == [2, 1]
    assert select([job, home], [new_home], vectors, top=2) == [2, 1, 3]


def test_a_later_turn_is_kept_once_for_the_best_hit_it_updates():
    home, home_again, new_home = hit(1, day=0), hit(2, day=1), hit(3, day=30)
    vectors = {1: HOME, 2: HOME, 3: NEAR_HOME}
    assert select([home, home_again], [new_home], vectors) == [1, 2, 3]


def test_a_turn_already_kept_is_not_kept_twice():
    home, new_home = hit(1, day=0), hit(3, day=30)
    assert select([home, new_home], [], {1: HOME, 3: NEAR_HOME}) == [1, 3]


def test_hits_without_a_vector_neither_lend_nor_borrow():
    home, new_home = hit(1, day=0), hit(3, day=30)
    assert select([home], [new_home], {3: NEAR_HOME}) == [1]
    assert select([home], [new_home], {1: HOME}) == [1]


def test_the_kept_later_turn_keeps_its_own_scores():
    home, new_home = hit(1, day=0), hit(3, day=30, similarity=0.27)
    out = later_on_same_subject([home], [home, new_home], {1: HOME, 3: NEAR_HOME}, 0.5, 3)
    assert out == [home, new_home]


# -- a later turn found by the question's words (later_by_keyword) ----------------------------


def by_keyword(kept, dropped, keyword):
    ranked = Ranked([*kept, *dropped], list(kept), False)
    return [h.chunk.id for h in later_by_keyword(list(kept), ranked, keyword)]


def test_a_dropped_keyword_turn_said_after_a_kept_one_is_kept_after_the_kept_hits():
    kept = [hit(1, 0), hit(2, 5)]
    dropped = [hit(3, 30, similarity=0.05), hit(4, 40, similarity=0.3)]
    assert by_keyword(kept, dropped, {1, 3}) == [1, 2, 3]  # 4: not found by the words


def test_it_is_later_than_the_oldest_kept_user_turn_the_words_found():
    kept = [hit(1, 10), hit(2, 0)]
    assert by_keyword(kept, [hit(3, 5, similarity=0.05)], {1, 2, 3}) == [1, 2, 3]
    assert by_keyword(kept, [hit(3, 5, similarity=0.05)], {1, 3}) == [1, 2]


def test_only_the_best_such_turn_is_kept():
    dropped = [hit(3, 30, similarity=0.05), hit(4, 40, similarity=0.1)]
    assert by_keyword([hit(1, 0)], dropped, {1, 3, 4}) == [1, 3]


def test_an_assistant_turn_neither_anchors_nor_is_kept():
    assert by_keyword([hit(1, 0)], [hit(3, 30, role="assistant")], {1, 3}) == [1]
    assert by_keyword([hit(1, 0, role="assistant")], [hit(3, 30)], {1, 3}) == [1]


def test_with_no_kept_turn_found_by_the_words_nothing_is_added():
    assert by_keyword([hit(1, 0)], [hit(3, 30, similarity=0.05)], {3}) == [1]
