"""The run over time, with axes and units (``g`` opens it): mean reward ± std and each reward function,
the reward histogram, completion length against the cap, the identical-score and truncation rates,
and in rl the off-policy lag, the trainer's queue and the inference servers' KV cache.

Drawn by textual-plot's widget (``widgets.plots.Chart``: braille lines, margins that fit an 80x24
screen), only while the screen is open, at most once a second, from the model's series
(``figures.series``). Each chart's title and legend are on its border, so a short chart keeps them
and no legend hides a line; its axes have round ticks.
"""

from __future__ import annotations

import time

from textual.binding import Binding
from textual.containers import Grid
from textual.widgets import Static

from vftui.events import Mode
from vftui.figures.series import histogram, rolling, thinned
from vftui.ui.model import DashboardModel
from vftui.ui.screens.health import ModelScreen
from vftui.ui.widgets import plots

REDRAW_S = 1.0
CAP_SHOWN_FROM = 0.25  # of the cap: lengths this long or longer are drawn against it
RATE_GROUPS = 20  # the identical and truncation rates: over the last this many groups
PLOTS = ("reward", "functions", "histogram", "length", "rates", "rl")
HISTOGRAM_BINS = 20


class ChartsScreen(ModelScreen):
    BINDINGS = [Binding("escape,g,q", "dismiss", "close")]

    def __init__(self, model: DashboardModel) -> None:
        super().__init__(model)
        self._drawn_at, self._drawn_version = 0.0, -1

    def compose(self):
        yield Static("[b]charts[/b]  over the whole run (esc closes)", id="charts-title")
        with Grid(id="charts-grid"):
            for name in PLOTS:
                yield plots.Chart(id=f"chart-{name}")

    def on_resize(self) -> None:
        """Ticks and points are chosen for a size: a new one is drawn anew."""
        self._drawn_version = -1

    def show(self, model: DashboardModel) -> None:
        """Redraw when the model or the size changed, at most once a second; not before the charts are laid
        out (drawn for no width, a finished run's charts kept their few points and wrong ticks)."""
        now = time.monotonic()
        if model.version == self._drawn_version or now - self._drawn_at < REDRAW_S:
            return
        if not self.query_one("#chart-reward").size.width:
            return
        self._drawn_at, self._drawn_version = now, model.version
        series = model.chart_series()
        rl = model.run_started is not None and model.run_started.mode is Mode.RL
        self.query_one("#chart-rl").display = rl
        self._reward(model)
        self._lines(
            "functions",
            "reward functions (mean per group)",
            "value",
            {name: values for name, values in series.functions.items() if name != "num_turns"},
        )
        self._histogram(model)
        self._length(model)
        self._lines(
            "rates",
            f"rates over the last {RATE_GROUPS} groups",
            "%",
            {
                "identical": [100 * v for v in rolling(series.identical, RATE_GROUPS)],
                "truncated": [100 * v for v in rolling(series.truncated, RATE_GROUPS)],
            },
        )
        if rl:
            self._lines(
                "rl",
                "rl: lag (steps), queue (groups), KV cache (%)",
                "",
                {
                    "lag": list(series.lag),
                    "queue": list(series.queue),
                    "KV cache %": list(series.kv_cache),
                },
                xlabel="poll",
            )

    def _chart(self, name: str) -> plots.Chart:
        return self.query_one(f"#chart-{name}", plots.Chart)

    def _lines(self, name: str, title: str, unit: str, lines: dict, xlabel: str = "group") -> None:
        plots.lines(self._chart(name), title, unit, lines, xlabel)

    def _reward(self, model: DashboardModel) -> None:
        series = model.chart_series()
        plots.mean_std(
            self._chart("reward"), "mean reward ± std per group", series.mean, series.std
        )

    def _histogram(self, model: DashboardModel) -> None:
        widget = self._chart("histogram")
        plots.begin(widget, f"reward histogram, last {model.window} groups")
        middles, counts = histogram(model.recent_scores(), HISTOGRAM_BINS)
        edges: list[float] = []  # the bins' outer edges: the x axis spans whole bars
        if middles:
            bin_width = middles[1] - middles[0] if len(middles) > 1 else 1.0
            widget.bar(middles, counts, 0.9 * bin_width, bar_style="cyan", hires_mode=plots.BARS)
            edges = [middles[0] - bin_width / 2, middles[-1] + bin_width / 2]
        plots.axes(widget, edges, [float(c) for c in counts], "reward", "rollouts", low=0.0)

    def _length(self, model: DashboardModel) -> None:
        widget = self._chart("length")
        xs, ys = thinned(model.chart_series().length, plots.points(widget))
        cap = model.run_started.max_tokens if model.run_started is not None else None
        shown = bool(
            cap and xs and max(ys) > CAP_SHOWN_FROM * cap
        )  # far below it, the cap would flatten the line
        where = "" if not cap or shown else f"; the cap, {cap}, is far above"
        legend = {"completion tokens": "cyan", **({"the cap": "red"} if shown else {})}
        plots.begin(widget, f"completion length, mean per group{where}", legend)
        if xs:
            plots.line(widget, xs, ys, "cyan")
        ys_shown = ys + ([float(cap)] if shown and cap else [])  # shown: a cap
        first, last = plots.axes(widget, xs, ys_shown, "group", "tokens")
        if shown and cap:
            plots.line(widget, [first, last], [float(cap), float(cap)], "red")  # across the chart
