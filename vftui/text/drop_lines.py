"""Groups left out, said once and then a line at a time for many: rl leaves out every group of
identical scores, and a line each flooded the log (the health screen and the summary keep counts)."""

from __future__ import annotations

import collections
import math
from dataclasses import dataclass, field

from vftui.events import GroupDropped
from vftui.text.wording import counted, dropped

EVERY_S = 10.0  # after a line about drops, the next comes no sooner than this
ITEMS_SHOWN = 5


@dataclass
class DropLines:
    """A drop is said at once after a quiet spell; the ones that follow sooner, together, later."""

    every_s: float = EVERY_S
    reasons: collections.Counter[str] = field(default_factory=collections.Counter)
    items: list[int] = field(default_factory=list)
    said_at: float = -math.inf

    def add(self, drop: GroupDropped, now: float) -> str | None:
        if not self.items and now - self.said_at >= self.every_s:
            self.said_at = now
            return dropped(drop)
        self.reasons[drop.reason] += 1
        self.items.append(drop.item)
        return self.due(now)

    def due(self, now: float) -> str | None:
        """The line owed by now, if any."""
        if self.items and now - self.said_at >= self.every_s:
            self.said_at = now
            return self.flush()
        return None

    def flush(self) -> str | None:
        """The drops not yet said, as one line (None: there are none)."""
        if not self.items:
            return None
        shown = ", ".join(map(str, self.items[:ITEMS_SHOWN])) + (
            ", …" if len(self.items) > ITEMS_SHOWN else ""
        )
        why = "; ".join(f"{n} {reason}" for reason, n in self.reasons.most_common())
        line = f"{counted(len(self.items), 'more group')} left out (items {shown}): {why}"
        self.reasons.clear()
        self.items.clear()
        return line
