"""What the env adds to its wandb rows, and the wandb run it starts where atroposlib's serve loop does not.

The env holds one ``WandbWindow`` (``VerifiersEnv.wandb_window``): the verifiers figures of the groups
since its last row (the reference's metrics), the run's health beside them, and the rows of their
own that evals need (``wandb_rows``), each logged beside one of the env's.
"""

from __future__ import annotations

import random
import string
from collections.abc import Callable
from datetime import datetime
from typing import Any

from vftui import stats
from vftui.collector.wandb_rows import OwnRows
from vftui.events import Event, GroupCollected, GroupDropped, MetricsWindow


class WandbWindow:
    def __init__(
        self, emit: Callable[[Event], None], health_metrics: Callable[[], dict[str, float]]
    ) -> None:
        self._emit = emit
        self._health_metrics = health_metrics
        self._window = stats.Accumulator()
        self._rows = OwnRows()

    def add(self, group: GroupCollected | GroupDropped) -> None:
        self._window.add(group)

    def metrics(self, step: int) -> dict[str, float]:
        """The figures for the env's row at ``step``: its window's (announced as a ``MetricsWindow``),
        then the run's health; the next window starts empty."""
        figures: dict[str, float] = {}
        window = self._window.metrics()
        self._window = stats.Accumulator()
        if window:
            figures.update(window)
            self._emit(MetricsWindow(step, window))
        figures.update(self._health_metrics())
        return figures

    def own_row(self, figures: dict[str, float]) -> None:
        """``figures`` in a wandb row of their own, with the env's next row."""
        self._rows.add(figures)

    def after_row(self, step: int) -> None:
        """The env logged its row at ``step``: a waiting row of ours beside it."""
        if (row := self._rows.take(step)) is not None:
            _log(row, step)

    def rows_left(self, step: int) -> None:
        """The env logs no more (its last row at ``step``): every waiting row, each at a step of its own."""
        for at, row in self._rows.rest(step):
            _log(row, at)


def _log(figures: dict[str, float], step: int) -> None:
    import wandb

    if wandb.run is not None:  # under the names given, not atroposlib's prefixed ones
        wandb.log(figures, step=step)


def start_run(name: str, project: str | None, group: str | None, config: dict[str, Any]) -> None:
    """wandb as atroposlib's process manager starts it: one run named after the env and the date."""
    import wandb

    suffix = "".join(random.choices(string.ascii_lowercase, k=6))
    wandb.init(
        project=project,
        name=f"{name}-{datetime.now():%Y-%m-%d}-{suffix}",
        group=group,
        config=config,
    )
