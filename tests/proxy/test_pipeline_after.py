"""What runs once an answer is sent (`proxy/pipeline.py: _after`)."""

from __future__ import annotations

import asyncio
import threading

from starlette.background import BackgroundTask

from proxy.pipeline import _after


def test_the_inspectors_record_is_made_off_the_event_loop_after_the_responses_own_task() -> None:
    """A large user's record reads the store (milliseconds): the loop serves others meanwhile."""
    order: list[tuple[str, int]] = []

    def background() -> None:
        order.append(("background", threading.get_ident()))

    def settle() -> None:
        order.append(("settle", threading.get_ident()))

    async def run() -> int:
        task = _after(BackgroundTask(background), settle)
        await task()
        return threading.get_ident()

    loop_thread = asyncio.run(run())
    assert [name for name, _ in order] == ["background", "settle"]
    assert order[1][1] != loop_thread


def test_a_failing_record_is_the_inspectors_loss_not_the_requests() -> None:
    def settle() -> None:
        raise RuntimeError("the ring failed")

    asyncio.run(_after(None, settle)())  # logged, not raised
