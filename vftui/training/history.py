"""A training run's metrics by step, bounded: the last ``window`` steps of each name, and its early level.

Memory grows with the number of names and the window, never with the run's length. A point at a
step the series already passed means the run resumed from a checkpoint and logs those steps again:
every series' points from that step on are dropped for the new ones (the trainer's too, though
its first row after the resume may come later: a resumed run is not still at its old last step).
"""

from __future__ import annotations

import collections
import statistics
from dataclasses import dataclass, field

from vftui.training.metrics_file import Row

WINDOW = 1000  # steps kept of each name
EARLY_STEPS = 10  # steps that make a name's early level (entropy against its own start)
MAX_NAMES = 5000  # names beyond this are counted, not kept


@dataclass
class Series:
    points: collections.deque[tuple[int, float]]
    early: list[float] = field(default_factory=list)  # the first EARLY_STEPS values


class History:
    def __init__(self, window: int = WINDOW) -> None:
        self.window = window
        self.series: dict[str, Series] = {}
        self.names_over = 0
        self.resumed_at: list[int] = []  # steps a resume went back to
        self.last_time: float | None = None  # the newest row's wall time
        self.step_times: dict[
            str, collections.deque[tuple[int, float]]
        ] = {}  # per side: a new step's time
        self.rows = 0

    def add(self, row: Row, who: str = "") -> None:
        self.rows += 1
        if any(
            (series := self.series.get(name)) and series.points and row.step < series.points[-1][0]
            for name in row.values
        ):
            self._went_back(row.step)
        if row.time is not None:
            self.last_time = row.time if self.last_time is None else max(self.last_time, row.time)
            times = self.step_times.setdefault(who, collections.deque(maxlen=64))
            if not times or row.step > times[-1][0]:
                times.append((row.step, row.time))
            elif row.step < times[-1][0]:
                while times and times[-1][0] >= row.step:
                    times.pop()
                times.append((row.step, row.time))
        for name, value in row.values.items():
            series = self.series.get(name)
            if series is None:
                if len(self.series) >= MAX_NAMES:
                    self.names_over += 1
                    continue
                series = self.series[name] = Series(collections.deque(maxlen=self.window))
            points = series.points
            while points and points[-1][0] >= row.step:  # the same step logged again
                points.pop()
            points.append((row.step, value))
            if len(series.early) < EARLY_STEPS:
                series.early.append(value)

    def _went_back(self, step: int) -> None:
        """A resume to ``step``: what every series holds from it on is logged again."""
        if not self.resumed_at or self.resumed_at[-1] != step:
            self.resumed_at.append(step)
        for series in self.series.values():
            while series.points and series.points[-1][0] >= step:
                series.points.pop()

    @property
    def step(self) -> int | None:
        """The newest step any row reached (the orchestrator's, usually: it runs ahead)."""
        steps = [s.points[-1][0] for s in self.series.values() if s.points]
        return max(steps) if steps else None

    def trainer_step(self) -> int | None:
        """The newest step the trainer finished (its rows), else the newest step of any row."""
        for name in ("time/step (trainer)", "optim/lr", "optim/grad_norm", "entropy/all/mean"):
            if (found := self.latest(name)) is not None:
                return found[0]
        return self.step

    def names(self) -> list[str]:
        return sorted(self.series)

    def latest(self, name: str) -> tuple[int, float] | None:
        series = self.series.get(name)
        return series.points[-1] if series and series.points else None

    def value(self, name: str) -> float | None:
        found = self.latest(name)
        return None if found is None else found[1]

    def values(self, name: str, last: int | None = None) -> list[float]:
        series = self.series.get(name)
        if not series:
            return []
        points = list(series.points)[-last:] if last else series.points
        return [v for _, v in points]

    def points(self, name: str) -> list[tuple[int, float]]:
        series = self.series.get(name)
        return list(series.points) if series else []

    def early(self, name: str) -> float | None:
        """The median of the name's first ``EARLY_STEPS`` values, once it has them all."""
        series = self.series.get(name)
        if not series or len(series.early) < EARLY_STEPS:
            return None
        return statistics.median(series.early)

    def usual_step_s(self) -> float | None:
        """The median wall time between consecutive steps of the side that logged most steps."""
        best: list[float] = []
        for times in self.step_times.values():
            gaps = [
                b[1] - a[1]
                for a, b in zip(times, list(times)[1:], strict=False)
                if b[0] > a[0] and b[1] >= a[1]
            ]
            if len(gaps) > len(best):
                best = gaps
        return statistics.median(best) if len(best) >= 3 else None

    def first(self, *names: str) -> str | None:
        """The first of ``names`` this run logs (prime-rl's names vary with agents and envs)."""
        return next((n for n in names if n in self.series), None)

    def matching(self, prefix: str, suffix: str) -> str | None:
        """The first name (sorted) with ``prefix`` and ``suffix``: ``train/agg/effective/<agent>/reward/mean``."""
        return next(
            (n for n in sorted(self.series) if n.startswith(prefix) and n.endswith(suffix)), None
        )
