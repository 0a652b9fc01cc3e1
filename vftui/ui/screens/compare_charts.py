"""``g`` in ``vftui compare``: the sources overlaid, one colour each (the letters' own), over their items in
the order each wrote them: mean reward, completion length, and the identical-score and truncation rates
over a rolling window. Training runs (prime-rl's, vftui's rl runs) have their reward by trainer step
instead, so runs line up where their steps meet. Everything is from the files: drawn once, and again
for a new size."""

from __future__ import annotations

from textual.binding import Binding
from textual.containers import Grid
from textual.screen import Screen
from textual.widgets import Static

from vftui.comparing.comparison import SourceSeries
from vftui.figures.series import rolling
from vftui.ui.widgets import plots

RATE_ITEMS = 20  # the identical and truncation rates: over the last this many items
CHARTS = {  # name: (title, unit, the series' field, a rate)
    "reward": ("mean reward per item", "reward", "reward", False),
    "length": ("completion length, mean per item", "characters", "length", False),
    "identical": (f"identical scores, rate over {RATE_ITEMS} items", "%", "identical", True),
    "truncated": (f"truncated rollouts, rate over {RATE_ITEMS} items", "%", "truncated", True),
}


class CompareChartsScreen(Screen[None]):
    BINDINGS = [Binding("escape,g,q", "dismiss", "close")]

    def __init__(self, letters: list[str], series: list[SourceSeries]) -> None:
        super().__init__()
        self.letters, self.series = letters, series
        self.by_step = all(s.by_step for s in series)  # every source a training run

    def compose(self):
        yield Static(
            "[b]charts[/b]  the sources over their items, in the order each wrote them (esc closes)",
            id="charts-title",
        )
        with Grid(id="charts-grid"):
            for name in CHARTS:
                yield plots.Chart(id=f"chart-{name}")

    def on_resize(self) -> None:
        """Ticks and points are chosen for a size: drawn once laid out, and for each new one."""
        self.call_after_refresh(self.draw)

    def draw(self) -> None:
        palette = plots.LINE_COLORS
        colors = {letter: palette[n % len(palette)] for n, letter in enumerate(self.letters)}
        for name, (title, unit, field, rate) in CHARTS.items():
            if name == "reward" and self.by_step:
                by_step = {
                    letter: s.by_step for letter, s in zip(self.letters, self.series, strict=True)
                }
                widget = self.query_one(f"#chart-{name}", plots.Chart)
                plots.lines_by_step(widget, "mean reward per trainer step", by_step, colors)
                continue
            lines = {}
            for letter, series in zip(self.letters, self.series, strict=True):
                values = getattr(series, field)
                lines[letter] = [100 * v for v in rolling(values, RATE_ITEMS)] if rate else values
            widget = self.query_one(f"#chart-{name}", plots.Chart)
            plots.lines(widget, title, unit, lines, "item", colors)
