"""Replicas sharing one Postgres: finish what a replica that died left undone.

Every second, in a worker thread, each replica stores the turns dead replicas left in the
shared journal and indexes a batch of unindexed messages, theirs included
(`MemoryLayer.recover_replicas`). Indexing is claimed row by row in the database, so live
replicas never index the same message twice. Only started for a shared (Postgres) store.
"""

from __future__ import annotations

import asyncio
import logging

import anyio.to_thread

from memory import MemoryLayer, MemoryLayerError

logger = logging.getLogger(__name__)

INTERVAL = 1.0


async def recover_replicas(layer: MemoryLayer, interval: float = INTERVAL) -> None:
    """Run `layer.recover_replicas` every `interval` seconds once the model is loaded."""
    while True:
        await asyncio.sleep(interval)
        if not layer.ready:
            continue
        try:
            adopted = await anyio.to_thread.run_sync(layer.recover_replicas)
        except MemoryLayerError as exc:  # the database is down: the next round tries again
            logger.debug("replica recovery skipped: %s", exc)
            continue
        except Exception:
            logger.exception("replica recovery failed")
            continue
        if adopted:
            logger.info("stored %d turns a stopped replica had received", adopted)
