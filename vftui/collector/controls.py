"""Controls: everything a key can do to a run, callable from any thread.

The collector runs on its own asyncio loop; a view (Textual app, signal handler, test)
calls these methods from wherever it lives. State changes are guarded by a lock and the
collector is woken with ``call_soon_threadsafe``. Once the run has ended, pause, temperature
and stop are refused with ``RunEnded`` (every view, in the process or over a socket, gets the
same sentence); a dump still works.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import threading
import time
from collections.abc import Callable
from pathlib import Path

from vftui.errors import RunEnded
from vftui.events import (
    MAX_TEMPERATURE,
    MIN_TEMPERATURE,
    Event,
    GroupsDumped,
    RunState,
    RunStatus,
    TemperatureChanged,
    checked_temperature,
)
from vftui.run_files.files import RunFiles
from vftui.run_files.store import GroupWindow
from vftui.text import wording

logger = logging.getLogger(__name__)


def finishing(groups: int) -> str:
    """The status detail while groups in flight are finished before a pause or a stop."""
    return f"finishing {groups} group{'s' if groups != 1 else ''} in flight"


class Controls:
    def __init__(
        self,
        temperature: float,
        window: GroupWindow,
        files: RunFiles,
        emit: Callable[[Event], None],
        groups_total: int,
        stop_grace_s: float = math.inf,
    ) -> None:
        """``stop_grace_s``: how long a stop waits for the groups in flight before it cancels them."""
        self._lock = threading.Lock()
        self._temperature = temperature
        self._window = window
        self._files = files
        self._emit = emit
        self._paused = False
        self._stop_requested = False
        self._in_flight = 0
        self._said_paused = False
        self.groups_done = 0
        self.groups_total = groups_total
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._on_force_stop: Callable[[], None] | None = None
        self._stop_grace_s = stop_grace_s
        self._grace: threading.Timer | None = None
        self._ended = ""  # once the run has ended: "finished", "stopped" or "failed"

    # -- the view's side ------------------------------------------------------------

    @property
    def temperature(self) -> float:
        return self._temperature

    @property
    def paused(self) -> bool:
        return self._paused

    @property
    def stop_requested(self) -> bool:
        return self._stop_requested

    @property
    def groups_in_flight(self) -> int:
        return self._in_flight

    def pause(self) -> None:
        """No new group starts; groups in flight finish and are kept."""
        with self._lock:
            self._refuse_once_ended("there is nothing to pause")
            if self._paused or self._stop_requested:
                return
            self._paused, self._said_paused = True, False
            in_flight = self._in_flight
        if in_flight:
            self._status(RunState.PAUSING, finishing(in_flight))
        else:
            self._announce_paused()
        self._wake_collector()

    def resume(self) -> None:
        with self._lock:
            self._refuse_once_ended("there is nothing to resume")
            if not self._paused:
                return
            self._paused = False
        if not self._stop_requested:
            self._status(RunState.RUNNING)
        self._wake_collector()

    def toggle_pause(self) -> None:
        self.resume() if self._paused else self.pause()

    def set_temperature(self, value: float) -> float:
        """Applies to groups started from now on; out of range is a ValueError."""
        value = checked_temperature(value)
        with self._lock:
            self._refuse_once_ended("no group will be sampled at another temperature")
            self._temperature = value
        self._emit(TemperatureChanged(value))
        return value

    def nudge_temperature(self, delta: float) -> float:
        """Raise or lower by ``delta``, clamped to the range."""
        target = min(MAX_TEMPERATURE, max(MIN_TEMPERATURE, self._temperature + delta))
        return self.set_temperature(target)

    def dump(self, path: Path | None = None) -> Path:
        """Write the groups in the in-memory window to a new jsonl; returns its path."""
        if path is None:
            path = self._files.dump_path(time.time())
        written, count = self._window.dump(Path(path))
        self._emit(GroupsDumped(str(written), count))
        return written

    def stop(self) -> None:
        """Graceful: no new group starts, those in flight finish (given ``stop_grace_s`` at most), files are
        flushed. Twice: cancel them (``bind``'s ``on_force_stop``)."""
        with self._lock:
            self._refuse_once_ended("there is nothing to stop")
            again = self._stop_requested
            self._stop_requested = True
            if not again and math.isfinite(self._stop_grace_s):
                self._grace = threading.Timer(self._stop_grace_s, self._grace_over)
                self._grace.daemon = True
                self._grace.start()
        if again:
            if self._on_force_stop is not None:
                self._on_force_stop()
            return
        self._status(RunState.STOPPING, finishing(self._in_flight) if self._in_flight else "")
        self._wake_collector()

    def _grace_over(self) -> None:
        """The groups in flight had their time: a stop that waited for them longer would wait on reward code."""
        with self._lock:
            if self._ended:
                return
        logger.warning(
            "the groups in flight did not finish within %g s of the stop (--score-timeout): cancelling "
            "them (--resume collects them again)",
            self._stop_grace_s,
        )
        with contextlib.suppress(RunEnded):  # it ended meanwhile
            self.stop()

    def _refuse_once_ended(self, why: str) -> None:
        """Under the lock: a run that has ended is not steered."""
        if self._ended:
            raise RunEnded(f"the run has {self._ended}, so {why}")

    # -- the collector's side ---------------------------------------------------------

    def bind(self, loop: asyncio.AbstractEventLoop, on_force_stop: Callable[[], None]) -> None:
        """``on_force_stop`` is called by the second stop on the thread that made it: it must be thread-safe."""
        self._loop = loop
        self._wake = asyncio.Event()
        self._on_force_stop = on_force_stop

    def end(self, state: RunState) -> None:
        """The run has ended in ``state``: from now on pause, temperature and stop are refused."""
        with self._lock:
            self._ended = wording.ended_as(state, self.groups_done, self.groups_total)
            if self._grace is not None:
                self._grace.cancel()

    async def claim_group(self) -> bool:
        """Wait while paused, then claim a slot for a new group; False once none is left.

        Claiming as the item is handed out (not when its group starts) keeps a pool that
        starts many groups from asking for more items than there are groups left.
        """
        while True:
            with self._lock:
                if self._no_group_left():
                    return False
                if not self._paused:
                    self._in_flight += 1
                    return True
                settled = self._in_flight == 0
            if settled:
                self._announce_paused()
            await self._wait_for_change()

    def begin_group(self) -> bool:
        """Claim a slot for a group collected again; False when none is left.

        atroposlib's serve loop restarts groups it cancelled (its backlog) without asking
        for a new item, so their slot is claimed here rather than in ``claim_group``.
        """
        with self._lock:
            if self._no_group_left():
                return False
            self._in_flight += 1
            return True

    def _no_group_left(self) -> bool:
        """Under the lock: stopping, or every remaining group is done or under way."""
        return self._stop_requested or self.groups_done + self._in_flight >= self.groups_total

    async def wait_finished(self, poll_s: float = 0.2) -> None:
        """Until every group is collected, or a stop was requested, with nothing in flight."""
        while True:
            with self._lock:
                if (
                    self._stop_requested or self.groups_done >= self.groups_total
                ) and self._in_flight == 0:
                    return
            await asyncio.sleep(poll_s)

    def group_finished(self, written: bool) -> None:
        """A group left the flight; while pausing or stopping, say how many are left."""
        with self._lock:
            self._in_flight -= 1
            if written:
                self.groups_done += 1
            left, paused, stopping = self._in_flight, self._paused, self._stop_requested
        if stopping and left:
            self._status(RunState.STOPPING, finishing(left))
        elif paused and not stopping:
            self._status(RunState.PAUSING, finishing(left)) if left else self._announce_paused()

    async def sleep(self, seconds: float) -> None:
        """Sleep that a stop request cuts short."""
        deadline = time.monotonic() + seconds
        while not self._stop_requested and (left := deadline - time.monotonic()) > 0:
            try:
                await asyncio.wait_for(self._wait_for_change(), timeout=left)
            except TimeoutError:
                return

    async def _wait_for_change(self) -> None:
        assert self._wake is not None, "Controls.bind() was not called"
        await self._wake.wait()
        self._wake.clear()

    def _wake_collector(self) -> None:
        if self._loop is not None and self._wake is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._wake.set)

    def _announce_paused(self) -> None:
        with self._lock:
            if self._said_paused:
                return
            self._said_paused = True
        self._status(RunState.PAUSED)

    def _status(self, state: RunState, detail: str = "") -> None:
        self._emit(RunStatus(state, self.groups_done, self.groups_total, detail))
