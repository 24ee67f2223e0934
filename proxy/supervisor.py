"""Keep a background task alive: a crash is logged with its traceback and the task restarted.

The writer's loop (proxy/writer.py) handles the failures it expects (I/O, the store, the
embedding model) and retries them itself; `supervise` is the net under it, for a bug. An
asyncio task that raises dies silently until someone awaits it, and a dead writer stores
nothing more until a restart; supervised, it is back after a pause that doubles while it
keeps crashing (1 s, 2 s, 4 s … a minute at most) and starts again at a second once it has
run a minute without crashing.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

logger = logging.getLogger(__name__)

FIRST_PAUSE = 1.0
MAX_PAUSE = 60.0


async def supervise(
    name: str,
    run: Callable[[], Awaitable[None]],
    on_crash: Callable[[Exception], None],
    first_pause: float = FIRST_PAUSE,
    max_pause: float = MAX_PAUSE,
) -> None:
    """Run `run()` until it returns; whenever it raises, call `on_crash` with the exception,
    wait, and run it again. Cancelling the supervisor cancels the run in progress."""
    pause = first_pause
    while True:
        started = time.monotonic()
        try:
            await run()
            return
        except Exception as exc:  # the net under the task: anything it did not expect
            if time.monotonic() - started >= max_pause:
                pause = first_pause  # it ran a good while: not the same crash over and over
            logger.exception("%s crashed; restarting it in %.0f s", name, pause)
            on_crash(exc)
        await asyncio.sleep(pause)
        pause = min(2 * pause, max_pause)
