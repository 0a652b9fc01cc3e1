"""Events on their way from the collector (a pipe's reader thread) to the app's thread.

Groups are compacted (``GroupCollected.compacted``) on the sending side, so the UI thread
only folds ready events.
"""

from __future__ import annotations

import queue
from collections.abc import Callable

from vftui.events import Event, GroupCollected, RunStarted, RunStatus, RunSummary

# Views drain their inbox and repaint once a second, however fast events come: over SSH every
# repaint costs bytes. Keys do not wait for a tick: their effect is shown at once.
TICK_S = 1.0
URGENT = (
    RunStarted,
    RunStatus,
    RunSummary,
)  # what the run is doing now: shown at once, not at the next tick


class Inbox:
    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[Event] = queue.SimpleQueue()
        self.wake: Callable[[], None] | None = (
            None  # set by the view: asks for a tick before the next one
        )
        self._first_group = True

    def put(self, event: Event) -> None:
        """Thread-safe; called for every event of the run. A change of the run's state, and its first group,
        wake the view rather than wait up to a tick."""
        urgent = isinstance(event, URGENT)
        if isinstance(event, GroupCollected):
            urgent, self._first_group = self._first_group, False
            event = event.compacted()
        self._queue.put(event)
        if urgent and self.wake is not None:
            self.wake()

    def drain(self, limit: int) -> list[Event]:
        """Up to ``limit`` waiting events, without blocking."""
        batch: list[Event] = []
        while len(batch) < limit:
            try:
                batch.append(self._queue.get_nowait())
            except queue.Empty:
                break
        return batch
