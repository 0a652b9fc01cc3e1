"""Events on their way from the collector (a pipe's reader thread) to the app's thread.

Groups are compacted (``GroupCollected.compacted``) on the sending side, so the UI thread
only folds ready events.
"""

from __future__ import annotations

import queue

from vftui.events import Event, GroupCollected

# Views drain their inbox and repaint once a second, however fast events come: over SSH every
# repaint costs bytes. Keys do not wait for a tick: their effect is shown at once.
TICK_S = 1.0


class Inbox:
    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[Event] = queue.SimpleQueue()

    def put(self, event: Event) -> None:
        """Thread-safe; called for every event of the run."""
        self._queue.put(event.compacted() if isinstance(event, GroupCollected) else event)

    def drain(self, limit: int) -> list[Event]:
        """Up to ``limit`` waiting events, without blocking."""
        batch: list[Event] = []
        while len(batch) < limit:
            try:
                batch.append(self._queue.get_nowait())
            except queue.Empty:
                break
        return batch
