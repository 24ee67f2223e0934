"""Shared fixtures: real servers on free ports, fakes only at moim's edges (STYLE.md point 17).

- ``upstream``: the fake OpenAI-compatible provider of ``tests/upstream.py``, one server per
  session, its recorded requests and script cleared before every test that uses it.
"""

from collections.abc import Iterator

import pytest

from tests.upstream import Upstream, serve_upstream


@pytest.fixture(scope="session")
def upstream() -> Iterator[Upstream]:
    with serve_upstream() as server:
        yield server


@pytest.fixture(autouse=True)
def _fresh_upstream(request: pytest.FixtureRequest) -> None:
    """Reset the session's upstream for each test that uses it, directly or through a fixture."""
    if "upstream" in request.fixturenames:
        request.getfixturevalue("upstream").reset()
