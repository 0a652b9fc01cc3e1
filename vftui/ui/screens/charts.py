"""The run over time, with axes and units (``g`` opens it): mean reward ± std and each reward function,
the reward histogram, completion length against the cap, the identical-score and truncation rates,
and in rl the off-policy lag, the trainer's queue and the inference servers' KV cache.

Drawn by plotext through Textualize's ``textual-plotext`` widget, only while the screen is open,
at most once a second, from the model's series (``figures.series``). Each chart's title and legend are
on its border, so a short chart keeps them and no legend hides a line; its axes have round ticks.
"""

from __future__ import annotations

import time

from textual.binding import Binding
from textual.containers import Grid
from textual.widgets import Static
from textual_plotext import PlotextPlot

from vftui.events import Mode
from vftui.figures.series import histogram, nice_ticks, rolling, thinned, tick_label
from vftui.ui.model import DashboardModel
from vftui.ui.screens.health import ModelScreen

REDRAW_S = 1.0
CAP_SHOWN_FROM = 0.25  # of the cap: lengths this long or longer are drawn against it
RATE_GROUPS = 20  # the identical and truncation rates: over the last this many groups
PLOTS = ("reward", "functions", "histogram", "length", "rates", "rl")
HISTOGRAM_BINS = 20
LINE_COLORS = ("cyan", "magenta", "yellow", "blue", "green", "red", "white")  # plotext's names
LEGEND_COLOR = {
    "gray": "ansi_bright_black"
}  # the legend's markup for a plotext colour, where not ansi_<it>


class ChartsScreen(ModelScreen):
    BINDINGS = [Binding("escape,g,q", "dismiss", "close")]

    def __init__(self) -> None:
        super().__init__()
        self._drawn_at, self._drawn_version = 0.0, -1

    def compose(self):
        yield Static("[b]charts[/b]  over the whole run (esc closes)", id="charts-title")
        with Grid(id="charts-grid"):
            for name in PLOTS:
                yield PlotextPlot(id=f"chart-{name}")

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

    def _plot(self, name: str, title: str, legend: dict[str, str] | None = None):
        """The chart cleared, its title and legend on its border: never cut by a short chart, never over
        its lines."""
        widget = self.query_one(f"#chart-{name}", PlotextPlot)
        widget.border_title = title
        widget.border_subtitle = "  ".join(
            f"[{LEGEND_COLOR.get(color, f'ansi_{color}')}]━━[/] {label}"
            for label, color in (legend or {}).items()
        )
        plt = widget.plt
        plt.clear_data()
        plt.clear_figure()
        return widget, plt

    def _width(self, name: str) -> int:
        return max(
            10, self.query_one(f"#chart-{name}").size.width * 2
        )  # plotext draws two points a cell

    def _axes(
        self, widget: PlotextPlot, xs: list[float], ys: list[float], low: float | None = None
    ):
        """Round ticks over the data's range (``low``: where the y axis starts, a count's 0), the axes
        set to the first and last of them."""
        plt = widget.plt
        if not xs:
            return
        width, height = widget.size
        y_low = min(ys) if low is None else low
        for ticks, set_ticks, set_limits in (
            (nice_ticks(min(xs), max(xs), width // 8), plt.xticks, plt.xlim),
            (nice_ticks(y_low, max(ys), height - 6), plt.yticks, plt.ylim),  # its rows
        ):
            if len(ticks) > 1:
                set_ticks(ticks, [tick_label(t) for t in ticks])
                set_limits(ticks[0], ticks[-1])

    def _reward(self, model: DashboardModel) -> None:
        widget, plt = self._plot(
            "reward", "mean reward ± std per group", {"mean reward": "green", "± std": "gray"}
        )
        series, points = model.chart_series(), self._width("reward")
        xs, mean = thinned(series.mean, points)
        _, std = thinned(series.std, points)
        high = [m + s for m, s in zip(mean, std, strict=True)]
        low = [m - s for m, s in zip(mean, std, strict=True)]
        if xs:
            plt.plot(xs, high, color="gray")
            plt.plot(xs, mean, color="green")
            plt.plot(xs, low, color="gray")
        self._axes(widget, xs, high + low)
        plt.xlabel("group")
        plt.ylabel("reward")
        widget.refresh()

    def _lines(self, name: str, title: str, unit: str, lines: dict, xlabel: str = "group") -> None:
        colors = dict(zip(lines, LINE_COLORS, strict=False))
        widget, plt = self._plot(name, title, colors)
        points = self._width(name)
        all_xs: list[float] = []
        all_ys: list[float] = []
        for label, values in lines.items():
            xs, ys = thinned(values, points)
            if xs:
                plt.plot(xs, ys, color=colors[label])
                all_xs += xs
                all_ys += ys
        self._axes(widget, all_xs, all_ys)
        plt.xlabel(xlabel)
        plt.ylabel(unit)
        widget.refresh()

    def _histogram(self, model: DashboardModel) -> None:
        widget, plt = self._plot("histogram", f"reward histogram, last {model.window} groups")
        middles, counts = histogram(model.recent_scores(), HISTOGRAM_BINS)
        if middles:
            plt.bar(middles, counts, color="cyan", width=0.9)
        self._axes(widget, middles, [float(c) for c in counts], low=0.0)
        plt.xlabel("reward")
        plt.ylabel("rollouts")
        widget.refresh()

    def _length(self, model: DashboardModel) -> None:
        xs, ys = thinned(model.chart_series().length, self._width("length"))
        cap = model.run_started.max_tokens if model.run_started is not None else None
        shown = bool(
            cap and xs and max(ys) > CAP_SHOWN_FROM * cap
        )  # far below it, the cap would flatten the line
        where = "" if not cap or shown else f"; the cap, {cap}, is far above"
        legend = {"completion tokens": "cyan", **({"the cap": "red"} if shown else {})}
        widget, plt = self._plot("length", f"completion length, mean per group{where}", legend)
        if xs:
            plt.plot(xs, ys, color="cyan")
            if shown:
                plt.hline(cap, color="red")
        self._axes(widget, xs, ys + ([float(cap)] if shown else []))
        plt.xlabel("group")
        plt.ylabel("tokens")
        widget.refresh()
