"""A run's life in a process that exists for it: the dashboard's collector child and ``run --no-ui``.

Both prepare the run, point the libraries' output at its log, collect, and clean up in the same
order; what differs (who hears a stop, who answers controls, where a line for the user goes) is
the ``Host``'s. The run is imported after the first status: its libraries take seconds to load,
and the user sees that they are loading.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import tempfile
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Protocol

from vftui.collector import captured
from vftui.config import RunConfig
from vftui.events import Event, RunState, RunStatus, RunSummary
from vftui.text.wording import LOADING_LIBRARIES

if TYPE_CHECKING:
    from vftui.collector.run import PreparedRun


class Host(Protocol):
    """What differs between the processes a run lives in."""

    def prepared(self, run: PreparedRun) -> None:
        """Right after ``prepare``: from now on a stop stops the run instead of undoing its preparation."""

    def while_running(self, run: PreparedRun) -> AbstractContextManager[None]:
        """Around ``execute``, the libraries' output in the run's log: who answers stops and controls."""

    def say(self, line: str) -> None:
        """A line for the user: why a second stop the run did not obey in time ended the process."""


def run_to_end(config: RunConfig, sink: Callable[[Event], None], host: Host) -> RunSummary | None:
    """The run prepared, executed and closed, its events into ``sink``; what ``prepare`` raises (a refusal, a
    stop that interrupted it) is raised. None when ``host.while_running`` took a crash of ``execute``."""
    sink(RunStatus(RunState.STARTING, 0, config.groups_hint, LOADING_LIBRARIES))
    early = captured.capture(tempfile.TemporaryFile("w+"))  # noqa: SIM115 - until the log file is known
    with _no_collection_while_loading():
        from vftui.collector import scoring_limit
        from vftui.collector.run import prepare

        run = prepare(config, sink)  # a refusal undoes itself
    log_path = summary = None
    try:
        host.prepared(run)
        log_path = captured.switch_to_log(run.plan.files, early, sink)
        with scoring_limit.limit.may_end_process(host.say), host.while_running(run):
            summary = asyncio.run(run.execute())
    finally:
        run.close()
        if log_path is not None:
            captured.remove_if_empty(log_path)
    return summary


@contextlib.contextmanager
def _no_collection_while_loading() -> Iterator[None]:
    """The libraries a run loads are millions of objects that live as long as the process: the cyclic collector
    scanned them all each time they grew by a quarter (0.4-0.6 s of a start, finding next to nothing). Paused
    while they load, they are then frozen out of every later collection, the run's included."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was_enabled:
            gc.enable()
