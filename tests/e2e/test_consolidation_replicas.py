"""Consolidation with replicas on one PostgreSQL database: one replica at a time per user.

Every replica given a consolidation model runs the schedule. Each found the same user due
and sent the model the same turns (a second bill, and the model's second reading applied
over the first); a replica now claims the user first (an advisory lock on PostgreSQL) and
leaves a user another replica is consolidating to it.

Two `MemoryLayer`s on one real database stand for two replicas (each has its own pool).
"""

import logging

import pytest

from memory import MemoryLayer, Settings
from proxy.config import Config
from tests.e2e.test_consolidation_schedule import add, chat, consolidation_requests, cycle


@pytest.fixture
def replicas(pg_database, embedder):
    url = pg_database()
    layers = [
        MemoryLayer(Settings(db_url=url, capture_facts=False), embedder_factory=lambda _: embedder)
        for _ in range(2)
    ]
    yield layers
    for layer in layers:
        layer.close()


@pytest.mark.anyio
async def test_a_user_another_replica_is_consolidating_is_left_to_it(replicas, upstream, caplog):
    one, other = replicas
    config = Config(upstream_base_url=upstream.url, upstream_api_key="sk-up")
    newest = chat(one, "ann", "I moved to Lisbon.", "I love it here.")
    upstream.json_script.append(add("home_city", "Lisbon"))

    release = other.claim_consolidation("ann")  # the other replica is asking the model
    assert release is not None
    with caplog.at_level(logging.INFO, logger="proxy"):
        skipped = await cycle(config, one)
    assert one.claim_consolidation("ann") is None  # still the other's
    release()
    done = await cycle(config, one)

    assert skipped == []
    assert "consolidation user_id=ann: another replica is at it" in caplog.messages
    assert [(o.user_id, o.error) for o in done] == [("ann", None)]
    assert len(consolidation_requests(upstream)) == 1
    assert other.consolidated_through("ann") == newest
    assert await cycle(config, other) == []  # marked: nothing left for the other either


@pytest.mark.anyio
async def test_moim_consolidate_leaves_a_user_a_replica_is_consolidating(replicas, upstream):
    """`moim consolidate --user` (run_once) claims the user as the schedule does: while a
    replica holds it, it asks the model nothing and says so; after, it runs and releases."""
    from proxy.consolidate import ConsolidationHeld, run_once

    one, other = replicas
    config = Config(upstream_base_url=upstream.url, upstream_api_key="sk-up")
    chat(one, "ann", "I moved to Lisbon.", "I love it here.")
    upstream.json_script.append(add("home_city", "Lisbon"))

    release = other.claim_consolidation("ann")
    assert release is not None
    with pytest.raises(ConsolidationHeld):
        await run_once(config, one, "ann", "gpt-4o-mini")
    assert consolidation_requests(upstream) == []
    release()

    report = await run_once(config, one, "ann", "gpt-4o-mini")
    assert report.summary()["user_id"] == "ann"
    assert len(consolidation_requests(upstream)) == 1
    assert other.claim_consolidation("ann") is not None  # run_once gave its claim back
