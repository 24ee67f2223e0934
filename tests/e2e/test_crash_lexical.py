"""`kill -9` while turns are indexed never leaves the lexical index silently stale.

The tantivy index beside the database (memory/store/lexical_index.py) is derived from SQLite.
`moim serve` runs as a real subprocess, clients send turns, and the process is killed with
SIGKILL while the writer indexes them, several times. After each kill the store is opened
as a restarted proxy opens it: the index is either verified against SQLite or rebuilt from
it; either way it must then hold exactly SQLite's chunks, and a search through it must find
every chunk's words. A verified index that misses a chunk would be silently stale.
"""

import random
import time

import httpx
import pytest

from memory.store.store import Store
from tests.e2e.test_crash import USER, Driver, Server


def sqlite_chunk_ids(store):
    return [row[0] for row in store.read("SELECT id FROM chunks ORDER BY id")]


def reopened(db):
    """The store as a restarted proxy opens it, with the index verified or rebuilt."""
    store = Store(db, lexical_index=True)
    verified = store.rebuilding is None
    if store.rebuilding is not None:
        store.rebuilding.join(timeout=120)
    assert store.lexical is not None and store.lexical.ready
    return store, verified


@pytest.mark.slow
def test_kill_9_mid_indexing_leaves_the_lexical_index_verified_or_rebuilt(tmp_path, upstream):
    db = tmp_path / "moim.db"
    log = tmp_path / "moim.log"
    seed = random.randrange(10**6)
    rng = random.Random(seed)
    outcomes = []
    for kill in range(3):
        with Server(db, upstream.url, log) as server:
            server.wait("/health/readiness")
            drivers = [Driver(server.root, f"{kill}-{n}", n % 2 == 1) for n in range(4)]
            for driver in drivers:
                driver.start()
            time.sleep(rng.uniform(1.5, 4.0))
            server.kill()
        for driver in drivers:
            driver.stopping.set()
            driver.join(timeout=15)
        store, verified = reopened(db)
        held, truth = store.lexical.held_ids(), sqlite_chunk_ids(store)
        outcomes.append((verified, len(truth)))
        assert held == truth, f"seed {seed}, kill {kill}: verified={verified}; see {log}"
        store.lexical.close()

    # After a graceful stop the index is verified as it is, with no rebuild, and a search
    # through it finds what FTS5 finds.
    with Server(db, upstream.url, log) as server:
        server.wait("/health/readiness")
        assert httpx.post(server.root + "/v1/memory/flush", timeout=60).status_code == 200
        server.stop()
    store, verified = reopened(db)
    assert verified, f"seed {seed}: a graceful stop left an index that needed a rebuild"
    assert store.lexical.held_ids() == sqlite_chunk_ids(store)
    tantivy = {i for i, _ in store.lexical_search(USER, ["parcel", "blue"], 10_000, 0.7)}
    store.lexical.ready = False  # the same search through FTS5
    fts5 = {i for i, _ in store.lexical_search(USER, ["parcel", "blue"], 10_000, 0.7)}
    assert tantivy == fts5 and tantivy, f"seed {seed}"
    print(f"seed {seed}: (verified at restart, chunks) after each kill: {outcomes}")
