"""sft with many groups in flight: atroposlib's process manager without its one-at-a-time loop.

atroposlib's ``process_manager`` waits for each group before it asks for the next item,
so requests in flight can never exceed one group. Here each group still goes through
atroposlib's own steps, in its own task (the driver's ``process``: ``collect_trajectories`` →
``postprocess_histories`` → ``handle_send_to_api(do_send_to_api=False)`` → ``wandb_log``),
and the pool starts the next item as soon as fewer than ``groups_allowed()`` groups are
in flight (about requests allowed / group size: ``groups_with_spares``). Groups finish
in any order; the env's one appender writes each as one whole line, and its ledger
records which items are done. The run's page (``RunPage``: the report of its groups) grows as
each group ends; its figures are written at the end.
"""

from __future__ import annotations

import asyncio
import functools
import math
from collections.abc import Callable

from vftui.collector.modes import ProcessDriver
from vftui.errors import RunFailed
from vftui.report.run_page import RunPage
from vftui.run_files.files import RunFiles


async def collect_in_flight(
    driver: ProcessDriver, groups_allowed: Callable[[], int], files: RunFiles
) -> None:
    """Collect the run's groups, ``groups_allowed()`` at a time, until the driver hands out no more.

    A group that fails the run (``RunFailed``) cancels the others; cancelling this
    coroutine (a second Ctrl-C) cancels every group in flight.
    """
    await driver.begin()
    page = RunPage.open(files)
    room = asyncio.Event()
    in_flight = 0

    def left(task: asyncio.Task, item) -> None:
        nonlocal in_flight
        in_flight -= 1
        room.set()
        driver.release(item)  # a task cancelled before its first step never ran its own finally
        if page is not None:
            page.follow()  # its line, if it wrote one

    try:
        async with asyncio.TaskGroup() as pool:
            while True:
                while in_flight >= max(1, groups_allowed()):
                    room.clear()
                    await room.wait()
                item = await driver.next_item()  # waits while paused; None once stopping or enough
                if item is None:
                    if in_flight == 0:
                        break
                    room.clear()  # a group in flight may yet be dropped, leaving room for one more
                    await room.wait()
                    continue
                in_flight += 1
                task = pool.create_task(driver.process(item))
                task.add_done_callback(functools.partial(left, item=item))
    except BaseExceptionGroup as group:
        raise _first_cause(group) from None
    finally:
        if page is not None:
            page.finish()  # however it ended: a page of the groups written, whole
    driver.end()


def groups_for(requests: int, group_size: int) -> int:
    """Groups that keep ``requests`` requests busy: one request per rollout at a time."""
    return max(1, math.ceil(requests / group_size))


def groups_with_spares(requests: int, group_size: int) -> int:
    """``groups_for`` and a quarter more, whose requests wait at the request limit.

    A group's last answers come back together and then take CPU time to score and
    tokenize; the spare groups' requests go out the moment those answers free their
    slots, so the endpoint stays busy while the finished groups are processed.
    """
    base = groups_for(requests, group_size)
    return base + math.ceil(base / 4)


def _first_cause(group: BaseExceptionGroup) -> BaseException:
    """The error to report for a group of failures: the run's own failure first."""
    leaves = list(_leaves(group))
    return next((e for e in leaves if isinstance(e, RunFailed)), leaves[0])


def _leaves(group: BaseExceptionGroup):
    for error in group.exceptions:
        if isinstance(error, BaseExceptionGroup):
            yield from _leaves(error)
        else:
            yield error
