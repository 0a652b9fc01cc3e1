"""The training dashboard: a prime-rl run's health in one line, its overview's sections charted over
steps, its alerts and log warnings, and its engines. A worker thread follows the run's files; each
poll comes up as a ``Polled`` message and the panels show it."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Horizontal
from textual.reactive import reactive
from textual.screen import Screen
from textual.widgets import Static

from vftui.text.printable import one_line
from vftui.training.check_in import step_line
from vftui.training.follow import Follower, Snapshot
from vftui.training.health import DEGRADED, DOWN, FIGURE_OF
from vftui.ui.training.charts_screen import Curves, TrainingChartsScreen, curves_of
from vftui.ui.training.panels import InferencePanel, SectionPanel
from vftui.ui.training.polled import CHART_POINTS, Polled
from vftui.ui.training.tokens_screen import DecoderLoader, TokensScreen
from vftui.ui.widgets.keys_footer import KeysFooter

WORD_STYLE = {DOWN: "bold white on red", DEGRADED: "bold black on yellow"}


def run_label(n: int, follower: Follower) -> str:
    """``A name``: a run's letter (A this run, B... the --with runs) and its folder's name."""
    return f"{chr(ord('A') + n % 26)} {one_line(follower.run.name)}"


class TrainingScreen(Screen[None]):
    BINDINGS = [
        Binding("t", "tokens", "tokens"),
        Binding("g", "charts", "charts"),
        Binding("m", "metrics", "all metrics"),
    ]
    word: reactive[str] = reactive("")

    def __init__(
        self,
        follower: Follower,
        every_s: float,
        on_change: Callable[[Snapshot, str], None] | None = None,
        load_decoder: DecoderLoader | None = None,
        others: list[Follower] | None = None,
    ) -> None:
        super().__init__()
        self.follower = follower
        self.others = others or []  # --with: runs whose curves the charts overlay
        self.curves: Curves = {}
        self.load_decoder = load_decoder
        self.every_s = every_s
        self.on_change = on_change  # called with (snapshot, previous word) when the health changes
        self.snapshot: Snapshot | None = None
        self.stop = threading.Event()

    def compose(self) -> ComposeResult:
        yield Static(
            Text(f"reading {one_line(str(self.follower.run.path))}…", style="dim"), id="health"
        )
        with Grid(id="sections"):
            yield SectionPanel("progress")
            yield SectionPanel("stability")
            yield SectionPanel("performance")
            yield InferencePanel()
        with Horizontal(id="below"):
            yield Static(id="alerts", classes="section")
            yield Static(id="logs", classes="section")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.query_one("#alerts").border_title = "alerts"
        self.query_one("#logs").border_title = "log warnings and errors"
        # a daemon thread, not a Textual worker: the app's exit joins those, and a poll can take seconds
        threading.Thread(target=self.follow, name="follow", daemon=True).start()

    def on_unmount(self) -> None:
        self.stop.set()

    def follow(self) -> None:
        """Poll the run's files until the screen goes; each poll's snapshot goes up as a message."""
        seen_logs = 0
        while not self.stop.is_set():
            self.follower.poll()
            snap = self.follower.snapshot()
            history = self.follower.history
            charts = {
                f.name: history.values(f.name, CHART_POINTS)
                for f in snap.overview.progress
                + snap.overview.stability
                + snap.overview.performance
            }
            logs = len(self.follower.logs.lines)
            curves = {run_label(0, self.follower): curves_of(history)}
            for n, other in enumerate(self.others, start=1):
                other.poll()
                curves[run_label(n, other)] = curves_of(other.history)
            with contextlib.suppress(RuntimeError):  # the app closed meanwhile
                self.post_message(Polled(snap, charts, max(0, logs - seen_logs), curves))
            seen_logs = logs
            self.stop.wait(self.every_s)

    @on(Polled)
    def show(self, message: Polled) -> None:
        snap = message.snapshot
        before, self.snapshot, self.curves = self.word, snap, message.curves
        if isinstance(self.app.screen, TrainingChartsScreen):
            self.app.screen.show(self.curves)
        self.word = snap.verdict.word
        alerting = {FIGURE_OF[a.name] for a in snap.verdict.alerts if a.name in FIGURE_OF}
        for panel in self.query(SectionPanel):
            panel.show(snap, message.charts, alerting)
        self.query_one(InferencePanel).show(snap)
        self.query_one("#health", Static).update(self._health_line(snap))
        self.query_one("#alerts", Static).update(self._alerts(snap))
        self.query_one("#logs", Static).update(self._logs(snap))
        if before and before != self.word and self.on_change is not None:
            self.on_change(snap, before)

    def _health_line(self, snap: Snapshot) -> Text:
        word = snap.verdict.word
        text = Text(f" {word} ", style=WORD_STYLE.get(word, "bold black on green"))
        text.append(f"  step {step_line(snap)}  ", style="bold")
        text.append(one_line(snap.run.name), style="dim")
        alerts = [a.name for a in snap.verdict.alerts if a.level != "note"]
        if alerts:
            text.append("  " + ", ".join(alerts), style="yellow")
        return text

    def _alerts(self, snap: Snapshot) -> Text:
        text = Text()
        for alert in snap.verdict.alerts:
            style = (
                "bold red"
                if alert.level == DOWN
                else "yellow"
                if alert.level == DEGRADED
                else "dim"
            )
            text.append(f"{alert.name}: ", style=style)
            text.append(alert.sentence + "\n")
        for note in snap.notes:
            text.append(one_line(note) + "\n", style="dim")
        return text if text else Text("none", style="green")

    def _logs(self, snap: Snapshot) -> Text:
        text = Text()
        for line in snap.verdict.logs[-12:]:
            style = "yellow" if line.level == "WARNING" else "bold red"
            text.append(f"{line.time} {line.file} ", style="dim")
            text.append(f"{line.level} ", style=style)
            text.append(one_line(line.message) + "\n")
        return text if text else Text("none in the current attempt", style="dim")

    def action_tokens(self) -> None:
        self.app.push_screen(TokensScreen(self.follower.run, self.load_decoder))

    def action_charts(self) -> None:
        self.app.push_screen(TrainingChartsScreen(self.curves))

    def action_metrics(self) -> None:
        from vftui.ui.training.metrics_screen import MetricsScreen

        self.app.push_screen(MetricsScreen(self.follower))
