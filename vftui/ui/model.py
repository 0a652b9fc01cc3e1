"""What the dashboard shows, folded from events: plain Python, no Textual.

The app applies batches of events here at a fixed rate and the widgets render from it,
so the collector can produce faster than the screen repaints without anything queuing
up. Memory is bounded by the window of recent groups; totals cover the whole run.
"""

from __future__ import annotations

import collections
import copy
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, assert_never

from vftui import events as ev
from vftui import stats
from vftui.figures.group_filter import Search, Shown, in_messages, parse_filter
from vftui.figures.series import Series
from vftui.text import wording
from vftui.text.drop_lines import DropLines
from vftui.text.printable import printable, with_texts

if TYPE_CHECKING:
    from vftui.run_files.groupfile import GroupFile

HISTORY = 240
LOG_LINES = 500
SORTS: dict[str, tuple[str, Callable[[Shown], float] | None]] = {
    "arrival": ("as collected", None),
    "mean": ("by mean, hardest first", lambda g: stats.mean(g.scores)),
    "min": ("by worst rollout first", lambda g: min(g.scores, default=0.0)),
    "spread": ("by spread, flakiest first", lambda g: -stats.population_std(g.scores)),
    "length": ("by length, longest first", lambda g: -g.completion_length),
    "time": ("by time, slowest first", lambda g: -g.elapsed_s),
}


def _among(found: dict[str, set[tuple[int, int]]]) -> Search:
    """A file's text search: the rows ``GroupFile.search`` found for each needle."""
    return lambda needle: lambda row: (row.part, row.offset) in found.get(needle, ())


