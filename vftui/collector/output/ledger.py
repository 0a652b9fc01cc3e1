"""Which dataset items a run has written, when groups finish out of order.

With many groups in flight, "the position in the dataset" no longer says what is done:
item 12 can be written while 9 and 11 are still being collected. The ledger keeps the
set of written items (a watermark below which all are done, plus the few above it) and
hands out items to collect: first those below the next new item that are not done (in
flight when a previous run died or was cancelled), then new ones. So a resumed run
collects again exactly what was lost and never writes an item twice.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from typing import Any


class ItemLedger:
    def __init__(self, done: Iterable[int] = (), next_item: int = 0) -> None:
        done_set = set(done)
        self.next_item = max([next_item, *(i + 1 for i in done_set)])
        self._done_below = 0
        self._done_above: set[int] = set()
        self._todo = [i for i in range(self.next_item) if i not in done_set]
        heapq.heapify(self._todo)
        for item in done_set:
            self.mark_done(item)

    @property
    def lost(self) -> list[int]:
        """Items before ``next_item`` that are still to be collected again, in order."""
        return sorted(self._todo)

    def take(self) -> int:
        """The next item to collect: the oldest one lost, else a new one."""
        if self._todo:
            return heapq.heappop(self._todo)
        item = self.next_item
        self.next_item += 1
        return item

    def mark_done(self, item: int) -> None:
        if item < self._done_below:
            return
        self._done_above.add(item)
        while self._done_below in self._done_above:
            self._done_above.remove(self._done_below)
            self._done_below += 1

    @staticmethod
    def done_in(saved: dict[str, Any]) -> list[int]:
        """The items a checkpoint written by ``to_json`` records as done."""
        return [*range(int(saved.get("done_below", 0))), *map(int, saved.get("done_above", []))]

    def to_json(self) -> dict[str, Any]:
        """For the checkpoint: every item below ``done_below`` is done (written, or dropped), and those in
        ``done_above``."""
        return {"done_below": self._done_below, "done_above": sorted(self._done_above)}
