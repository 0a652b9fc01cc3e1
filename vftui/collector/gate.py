"""GroupGate: which groups may start, counted as they leave; the collector's side of pause and stop.

The collector claims a slot before each group and gives it back when the group is written or
given up; a held gate (pause) starts none and says so once those in flight have finished, a
closed one (stop) starts none again. ``Controls`` holds and closes it from other threads: it
takes ``lock`` to make a refusal and the change it guards one step, and calls what ``hold``,
``release`` and ``close`` return once it has let go (views hear of it, the collector wakes).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

from vftui.events import Event, RunState, RunStatus

Announce = Callable[[], None]


def _finishing(groups: int) -> str:
    """The status detail while groups in flight are finished before a pause or a stop."""
    return f"finishing {groups} group{'s' if groups != 1 else ''} in flight"


def _nothing() -> None:
    return None


class GroupGate:
    def __init__(self, groups_total: int, groups_done: int, emit: Callable[[Event], None]) -> None:
        self.lock = threading.Lock()
        self.groups_total = groups_total
        self.groups_done = groups_done
        self._emit = emit
        self._held = False
        self._closed = False
        self._in_flight = 0
        self._said_held = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._on_force_stop: Callable[[], None] | None = None

    @property
    def held(self) -> bool:
        return self._held

    @property
    def stopping(self) -> bool:
        return self._closed

    @property
    def in_flight(self) -> int:
        return self._in_flight

    # -- pause and stop: called under ``lock``; what they return is called after it ---------------

    def hold(self) -> Announce:
        """No new group starts; those in flight finish and are kept."""
        if self._held or self._closed:
            return _nothing
        self._held, self._said_held = True, False
        in_flight = self._in_flight

        def announce() -> None:
            if in_flight:
                self._status(RunState.PAUSING, _finishing(in_flight))
            else:
                self._announce_held()
            self._wake_collector()

        return announce

    def release(self) -> Announce:
        if not self._held:
            return _nothing
        self._held = False

        def announce() -> None:
            if not self._closed:
                self._status(RunState.RUNNING)
            self._wake_collector()

        return announce

    def close(self) -> Announce:
        """For good: no new group starts; those in flight finish (unless ``force_stop``)."""
        if self._closed:
            return _nothing
        self._closed = True

        def announce() -> None:
            self._status(RunState.STOPPING, _finishing(self._in_flight) if self._in_flight else "")
            self._wake_collector()

        return announce

    def force_stop(self) -> None:
        """Cancel the groups in flight, as ``bind`` was told to, from any thread."""
        if self._on_force_stop is not None:
            self._on_force_stop()

    # -- the collector's side -----------------------------------------------------------------------

    def bind(self, loop: asyncio.AbstractEventLoop, on_force_stop: Callable[[], None]) -> None:
        """``on_force_stop`` is called on the thread of the second stop: it must be thread-safe."""
        self._loop = loop
        self._wake = asyncio.Event()
        self._on_force_stop = on_force_stop

    async def claim_group(self) -> bool:
        """Wait while held, then claim a slot for a new group; False once none is left.

        Claiming as the item is handed out (not when its group starts) keeps a pool that
        starts many groups from asking for more items than there are groups left.
        """
        while True:
            with self.lock:
                if self._no_group_left():
                    return False
                if not self._held:
                    self._in_flight += 1
                    return True
                settled = self._in_flight == 0
            if settled:
                self._announce_held()
            await self._wait_for_change()

    def begin_group(self) -> bool:
        """Claim a slot for a group collected again; False when none is left.

        atroposlib's serve loop restarts groups it cancelled (its backlog) without asking
        for a new item, so their slot is claimed here rather than in ``claim_group``.
        """
        with self.lock:
            if self._no_group_left():
                return False
            self._in_flight += 1
            return True

    def _no_group_left(self) -> bool:
        """Under the lock: closed, or every remaining group is done or under way."""
        return self._closed or self.groups_done + self._in_flight >= self.groups_total

    async def wait_finished(self, poll_s: float = 0.2) -> None:
        """Until every group is collected, or the gate closed, with nothing in flight."""
        while True:
            with self.lock:
                if (self._closed or self.groups_done >= self.groups_total) and self._in_flight == 0:
                    return
            await asyncio.sleep(poll_s)

    def group_finished(self, written: bool) -> None:
        """A group left the flight; while pausing or stopping, say how many are left."""
        with self.lock:
            self._in_flight -= 1
            if written:
                self.groups_done += 1
            left, held, closed = self._in_flight, self._held, self._closed
        if closed and left:
            self._status(RunState.STOPPING, _finishing(left))
        elif held and not closed:
            self._status(RunState.PAUSING, _finishing(left)) if left else self._announce_held()

    async def sleep(self, seconds: float) -> None:
        """Sleep that closing the gate cuts short."""
        deadline = time.monotonic() + seconds
        while not self._closed and (left := deadline - time.monotonic()) > 0:
            try:
                await asyncio.wait_for(self._wait_for_change(), timeout=left)
            except TimeoutError:
                return

    async def _wait_for_change(self) -> None:
        assert self._wake is not None, "GroupGate.bind() was not called"
        await self._wake.wait()
        self._wake.clear()

    def _wake_collector(self) -> None:
        if self._loop is not None and self._wake is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._wake.set)

    def _announce_held(self) -> None:
        with self.lock:
            if self._said_held:
                return
            self._said_held = True
        self._status(RunState.PAUSED)

    def _status(self, state: RunState, detail: str = "") -> None:
        self._emit(RunStatus(state, self.groups_done, self.groups_total, detail))
