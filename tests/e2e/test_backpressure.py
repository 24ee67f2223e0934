"""Back-pressure: past `memory.ingest_queue_size` waiting turns, new ones go to the journal only.

README, "Durability": RAM stays bounded (the queue never holds more than its size), every
request is still answered, and a spilled turn is stored from the journal once the queue
drains, so nothing is lost. `/metrics` shows it: `moim_ingest_queued`,
`moim_ingest_queue_peak` (never above `moim_ingest_queue_size`) and
`moim_ingest_spilled_total`.

To make the writer fall behind deterministically, the test holds SQLite's write lock from a
connection of its own (as a backup tool or a slow disk would) while a burst of turns
arrives: the writer's first store waits for the lock, the queue fills, the rest spill.
The lock is released well within SQLite's busy timeout (10 s), so no write fails; a second
burst then arrives while the writer replays the journal. The connection is sqlean's, the
SQLite moim uses: two SQLite libraries in one process do not see each other's locks.
"""

import asyncio
from contextlib import closing

import httpx
import sqlean

USER = {"x-memory-user-id": "burst-user"}
QUEUE_SIZE = 2
BURST = 12  # concurrent turns, half streamed: at most 2 x QUEUE_SIZE are not spilled
TURNS = 2 * BURST  # a burst with the writer held up, one while it catches up


def metrics(proxy):
    """The `/metrics` samples as {name: value}."""
    text = httpx.get(proxy.root + "/metrics").text
    samples = (line.split(" ") for line in text.splitlines() if not line.startswith("#"))
    return {name: float(value) for name, value in samples}


def text_of(n):
    return f"Burst turn {n}: the locker code is quokka{n}x"


async def ask(client, n):
    """One turn, streamed when `n` is odd: (the reply the client received, x-memory-error)."""
    messages = [{"role": "user", "content": text_of(n)}]
    if n % 2 == 0:
        raw = await client.chat.completions.with_raw_response.create(
            model="gpt-4o-mini", messages=messages
        )
        completion = raw.parse()
        return completion.choices[0].message.content, raw.headers.get("x-memory-error")
    stream = await client.chat.completions.create(
        model="gpt-4o-mini", messages=messages, stream=True
    )
    parts = [c.choices[0].delta.content or "" async for c in stream if c.choices]
    return "".join(parts), stream.response.headers.get("x-memory-error")


async def burst(proxy, first):
    async with proxy.async_client(default_headers=USER, timeout=30) as client:
        return await asyncio.gather(*(ask(client, n) for n in range(first, first + BURST)))


def test_a_burst_past_a_tiny_ingest_queue_spills_to_the_journal_and_loses_nothing(make_proxy):
    proxy = make_proxy(ingest_queue_size=QUEUE_SIZE)
    lock = sqlean.connect(str(proxy.config.db_path), isolation_level=None, timeout=10)
    with closing(lock):
        lock.execute("BEGIN IMMEDIATE")  # the writer's next store waits for this
        try:
            replies = asyncio.run(burst(proxy, 0))
            during = metrics(proxy)
            stored_meanwhile = lock.execute("SELECT count(*) FROM messages").fetchone()[0]
        finally:
            lock.execute("ROLLBACK")
    replies += asyncio.run(burst(proxy, BURST))
    proxy.flush()
    after = metrics(proxy)

    assert replies == [(f"echo: {text_of(n)}", None) for n in range(TURNS)]
    assert stored_meanwhile == 0
    assert during["moim_ingest_queue_size"] == QUEUE_SIZE
    # the queue filled, and no fuller; the writer may have taken a queueful before it waited
    assert during["moim_ingest_queue_peak"] == QUEUE_SIZE
    assert during["moim_ingest_queued"] <= QUEUE_SIZE
    assert during["moim_ingest_pending"] == BURST
    # the writer took at most a queue's worth before it blocked; every other turn spilled
    assert BURST - 2 * QUEUE_SIZE <= during["moim_ingest_spilled_total"] <= BURST - QUEUE_SIZE
    ingest = {name: value for name, value in after.items() if name.startswith("moim_ingest")}
    assert ingest == {
        "moim_ingest_pending": 0,
        "moim_ingest_queued": 0,
        "moim_ingest_queue_size": QUEUE_SIZE,
        "moim_ingest_queue_peak": QUEUE_SIZE,
        "moim_ingest_spilled_total": ingest["moim_ingest_spilled_total"],
        "moim_ingest_failed": 0,  # no message set aside: every one was indexed
    }
    assert ingest["moim_ingest_spilled_total"] >= during["moim_ingest_spilled_total"]
    assert after["moim_memory_write_failures_total"] == 0

    # nothing lost: every turn's question and reply are stored, indexed and searchable
    log = [(m.role, m.content, m.partial) for m in proxy.layer.store.messages("burst-user")]
    assert sorted(log) == sorted((r, t, False) for n in range(TURNS) for r, t in _turn(n))
    stats = httpx.get(proxy.root + "/v1/memory/stats", headers=USER).json()
    assert (stats["messages"], stats["chunks"], stats["pending"]) == (2 * TURNS, 2 * TURNS, 0)
    for n in range(TURNS):
        found = httpx.get(
            proxy.root + "/v1/memory/search", params={"q": f"quokka{n}x", "k": 10}, headers=USER
        ).json()["results"]
        assert {text for _, text in _turn(n)} <= {hit["text"] for hit in found}, n
    assert proxy.layer.store.integrity_ok()
    journal = proxy.config.db_path.with_name(proxy.config.db_path.name + ".journal")
    assert journal.stat().st_size == 0  # every spilled turn stored, the journal emptied


def _turn(n):
    return [("user", text_of(n)), ("assistant", f"echo: {text_of(n)}")]
