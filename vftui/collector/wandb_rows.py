"""Rows of figures that each need a wandb row of their own (an eval's), logged with the env's own rows.

wandb keeps one row a step: what is logged again at a step is merged into its row (a second eval
finishing before the env's next step overwrote the first one's figures), and what is logged below
its last step is dropped (so a row of ours at a later step would drop atroposlib's next rows). So
each waiting row joins the env's next row at a step no row of ours took yet.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator


class OwnRows:
    def __init__(self) -> None:
        self._waiting: deque[dict[str, float]] = deque()
        self._last_step = -1

    def add(self, figures: dict[str, float]) -> None:
        self._waiting.append(figures)

    def take(self, step: int) -> dict[str, float] | None:
        """The row to log beside the env's row at ``step``: the oldest waiting, at most one a step."""
        if not self._waiting or step <= self._last_step:
            return None
        self._last_step = step
        return self._waiting.popleft()

    def rest(self, step: int) -> Iterator[tuple[int, dict[str, float]]]:
        """Once the env logs no more (its last row at ``step``): each waiting row at a step of its own after it."""
        while self._waiting:
            self._last_step = max(step, self._last_step) + 1
            yield self._last_step, self._waiting.popleft()
