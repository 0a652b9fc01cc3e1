"""The second stop belongs to its run: reward code is refused while that run lasts, and scores again after it
(a caller running again in its own process, or an episode run outside a run)."""

from __future__ import annotations

import asyncio

import pytest

from vftui.collector.scoring_limit import ScoringLimit

pytestmark = pytest.mark.unit


async def scored(limit: ScoringLimit) -> bool:
    async with limit.scoring("reward function 'probe'"):
        return True


async def test_a_second_stop_refuses_scoring_until_its_run_ends_and_no_longer():
    limit = ScoringLimit()
    watch = asyncio.ensure_future(limit.watch())
    await asyncio.sleep(0)  # the watch has started: the handler is the limit's
    assert await scored(limit)
    limit.force_stop()
    with pytest.raises(asyncio.CancelledError, match="stopped twice"):
        await scored(limit)
    watch.cancel()
    await asyncio.wait([watch])
    assert await scored(limit)
