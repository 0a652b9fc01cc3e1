"""``g`` in ``vftui watch RUN_DIR``: the run's key figures over steps, and the runs given with ``--with``
overlaid on the same step axis, one colour a run."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid
from textual.screen import Screen
from textual.widgets import Static

from vftui.training.history import History
from vftui.training.overview import names
from vftui.ui.widgets import plots

CHARTED = ("reward", "entropy", "mismatch kl", "grad norm", "seq len", "trainer step")
Curves = dict[
    str, dict[str, list[tuple[int, float]]]
]  # run's label -> figure label -> (step, value)


def curves_of(history: History) -> dict[str, list[tuple[int, float]]]:
    """The charted figures of one run, by step (what the run logs of them)."""
    named = names(history)
    return {label: history.points(name) for label in CHARTED if (name := named[label])}


class TrainingChartsScreen(Screen[None]):
    BINDINGS = [Binding("escape,g", "dismiss", "close")]

    def __init__(self, curves: Curves) -> None:
        super().__init__()
        self.curves = curves
        self.composed = False  # a poll between its push and its charts' compose found none of them

    def on_mount(self) -> None:
        self.composed = True

    def compose(self) -> ComposeResult:
        title = Text("charts", style="bold").append(
            f"  over steps: {', '.join(self.curves)} (esc closes)"
        )
        yield Static(title, id="charts-title")
        with Grid(id="training-charts"):
            for label in CHARTED:
                yield plots.Chart(id=f"chart-{label.replace(' ', '-')}")

    def show(self, curves: Curves) -> None:
        """New points from a poll: drawn again once composed (the first draw, on resize, has it)."""
        self.curves = curves
        if self.composed:
            self.draw()

    def on_resize(self) -> None:
        self.call_after_refresh(self.draw)

    def draw(self) -> None:
        palette = plots.LINE_COLORS
        colors = {run: palette[n % len(palette)] for n, run in enumerate(self.curves)}
        for label in CHARTED:
            series = {run: figures.get(label, []) for run, figures in self.curves.items()}
            widget = self.query_one(f"#chart-{label.replace(' ', '-')}", plots.Chart)
            plots.lines_by_step(widget, label, series, colors)
