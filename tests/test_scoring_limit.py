"""A second stop refuses the reward code of its run, on that run's event loop, even after the run's watch has
ended (tasks of the run that outlive it, as atroposlib's serve workers do), and nowhere else: the process's
later work (a caller's next run, an episode run on its own) scores as before."""

from __future__ import annotations

import asyncio

import pytest

from vftui.collector.scoring_limit import ScoringLimit

pytestmark = pytest.mark.unit


async def scored(limit: ScoringLimit) -> bool:
    async with limit.scoring("reward function 'probe'"):
        return True


async def a_run_stopped_twice(limit: ScoringLimit) -> None:
    """A run's watch, a second stop, the watch's end; then the same loop's scoring, which must be refused."""
    watch = asyncio.ensure_future(limit.watch())
    await asyncio.sleep(0)  # the watch has started: the handler is the limit's
    assert await scored(limit)
    limit.force_stop()
    with pytest.raises(asyncio.CancelledError, match="stopped twice"):
        await scored(limit)
    watch.cancel()
    await asyncio.wait([watch])
    with pytest.raises(asyncio.CancelledError, match="stopped twice"):
        await scored(limit)  # a task of the run that outlived its watch


def test_a_second_stop_refuses_its_runs_reward_code_and_no_one_elses():
    limit = ScoringLimit()
    asyncio.run(a_run_stopped_twice(limit))
    assert asyncio.run(scored(limit)), "later work on a loop of its own"
    limit.force_stop()  # a second stop that comes after its run ended
    assert asyncio.run(scored(limit))
