"""What the dashboard shows, folded from events: plain Python, no Textual.

The app applies batches of events here at a fixed rate and the widgets render from it,
so the collector can produce faster than the screen repaints without anything queuing
up. Memory is bounded by the window of recent groups; totals cover the whole run.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from vftui import stats
from vftui.events import (
    EndpointTrouble,
    Event,
    GroupCollected,
    GroupsDumped,
    LogRecord,
    RunStarted,
    RunState,
    RunStatus,
    RunSummary,
    TemperatureChanged,
)

HISTORY = 240
LOG_LINES = 500


@dataclass
class DashboardModel:
    window: int = 256
    identical_alert: float = 0.5
    clock: Callable[[], float] = field(default=time.monotonic)
    started: RunStarted | None = None
    state: RunState = RunState.STARTING
    detail: str = ""
    temperature: float | None = None
    groups_done: int = 0
    groups_total: int = 0
    summary: RunSummary | None = None
    trouble: EndpointTrouble | None = None
    last_dump: GroupsDumped | None = None
    totals: stats.Accumulator = field(default_factory=stats.Accumulator)
    groups: collections.deque = field(init=False)
    reward_history: collections.deque = field(init=False)
    identical_history: collections.deque = field(init=False)
    logs: collections.deque = field(init=False)
    tokens_total: int = 0
    logs_total: int = 0
    version: int = 0
    _t0: float | None = None
    _first_done: int = 0
    _rate_marks: collections.deque = field(init=False)

    def __post_init__(self) -> None:
        self.groups = collections.deque(maxlen=self.window)
        self.reward_history = collections.deque(maxlen=HISTORY)
        self.identical_history = collections.deque(maxlen=HISTORY)
        self.logs = collections.deque(maxlen=LOG_LINES)
        self._rate_marks = collections.deque(maxlen=64)

    # -- folding events -------------------------------------------------------------------

    def apply(self, events: list[Event]) -> bool:
        """Fold a batch; True if anything visible changed."""
        for event in events:
            self._apply(event)
        if events:
            self.version += 1
        return bool(events)

    def _apply(self, event: Event) -> None:
        if isinstance(event, GroupCollected):
            self.groups.append(event)
            self.totals.add(event)
            self.reward_history.append(stats.mean(event.scores))
            self.identical_history.append(1.0 if event.identical else 0.0)
            self.groups_done = max(self.groups_done, event.index)
            self.tokens_total += sum(len(t) for t in event.tokens)
            self._rate_marks.append((self.clock(), event.index, self.tokens_total))
            self.trouble = None
        elif isinstance(event, RunStarted):
            self.started, self.temperature = event, event.temperature
            self.groups_total, self.groups_done = event.groups_total, event.groups_done
            self._t0, self._first_done = self.clock(), event.groups_done
        elif isinstance(event, RunStatus):
            if event.state is not self.state:
                self.log(LogRecord("INFO", "run", f"run {event.state.value}" + (f": {event.detail}" if event.detail else "")))
            self.state, self.detail = event.state, event.detail
            self.groups_total = event.groups_total or self.groups_total
        elif isinstance(event, TemperatureChanged):
            self.temperature = event.temperature
        elif isinstance(event, EndpointTrouble):
            self.trouble = event
            self.log(LogRecord("WARNING", "endpoint", f"endpoint error, attempt {event.attempt}/{event.max_attempts}: "
                               f"{event.error}; retrying in {event.retry_in_s:.1f} s"))
        elif isinstance(event, GroupsDumped):
            self.last_dump = event
            self.log(LogRecord("INFO", "run", f"dumped {event.groups} groups to {event.path}"))
        elif isinstance(event, LogRecord):
            self.log(event)
        elif isinstance(event, RunSummary):
            self.summary, self.state, self.detail = event, event.state, event.error
            self.groups_done = event.groups_done

    def log(self, record: LogRecord) -> None:
        self.logs.append(record)
        self.logs_total += 1

    # -- derived values ---------------------------------------------------------------------

    @property
    def elapsed_s(self) -> float:
        if self._t0 is None:
            return 0.0
        if self.summary is not None:
            return self.summary.elapsed_s
        return self.clock() - self._t0

    def rates(self) -> tuple[float, float]:
        """(groups/s, tokens/s) over the last few dozen groups."""
        if len(self._rate_marks) < 2:
            return 0.0, 0.0
        (t0, g0, k0), (t1, g1, k1) = self._rate_marks[0], self._rate_marks[-1]
        span = t1 - t0
        interval = span / max(1, len(self._rate_marks) - 1)
        idle = self.clock() - t1 > max(2.0, 5 * interval)
        if self.state is RunState.PAUSED or (idle and self.state not in (RunState.FINISHED, RunState.FAILED)):
            return 0.0, 0.0
        return ((g1 - g0) / span, (k1 - k0) / span) if span > 0 else (0.0, 0.0)

    def window_metrics(self) -> dict[str, float]:
        return stats.metrics_of(self.groups)

    def run_metrics(self) -> dict[str, float]:
        return self.totals.metrics()

    def identical_rates(self) -> tuple[float, float]:
        window = self.window_metrics().get("metrics/identical_score_rate", 0.0)
        run = self.run_metrics().get("metrics/identical_score_rate", 0.0)
        return window, run

    def turn_histogram(self) -> list[tuple[int, int]]:
        counts = collections.Counter(t for g in self.groups for t in g.turns)
        return sorted(counts.items())

    def reward_function_rows(self) -> list[tuple[str, float | None, float | None]]:
        window, run = self.window_metrics(), self.run_metrics()
        names = []
        if self.started is not None:
            names.extend(self.started.reward_functions)
        for key in list(window) + list(run):
            name = key.removeprefix("metrics/")
            if name not in names and name in self._metric_names():
                names.append(name)
        return [(n, window.get(f"metrics/{n}"), run.get(f"metrics/{n}")) for n in names]

    def _metric_names(self) -> set[str]:
        return set(self.totals.per_metric)
