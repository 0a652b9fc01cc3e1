"""Which dataset items a run has written, when groups finish out of order.

With many groups in flight, "the position in the dataset" no longer says what is done:
item 12 can be written while 9 and 11 are still being collected. The ledger keeps the
set of written items (a watermark below which all are done, plus the few above it) and
hands out items to collect: first those below the next new item that are not done (in
flight when a previous run died or was cancelled), then new ones. So a resumed run
collects again exactly what was lost and never writes an item twice.

A sharded run's ledger counts positions in its shard (``shards.Shard.item`` makes them dataset
items), so its items too are a watermark and a few above it. An eval's ledger has an ``end``: it
collects the items below it, each once, and never hands out one past it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


class ItemLedger:
    """Nothing here grows with the item numbers: a resumed run's lost items are found by walking from the
    watermark when they are taken, never listed, so a checkpoint's ``iter`` costs no memory."""

    def __init__(
        self, done_below: int = 0, done_above: Iterable[int] = (), next_item: int = 0
    ) -> None:
        above = {item for item in done_above if item >= done_below}
        self.next_item = max(next_item, done_below, max(above, default=-1) + 1)
        self.end: int | None = None  # an eval's range: no item at or past it is handed out
        self._done_below = done_below
        self._done_above: set[int] = set()
        self._lost_from, self._lost_end = (
            done_below,
            self.next_item,
        )  # not done in between: lost, taken first
        for item in above:
            self.mark_done(item)

    @property
    def lost(self) -> int:
        """How many items before ``next_item`` are still to be collected again."""
        start = max(self._lost_from, self._done_below)
        done = sum(1 for item in self._done_above if start <= item < self._lost_end)
        return max(0, self._lost_end - start - done)

    def take(self) -> int | None:
        """The next item to collect: the oldest one lost, else a new one; None when none is left below ``end``."""
        self._lost_from = max(self._lost_from, self._done_below)
        end = self._lost_end if self.end is None else min(self._lost_end, self.end)
        while self._lost_from < end:
            item = self._lost_from
            self._lost_from += 1
            if item not in self._done_above:
                return item
        if self.end is not None and self.next_item >= self.end:
            return None
        item = self.next_item
        self.next_item += 1
        return item

    def done_within(self, end: int) -> int:
        """How many of the items below ``end`` are done."""
        return min(self._done_below, end) + sum(1 for item in self._done_above if item < end)

    def mark_done(self, item: int) -> None:
        if item < self._done_below:
            return
        self._done_above.add(item)
        while self._done_below in self._done_above:
            self._done_above.remove(self._done_below)
            self._done_below += 1

    def to_json(self) -> dict[str, Any]:
        """For the checkpoint: every item below ``done_below`` is done (written, or dropped), and those in
        ``done_above``."""
        return {"done_below": self._done_below, "done_above": sorted(self._done_above)}
