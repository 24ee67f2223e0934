"""The abstention gate: excerpts are withheld when no hit stands out of the question's topic."""

from memory.recall.abstention import TOPIC_SIZE, nothing_stands_out, standout
from memory.records import Chunk, Hit


def hits(*cosines):
    return [
        Hit(Chunk(i, i, "u", "s", "user", None, f"turn {i}", 0.0), 1.0 - i / 100, cos, i, None)
        for i, cos in enumerate(cosines, start=1)
    ]


def test_standout_is_the_best_cosine_plus_its_weighted_lead_over_the_topic_median():
    found = hits(0.6, 0.5, 0.4, 0.4, 0.4, 0.4, 0.4, 0.4, 0.4, 0.4, 0.1)
    assert round(standout(found, 3.0), 6) == round(0.6 + 3 * (0.6 - 0.4), 6)


def test_a_topic_of_alike_turns_is_silenced_and_one_that_stands_out_is_not():
    alike = hits(0.42, *[0.40] * 11)
    answer = hits(0.62, *[0.40] * 11)
    assert nothing_stands_out(alike, alike, 3.0, 0.5)
    assert not nothing_stands_out(answer, answer, 3.0, 0.5)


def test_the_gate_stays_open_for_a_small_store_and_when_turned_off():
    few = hits(*[0.3] * (TOPIC_SIZE - 1))
    many = hits(*[0.3] * TOPIC_SIZE)
    assert not nothing_stands_out(few, few, 3.0, 0.5)
    assert nothing_stands_out(many, many, 3.0, 0.5)
    assert not nothing_stands_out(many, many, 3.0, 0.0)


def test_the_median_is_over_the_hits_kept_after_the_floors():
    candidates = hits(0.45, 0.2, 0.2, 0.2, 0.2, 0.2, 0.2, 0.2, 0.2, 0.2)
    assert not nothing_stands_out(candidates, candidates, 3.0, 0.5)
    assert nothing_stands_out(candidates, candidates[:1], 3.0, 0.5)  # a lone kept hit: no lead
