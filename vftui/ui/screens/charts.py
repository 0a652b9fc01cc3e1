"""The run over time, with axes and units (``g`` opens it): mean reward ± std and each reward function,
the reward histogram, completion length against the cap, the identical-score and truncation rates,
and in rl the off-policy lag, the trainer's queue and the inference servers' KV cache.

Drawn by plotext through Textualize's ``textual-plotext`` widget, only while the screen is open,
at most once a second, from the model's series (``ui.series``).
"""

from __future__ import annotations

import time

from textual.binding import Binding
from textual.containers import Grid
from textual.widgets import Static
from textual_plotext import PlotextPlot

from vftui.events import Mode
from vftui.figures.series import rolling, thinned
from vftui.ui.model import DashboardModel
from vftui.ui.screens.health import ModelScreen

REDRAW_S = 1.0
CAP_SHOWN_FROM = 0.25  # of the cap: lengths this long or longer are drawn against it
RATE_GROUPS = 20  # the identical and truncation rates: over the last this many groups
PLOTS = ("reward", "functions", "histogram", "length", "rates", "rl")


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

    def show(self, model: DashboardModel) -> None:
        """Redraw when the model changed, at most once a second."""
        now = time.monotonic()
        if model.version == self._drawn_version or now - self._drawn_at < REDRAW_S:
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

    def _plot(self, name: str):
        widget = self.query_one(f"#chart-{name}", PlotextPlot)
        plt = widget.plt
        plt.clear_data()
        plt.clear_figure()
        return widget, plt

    def _width(self, name: str) -> int:
        return max(
            10, self.query_one(f"#chart-{name}").size.width * 2
        )  # plotext draws two points a cell

    def _reward(self, model: DashboardModel) -> None:
        widget, plt = self._plot("reward")
        series, points = model.chart_series(), self._width("reward")
        xs, mean = thinned(series.mean, points)
        _, std = thinned(series.std, points)
        if xs:
            plt.plot(
                xs, [m + s for m, s in zip(mean, std, strict=True)], label="+std", color="gray"
            )
            plt.plot(xs, mean, label="mean reward", color="green")
            plt.plot(
                xs, [m - s for m, s in zip(mean, std, strict=True)], label="-std", color="gray"
            )
        plt.title("mean reward ± std per group")
        plt.xlabel("group")
        plt.ylabel("reward")
        widget.refresh()

    def _lines(self, name: str, title: str, unit: str, lines: dict, xlabel: str = "group") -> None:
        widget, plt = self._plot(name)
        points = self._width(name)
        for label, values in lines.items():
            xs, ys = thinned(values, points)
            if xs:
                plt.plot(xs, ys, label=label)
        plt.title(title)
        plt.xlabel(xlabel)
        plt.ylabel(unit)
        widget.refresh()

    def _histogram(self, model: DashboardModel) -> None:
        widget, plt = self._plot("histogram")
        rewards = model.recent_scores()
        if rewards:
            plt.hist(rewards, bins=20)
        plt.title(f"reward histogram, the last {model.window} groups' rollouts")
        plt.xlabel("reward")
        plt.ylabel("rollouts")
        widget.refresh()

    def _length(self, model: DashboardModel) -> None:
        widget, plt = self._plot("length")
        xs, ys = thinned(model.chart_series().length, self._width("length"))
        cap = model.run_started.max_tokens if model.run_started is not None else None
        shown = bool(
            cap and xs and max(ys) > CAP_SHOWN_FROM * cap
        )  # far below it, the cap would flatten the line
        if xs:
            plt.plot(xs, ys, label="completion tokens", color="cyan")
            if shown:
                plt.hline(cap, color="red")
        where = "" if not cap else "; red: the cap" if shown else f"; the cap, {cap}, is far above"
        plt.title(f"completion length, mean per group{where}")
        plt.xlabel("group")
        plt.ylabel("tokens")
        widget.refresh()
