import gc
import weakref

import pytest

from memory.remembered import Remembered


class Text:
    """A hashable input a weak reference can watch (str cannot be watched)."""

    def __init__(self, value: str) -> None:
        self.value = value

    def __hash__(self) -> int:
        return hash(self.value)


def test_a_value_is_made_once_and_its_inputs_are_not_held():
    remembered: Remembered[int] = Remembered(4)
    made = []
    text = Text("a long tool result")
    watch = weakref.ref(text)

    assert remembered.get(text, lambda: made.append(1) or 7) == 7
    assert remembered.get(Text("a long tool result"), lambda: made.append(1) or 8) == 7
    assert made == [1]
    del text
    gc.collect()
    assert watch() is None  # only its hash was kept


def test_the_oldest_goes_first_and_a_clear_lets_go_of_all():
    remembered: Remembered[str] = Remembered(2)
    for word in ("one", "two", "three"):
        remembered.get(word, lambda word=word: word.upper())
    assert len(remembered) == 2
    assert remembered.get("one", lambda: "made again") == "made again"
    assert remembered.get("three", lambda: "not made") == "THREE"
    remembered.clear()
    assert len(remembered) == 0


def test_unhashable_inputs_raise_as_hash_does():
    with pytest.raises(TypeError):
        Remembered[int](2).get(({"city": "Paris"},), lambda: 1)
