"""proxy/writer.py with replicas on one Postgres: a turn's messages indexed by another replica.

Indexing is claimed (`FOR UPDATE SKIP LOCKED`), so a replica's writer can find nothing it may
claim while older messages, another replica's, are still being indexed there: its own turns
count as indexed only once those are done. It must notice when they are, with no new turn to
wake it: else its `flush` hangs until it times out (the 504 `bench/load.py --replicas 2` met)
and its `pending` stays above zero on an idle replica.
"""

import asyncio
import time

from memory import MemoryLayer, Settings, Turn
from proxy.writer import Writer
from tests.memory.hash_embedder import HashEmbedder


def turn(user, text):
    return Turn(
        user_id=user,
        session_id="s1",
        model="gpt-4o-mini",
        messages=({"role": "user", "content": text},),
        reply={"role": "assistant", "content": f"noted: {text}"},
        created_at=time.time(),
    )


async def until(condition, seconds=10.0):
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.01)


def test_a_writer_sees_its_turns_indexed_once_another_replica_has_indexed_older_messages(
    pg_database, tmp_path
):
    url = pg_database()
    embedder = HashEmbedder()
    a, b = (
        MemoryLayer(Settings(db_url=url, db_path=tmp_path / f"{n}.db"), lambda _: embedder)
        for n in "ab"
    )
    assert a.embedder is embedder  # the vector table, for both
    a.store_only(turn("ana", "my boat is called Gaivota"))  # two messages, not indexed
    claimed = a.store.unindexed_messages(100)  # replica A is indexing them: B skips them
    assert len(claimed) == 2

    async def scenario():
        writer = Writer(b, b.open_journal(tmp_path / "b.journal"))
        await writer.start()
        try:
            await until(lambda: writer.recovered)
            writer.submit(turn("bo", "my bike is blue"))
            await until(lambda: b.store.count_unindexed() == 2)  # B's own two are indexed
            assert writer.pending > 0  # older messages (A's) are not: B's turn is not done
            flushing = asyncio.create_task(writer.flush(timeout=10))
            await asyncio.sleep(1)  # the cycle flush wakes finds nothing B may claim
            vectors = embedder.embed_documents([m.content for m in claimed])
            for message, vector in zip(claimed, vectors, strict=True):
                a.store.add_chunks(message, [message.content], vector[None, :])  # A is done
            assert await flushing, "B never saw A finish: flush timed out"
            assert writer.pending == 0
        finally:
            await writer.stop()

    try:
        asyncio.run(scenario())
    finally:
        a.close()
        b.close()
