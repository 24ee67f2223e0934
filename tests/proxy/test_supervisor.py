"""proxy/supervisor.py: a background task that crashes is logged and started again."""

import asyncio
import logging

from proxy.supervisor import supervise


def test_a_crashing_task_is_logged_with_its_traceback_and_restarted(caplog):
    runs = []
    crashes = []

    async def run():
        runs.append(len(runs))
        if len(runs) < 3:
            raise RuntimeError(f"bug number {len(runs)}")

    with caplog.at_level(logging.ERROR, logger="proxy.supervisor"):
        asyncio.run(supervise("the task", run, crashes.append, first_pause=0.001))

    assert runs == [0, 1, 2]  # ran a third time, and returned
    assert [str(exc) for exc in crashes] == ["bug number 1", "bug number 2"]
    logged = [r for r in caplog.records if r.name == "proxy.supervisor"]
    assert [r.getMessage() for r in logged] == [
        "the task crashed; restarting it in 0 s",
        "the task crashed; restarting it in 0 s",
    ]
    assert all(r.exc_info and r.exc_info[0] is RuntimeError for r in logged)


def test_cancelling_the_supervisor_cancels_the_task_and_is_not_a_crash():
    crashes = []
    started = asyncio.Event()

    async def run():
        started.set()
        await asyncio.sleep(3600)

    async def scenario():
        task = asyncio.create_task(supervise("the task", run, crashes.append))
        await started.wait()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return task.cancelled()

    assert asyncio.run(scenario()) is True
    assert crashes == []
