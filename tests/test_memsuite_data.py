"""Every memsuite split parses and its evidence is said in its history (bench/memsuite.py).

A question whose expected phrase is not in any turn (or, for an update, not in exactly one)
can never pass, and would count as a recall miss. A blind split's failure names the split
only, so that running the tests never shows its text.
"""

import pytest

from bench.gate_fit import BLIND
from bench.memsuite import CATEGORIES, SUITES, personas_of


@pytest.mark.parametrize("suite", SUITES)
def test_every_suite_parses_with_its_evidence_in_the_history(suite: str) -> None:
    try:
        personas = personas_of(suite)
    except (AssertionError, ValueError) as error:
        raise AssertionError(f"{suite} does not parse" if suite in BLIND else str(error)) from None
    assert personas and all(p.sessions and p.cases for p in personas)
    assert {c.category for p in personas for c in p.cases} <= set(CATEGORIES)


@pytest.mark.parametrize(
    "suite", ["fresh10", "fresh11", "fresh12", "fresh13", "fresh14", "fresh15"]
)
def test_the_new_splits_have_ten_personas_each_asked_every_class(suite: str) -> None:
    personas = personas_of(suite)
    assert len(personas) == 10
    for persona in personas:
        assert {c.category for c in persona.cases} == set(CATEGORIES), persona.name
        assert len(persona.sessions) >= 3, persona.name