@dataclass
class DashboardModel:
    window: int = 256
    identical_alert: float = 0.5
    clock: Callable[[], float] = field(
        default=time.time
    )  # stamps log lines; groups' end times are on it too
    monotonic: Callable[[], float] = field(default=time.monotonic)  # durations
    run_started: ev.RunStarted | None = None
    attached: bool = False  # a run that lives on its own (``vftui attach``): the header marks it
    pause_asked: bool = False  # paused while the run starts: said until the run says its own state
    state: ev.RunState = ev.RunState.STARTING
    detail: str = ""
    temperature: float | None = None
    # the last temperature the log said: the dashboard shows a key's change before the run's word on it
    temperature_said: float | None = None
    groups_done: int = 0
    groups_total: int = 0
    summary: ev.RunSummary | None = None
    endpoint_trouble: ev.EndpointTrouble | None = None
    trajectory_trouble: ev.EndpointTrouble | None = None
    api_status: ev.ApiStatus | None = None
    requests: ev.RequestStats | None = None
    servers: dict = field(default_factory=dict)  # rl: each inference server's ServerStatus, by URL
    health: ev.Health | None = None
    eval_report: ev.EvalReport | None = None  # eval mode: the figures so far; rl: the last eval's
    eval_curve: list = field(
        default_factory=list
    )  # rl with evals: (trainer step, mean reward) of each
    series: Series = field(default_factory=Series)  # the whole run, for the charts
    alerts: dict = field(default_factory=dict)  # the active ones, by name
    dropped: collections.Counter = field(default_factory=collections.Counter)
    totals: stats.Accumulator = field(default_factory=stats.Accumulator)
    in_window: stats.Accumulator = field(default_factory=stats.Accumulator)
    groups: collections.deque = field(init=False)
    scored: collections.deque = field(init=False)  # kept and dropped groups: what the figures count
    reward_history: collections.deque = field(init=False)
    identical_history: collections.deque = field(init=False)
    queue_history: collections.deque = field(init=False)
    logs: collections.deque = field(init=False)
    tokens_total: int = 0
    logs_total: int = 0
    drop_lines: DropLines = field(default_factory=DropLines)  # groups left out, a line for many
    version: int = 0
    rows: GroupFile | None = None  # a viewed file's rows, instead of ``groups``
    sort: str = "arrival"  # a key of SORTS: the table's order
    filter_text: str = ""
    _filter: Callable[[Shown], bool] | None = None
    _t0: float | None = None  # on ``monotonic``
    throughput: stats.Throughput = field(default_factory=stats.Throughput)
    _derived: dict = field(default_factory=dict)
    _derived_version: int = -1

    def __post_init__(self) -> None:
        self.groups = collections.deque(maxlen=self.window)
        self.scored = collections.deque(maxlen=self.window)
        self.reward_history = collections.deque(maxlen=HISTORY)
        self.identical_history = collections.deque(maxlen=HISTORY)
        self.queue_history = collections.deque(maxlen=HISTORY)
        self.logs = collections.deque(maxlen=LOG_LINES)

    # -- folding events -------------------------------------------------------------------

    def apply(self, events: list[ev.Event]) -> bool:
        """Fold a batch; True if anything visible changed."""
        for event in events:
            self._apply(with_texts(event, printable))  # nothing from outside drives the terminal
        owed = self.drop_lines.due(self.monotonic())
        if owed:
            self.note("WARNING", owed)
        if events or owed:
            self.version += 1
        return bool(events or owed)

    def _apply(self, event: ev.Event) -> None:  # noqa: C901 - one case per kind of event
        """Fold one event; every kind of event is named here."""
        match event:
            case ev.GroupCollected():
                self._apply_group(event)
            case ev.RunStarted():
                self.run_started, self.temperature = event, event.temperature
                self.temperature_said = event.temperature
                self.groups_total, self.groups_done = event.groups_total, event.groups_done
                already = (
                    max(0.0, self.clock() - event.started_at) if event.started_at else 0.0
                )  # attached late
                self._t0 = self.monotonic() - already
            case ev.RunStatus():
                next_step = (
                    event.state is ev.RunState.STARTING
                    and event.detail
                    and event.detail != self.detail
                )
                if (
                    event.state is not self.state or next_step
                ):  # each state, and each step of the preparation
                    self.note("INFO", wording.run_state(event.state, event.detail))
                self.state, self.detail = event.state, event.detail
                self.groups_total = event.groups_total or self.groups_total
                if event.state is not ev.RunState.STARTING:
                    self.pause_asked = False
            case ev.TemperatureChanged():
                if event.temperature != self.temperature_said:
                    self.note("INFO", wording.temperature_changed(event.temperature))
                self.temperature = self.temperature_said = event.temperature
            case ev.EndpointTrouble():
                if event.service == ev.TRAJECTORY_API:
                    self.trajectory_trouble = event
                else:
                    self.endpoint_trouble = event
                self.note("WARNING", wording.trouble(event))
            case ev.ApiStatus():
                self._apply_api(event)
            case ev.RequestStats():
                self.requests = event
            case ev.ServerStatus():
                self.servers[event.url] = event
                self.series.add_server(event)
            case ev.Health():
                self.health = event
            case ev.EvalReport():
                self.eval_report = event
                if event.step is not None and event.figures["reward"]["mean"] is not None:
                    self.eval_curve.append((event.step, event.figures["reward"]["mean"]))
            case ev.Alert():
                if event.active:
                    self.alerts[event.name] = event
                else:
                    self.alerts.pop(event.name, None)
                self.note("WARNING" if event.active else "INFO", wording.alert(event))
            case ev.GroupDropped():
                self.dropped[event.reason] += 1
                self._scored(event)
                if line := self.drop_lines.add(event, self.monotonic()):
                    self.note("WARNING", line)
            case ev.GroupsDumped():
                self.note("INFO", wording.dumped(event))
            case ev.LogRecord():
                self.log(event)
            case ev.FileProgress():
                self._apply_file(event)
            case ev.RunSoFar():  # attached to a run in progress: its figures cover more than the replayed groups
                self.totals, self.dropped = (
                    copy.deepcopy(event.totals),
                    collections.Counter(event.dropped),
                )
            case ev.RunSummary():
                self.summary, self.state, self.detail = event, event.state, event.error
                self.groups_done = event.groups_done
            case ev.MetricsWindow():
                pass  # the window's figures are folded from the groups themselves
            case _:
                assert_never(event)

    def _apply_group(self, group: ev.GroupCollected) -> None:
        self.groups.append(group)
        self.series.add_group(group)
        self._scored(group)
        self.reward_history.append(stats.mean(group.scores))
        self.groups_done = max(self.groups_done, group.index)
        tokens = sum(len(t) for t in group.tokens)
        self.tokens_total += tokens
        self.throughput.add(group.started_at + group.elapsed_s, tokens, group.started_at)
        self.endpoint_trouble = self.trajectory_trouble = None

    def _apply_file(self, progress: ev.FileProgress) -> None:
        """A viewed file's figures so far: the window is the whole file."""
        totals = progress.totals
        totals.per_metric = {
            printable(name): moments for name, moments in totals.per_metric.items()
        }
        self.totals = self.in_window = totals
        self.reward_history = collections.deque(progress.reward_history, maxlen=HISTORY)
        self.identical_history = collections.deque(progress.identical_history, maxlen=HISTORY)
        self.groups_done = progress.groups
        share = progress.bytes_read / progress.bytes_total if progress.bytes_total else 1.0
        self.groups_total = (
            progress.groups
            if progress.done
            else max(progress.groups, round(progress.groups / share))
        )
        if (
            self.state is ev.RunState.STARTING
        ):  # the first pass; then a followed file's detail says so
            self.detail = "" if progress.done else f"reading the file: {share:.0%}"

    def _scored(self, group: ev.GroupCollected | ev.GroupDropped) -> None:
        """Every scored group, kept or dropped, counts in the window's and the run's figures."""
        if len(self.scored) == self.scored.maxlen:
            self.in_window.remove(self.scored[0])
        self.scored.append(group)
        self.in_window.add(group)
        self.totals.add(group)
        self.series.add_scored(group.scores)
        if (alike := stats.alike(group.scores)) is not None:  # one rollout is in no rate
            self.identical_history.append(float(alike))

    def _apply_api(self, status: ev.ApiStatus) -> None:
        """A poll of the trajectory API; what changed goes to the log."""
        self.series.add_api(status)
        before = self.api_status
        if status.reachable:
            self.trajectory_trouble = None
        if before is None or before.reachable != status.reachable:
            self.note("INFO" if status.reachable else "WARNING", wording.api_reachability(status))
        if status.trainer_registered and (before is None or not before.trainer_registered):
            self.note("INFO", wording.trainer_state(status))
        self.api_status = status
        if status.reachable:
            self.queue_history.append(float(status.queue_size))

    def fail(self, detail: str) -> None:
        """The run ended without a summary (its process died): a failed run, in the log too."""
        self.state, self.detail = ev.RunState.FAILED, printable(detail)
        self.note("ERROR", self.detail)
        self.version += 1

    def note(self, level: str, message: str) -> None:
        """A line of the model's own (status changes, dumps), stamped with its clock."""
        self.log(ev.LogRecord(level, "run", message, self.clock()))

    def log(self, record: ev.LogRecord) -> None:
        self.logs.append(record)
        self.logs_total += 1

    # -- derived values ---------------------------------------------------------------------

    @property
    def elapsed_s(self) -> float:
        if self._t0 is None:
            return 0.0
        if self.summary is not None:
            return self.summary.elapsed_s
        return (
            self.monotonic() - self._t0
        )  # never the wall clock's difference: it can be set back mid-run

    def rates(self) -> tuple[float, float]:
        """(groups/s, tokens/s) as every view defines them (``stats.RATE_DEFINITION``)."""
        return self.throughput.rates(self.clock(), self.state.collecting)

    def set_filter(self, text: str, found: dict[str, set[tuple[int, int]]] | None = None) -> None:
        """Show only matching groups (ValueError on bad syntax, keeping the old filter). A viewed
        file's rows hold no messages: its text search's answer (``GroupFile.search``) is ``found``."""
        search = in_messages if self.rows is None else _among(found or {})
        predicate = parse_filter(text, search) if text.strip() else None
        self.filter_text, self._filter = text.strip(), predicate
        self.version += 1

    def cycle_sort(self) -> str:
        """The table's next order (``SORTS``); says it."""
        names = list(SORTS)
        self.sort = names[(names.index(self.sort) + 1) % len(names)]
        self.version += 1
        return SORTS[self.sort][0]

    def _once_per_version(self, name: str, compute: Callable[[], object]):
        """Derived values are computed once per batch of events, however many panels ask."""
        if self._derived_version != self.version:
            self._derived.clear()
            self._derived_version = self.version
        if name not in self._derived:
            self._derived[name] = compute()
        return self._derived[name]

    def chart_series(self) -> Series:
        """The whole run's series: the live run's, or the one a viewed file's reading pass fills."""
        return self.rows.series if self.rows is not None else self.series

    def recent_scores(self) -> list[float]:
        """Every rollout's reward over the window (a viewed file's last ``window`` groups)."""
        groups = (
            self.rows[max(0, len(self.rows) - self.window) :]
            if self.rows is not None
            else self.groups
        )
        return [s for g in groups for s in g.scores]

    def all_groups(self) -> Sequence:
        return self.rows if self.rows is not None else self.groups

    def visible_groups(self) -> Sequence:
        """The groups the table shows: a copy of the live window or of a file's rows, or those the filter keeps."""

        def compute() -> Sequence:
            groups = self.rows.snapshot() if self.rows is not None else list(self.groups)
            kept = groups if self._filter is None else [g for g in groups if self._filter(g)]
            key = SORTS[self.sort][1]
            return kept if key is None else sorted(kept, key=key)  # stable: ties keep their order

        return self._once_per_version("visible", compute)

    @property
    def filtered(self) -> bool:
        return self._filter is not None

    @property
    def window_label(self) -> str:
        """What the side panels' recent figures are over: the window, or the groups the filter keeps."""
        return "filtered" if self.filtered else "window"

    def window_totals(self) -> stats.Accumulator:
        """The recent figures' groups: the window (dropped groups too), or those of its groups the filter keeps."""
        if self._filter is None:
            return self.in_window

        def compute() -> stats.Accumulator:
            kept = stats.Accumulator()
            for group in self.visible_groups():
                kept.add(group)
            return kept

        return self._once_per_version("filtered", compute)

    def window_metrics(self) -> dict[str, float]:
        return self._once_per_version("window", lambda: self.window_totals().metrics())

    def score_range(self) -> tuple[float, float]:
        """Lowest and highest reward in the window, for colouring rewards relative to it."""

        def compute() -> tuple[float, float]:
            if self.rows is not None:
                return self.rows.score_range
            scores = [s for g in self.groups for s in g.scores]
            return (min(scores), max(scores)) if scores else (0.0, 1.0)

        return self._once_per_version("range", compute)

    def run_metrics(self) -> dict[str, float]:
        return self._once_per_version("run", self.totals.metrics)

    def identical_rates(self) -> tuple[float | None, float | None]:
        """The window's and the run's; None where no group had two rollouts to compare."""
        window = self.window_metrics().get("metrics/identical_score_rate")
        run = self.run_metrics().get("metrics/identical_score_rate")
        return window, run

    def turn_histogram(self) -> list[tuple[int, int]]:
        counts: collections.Counter[int] = collections.Counter()
        for turns, count in self.window_totals().turn_counts.items():
            counts[round(turns)] += count  # a viewed file's rows hold each group's mean
        return sorted(counts.items())

    def reward_function_rows(self) -> list[tuple[str, float | None, float | None]]:
        window, run = self.window_metrics(), self.run_metrics()
        names = []
        if self.run_started is not None:
            names.extend(self.run_started.reward_functions)
        for key in list(window) + list(run):
            name = key.removeprefix("metrics/")
            if name not in names and name in self._metric_names():
                names.append(name)
        return [(n, window.get(f"metrics/{n}"), run.get(f"metrics/{n}")) for n in names]

    def _metric_names(self) -> set[str]:
        return set(self.totals.per_metric)
