"""proxy/writer.py's stop: within its time, else the journal keeps what is not stored.

As in tests/proxy/test_writer.py, the test embedder is gated, so the test decides when an
indexing pass may run; SQLite, the journal and the memory layer are real.
"""

import asyncio
import logging

from memory import Journal, MemoryLayer, Settings
from proxy.writer import Writer
from tests.proxy.test_writer import GatedEmbedder, turn, until


def test_a_stop_out_of_time_leaves_the_unstored_turns_in_the_journal_for_the_next_start(
    tmp_path, caplog
):
    """A stop waited for every queued turn to be stored (a backlog of thousands) past the
    10 s it gave the indexing: Kubernetes kills 30 s after SIGTERM, whatever is under way."""
    caplog.set_level(logging.INFO, logger="proxy.writer")
    gate = GatedEmbedder()
    layer = MemoryLayer(Settings(db_path=tmp_path / "m.db"), embedder_factory=lambda _: gate)
    journal_path = tmp_path / "journal"

    async def stop_out_of_time():
        writer = Writer(layer, Journal(journal_path))
        await writer.start()
        await until(lambda: writer.recovered)
        for k in range(10):
            writer.submit(turn(k))
        await until(gate.waiting.is_set)  # stored; the first indexing pass waits
        for k in range(10, 60):
            writer.submit(turn(k))  # queued behind the pass, not stored
        stopping = asyncio.create_task(writer.stop(timeout=0.0))
        await until(lambda: "shutdown timeout" in caplog.text)
        gate.permits.release(1000)  # the pass under way ends; no other begins
        await stopping

    asyncio.run(stop_out_of_time())
    assert len(layer.store.messages("u")) == 20  # the ten turns stored before the stop
    assert Journal(journal_path).count() == 50  # the rest, for the next start
    assert (
        "memory writer stopped at the shutdown timeout (server.shutdown_timeout) with 60 "
        "turns not yet stored or indexed: the journal keeps those not stored, and the next "
        "start stores and indexes them"
    ) in caplog.text
    assert "every finished turn is stored" not in caplog.text

    async def next_start():
        writer = Writer(layer, Journal(journal_path))
        await writer.start()
        assert await writer.flush(timeout=30)
        await writer.stop()

    asyncio.run(next_start())
    assert len(layer.store.messages("u")) == 120
    assert layer.store.count_unindexed() == 0
    assert Journal(journal_path).count() == 0
    layer.close()
