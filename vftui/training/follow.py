"""A prime-rl run followed: each poll reads what its files gained, and a snapshot says where it stands.

One ``Follower`` serves ``vftui status`` (one poll, to the end of the files), ``vftui watch RUN_DIR``
(a poll a second, in a worker thread) and its ``--no-ui`` lines. What could not be read is said once,
in ``notes``, and the rest of the run still shows.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from vftui.text.printable import one_line
from vftui.training import token_exports
from vftui.training.engines import Engine, read_all
from vftui.training.health import Verdict, judge
from vftui.training.history import WINDOW, History
from vftui.training.layout import METRICS, Settings, TrainingRun
from vftui.training.logs import LogLine, LogsReader
from vftui.training.metrics_file import MetricsReader, Read, side
from vftui.training.overview import Overview, overview

# of a long run, the steps a first read takes (its head too): more than a chart shows
FIRST_STEPS = 300


@dataclass
class Snapshot:
    run: TrainingRun
    settings: Settings
    overview: Overview
    verdict: Verdict
    engines: list[Engine] = field(default_factory=list)
    exports: list[token_exports.ExportStep] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    rows: int = 0

    @property
    def finished(self) -> bool:
        return self.verdict.finished


class Follower:
    def __init__(
        self,
        run: TrainingRun,
        inference: list[str] | None = None,
        window: int = WINDOW,
        thresholds: dict[str, float] | None = None,
    ) -> None:
        self.run = run
        self.settings = run.settings()
        self.history = History(window)
        self.metrics = MetricsReader(run.metrics, min(window, FIRST_STEPS))
        self.logs = LogsReader(run.path)
        self.inference = inference or []
        self.thresholds = thresholds
        self.engines: list[Engine] = []
        self.new_logs: list[LogLine] = []  # the last poll's
        self.notes: list[str] = []
        self._said: set[str] = set()
        self.lock = (
            threading.Lock()
        )  # a poll changes the history: a reader on another thread takes it
        if run.others:
            self._note(
                f"{run.others} other runs in {run.path.parent}: following the newest, {run.name}"
            )
        if self.settings.note:
            self._note(self.settings.note)

    def _note(self, sentence: str) -> None:
        if sentence not in self._said:
            self._said.add(sentence)
            self.notes.append(one_line(sentence))

    def poll(self, until_end: bool = False) -> int:
        """Read what the files gained (``until_end``: all of it, not one bounded piece); the rows read."""
        with self.lock:
            return self._poll(until_end)

    def table(self) -> list[tuple[str, int, float, float | None]]:
        """Every name the run logs: its newest step and value, and its early level."""
        with self.lock:
            h = self.history
            return [
                (n, *h.series[n].points[-1], h.early(n)) for n in h.names() if h.series[n].points
            ]

    def _poll(self, until_end: bool) -> int:
        rows = 0
        while True:
            read = self.metrics.read()
            if read.restarted:
                self._note(f"{METRICS} was replaced or cut: read again from its start")
                self.history = History(self.history.window)
            for row in read.rows:
                self.history.add(row, side(row.values))
            rows += len(read.rows)
            self._said_of(read)
            if not (until_end and read.more):
                break
        if self.metrics.skipped:
            a, b = self.metrics.skipped
            self._note(
                f"steps {a}-{b} not read: the charts hold the last {self.history.window} steps"
            )
        for step in self.history.resumed_at:
            self._note(f"the run went back to step {step}: it resumed from a checkpoint")
        if self.history.names_over:
            self._note("over 5,000 metric names: the rest are counted, not kept")
        self.new_logs = self.logs.read()
        for attempt in self.logs.restarts:
            self._note(f"logs/latest now points to {attempt}: the run was restarted")
        if self.inference:
            self.engines = read_all(self.inference)
        return rows

    def _said_of(self, read: Read) -> None:
        """A sentence, once, for each kind of thing the read could not take."""
        if read.error:
            self._note(f"{METRICS} cannot be read: {read.error}")
        if read.bad_lines:
            self._note(
                f"{METRICS}: lines that are not metrics rows left out (first: {read.first_bad})"
            )
        if read.long_lines:
            self._note(f"{METRICS}: a line over 16 MB left out")
        if read.skipped_values:
            self._note(f"{METRICS}: values that are not finite numbers left out")

    def snapshot(self, now: float | None = None) -> Snapshot:
        now = time.time() if now is None else now
        step = self.history.trainer_step()
        finished = bool(
            self.settings.max_steps and step is not None and step >= self.settings.max_steps
        )
        verdict = judge(
            self.history,
            now,
            finished,
            list(self.logs.lines),
            self.logs.counts["ERROR"] + self.logs.counts["CRITICAL"],
            self.engines,
            self.thresholds,
        )
        notes = list(self.notes)
        if not self.run.metrics.exists():
            notes.append(f"no {METRICS} yet: prime-rl writes it once the first step is logged")
        return Snapshot(
            self.run,
            self.settings,
            overview(self.history, self.settings.max_steps),
            verdict,
            list(self.engines),
            token_exports.steps(self.run.token_exports),
            notes,
            self.history.rows,
        )
