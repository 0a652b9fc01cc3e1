"""The charts screens' widget before and after it moved: textual-plotext (plotext, which pins
plotext < 6 and is no longer maintained), drawn as the screens drew it up to 0.2.0, against
textual-plot (maintained; braille lines, zoom and pan) as the screens draw it now
(``vftui.ui.widgets.plots``: its ``Chart``, with margins for a short chart). The same mean ± std
reward chart over 2,000 groups, six to a screen in the app's own grid and borders (``g``'s charts
screen in rl), at 80x24, 100x30 and 160x48.

Prints per widget and size the time one redraw takes (the data set and the chart drawn into lines,
its canvases' included; median of the redraws), the time six take to mount and paint (what ``g``
adds before its first frame, a textual-plot chart being seven widgets; median of the mounts), and
what a reader gets: whether both axes' labels are on screen, and how many tick labels a chart has.

    python bench/chart_widgets.py            # 20 redraws and 5 mounts a widget and size
    python bench/chart_widgets.py --quick    # 3 and 1: that it runs and prints (CI)
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import math
import random
import re
import statistics
import time
from importlib.metadata import version
from pathlib import Path

from _machine import described
from textual.app import App
from textual.containers import Grid
from textual.geometry import Region
from textual.widget import Widget
from textual.widgets import Static
from textual_plotext import PlotextPlot

import vftui.ui
from vftui.figures.series import nice_ticks, thinned, tick_label
from vftui.ui.widgets import plots

SIZES = ((80, 24), (100, 30), (160, 48))
GROUPS = 2000
CHARTS = 6
TICK = re.compile(r"-?\d+(?:\.\d+)?")
TITLE = "mean reward ± std per group"


def series() -> tuple[list[float], list[float]]:
    rng = random.Random(0)
    mean = [0.6 + 0.3 * math.tanh((x - 1000) / 400) + rng.gauss(0, 0.05) for x in range(GROUPS)]
    std = [0.2 + rng.gauss(0, 0.02) for _ in range(GROUPS)]
    return mean, std


def draw_plotext(widget: PlotextPlot, mean: list[float], std: list[float]) -> None:
    """The reward chart as the charts screen drew it on textual-plotext (plots.py at 0.2.0)."""
    widget.border_title = TITLE
    plt = widget.plt
    plt.clear_data()
    plt.clear_figure()
    points = max(10, widget.size.width * 2)
    xs, middle = thinned(mean, points)
    _, spread = thinned(std, points)
    high = [m + s for m, s in zip(middle, spread, strict=True)]
    low = [m - s for m, s in zip(middle, spread, strict=True)]
    plt.plot(xs, high, color="gray")
    plt.plot(xs, middle, color="green")
    plt.plot(xs, low, color="gray")
    width, height = widget.size
    for ticks, set_ticks, set_limits in (
        (nice_ticks(min(xs), max(xs), width // 8), plt.xticks, plt.xlim),
        (nice_ticks(min(low), max(high), height - 6), plt.yticks, plt.ylim),
    ):
        if len(ticks) > 1:
            set_ticks(ticks, [tick_label(t) for t in ticks])
            set_limits(ticks[0], ticks[-1])
    plt.xlabel("group")
    plt.ylabel("reward")
    widget.refresh()


def draw_plot(widget: plots.Chart, mean: list[float], std: list[float]) -> None:
    """The reward chart as the charts screen draws it now."""
    plots.mean_std(widget, TITLE, mean, std)


WIDGETS = {
    "textual-plotext": (PlotextPlot, draw_plotext),
    "textual-plot": (plots.Chart, draw_plot),
}


class Charts(App):
    """The charts screen's layout: its title row, then the app's grid, two charts a row (mounted by
    ``measured``, which times it)."""

    CSS_PATH = Path(vftui.ui.__file__).parent / "charts.tcss"
    CSS = "#charts-grid > PlotextPlot { height: 1fr; min-height: 8; border: round $primary 50%; }"

    def compose(self):
        yield Static("[b]charts[/b]", id="charts-title")

    def on_mount(self) -> None:
        gc.freeze()  # as vftui's app does: what is loaded by now is left out of full collections


def drawn(widget: Widget) -> None:
    """The widget and everything in it rendered into lines, as the compositor would ask."""
    for part in (widget, *widget.query("*")):
        if part.outer_size:
            part.render_lines(Region(0, 0, *part.outer_size))


async def measured(name: str, size: tuple[int, int], redraws: int) -> str:
    kind, draw = WIDGETS[name]
    mean, std = series()
    app = Charts()
    async with app.run_test(size=size) as pilot:
        await pilot.pause(0.2)
        mounts = []
        for _ in range(max(1, redraws // 4)):
            if app.query("#charts-grid"):
                await app.query_one("#charts-grid").remove()
                await pilot.pause(0.1)
            started = time.perf_counter()
            await app.screen.mount(Grid(*[kind() for _ in range(CHARTS)], id="charts-grid"))
            await pilot.pause()
            app.screen._compositor.render_strips()  # the screen with the charts' frames painted
            mounts.append(time.perf_counter() - started)
        widget = app.query(kind).first()
        times = []
        for _ in range(redraws):
            started = time.perf_counter()
            draw(widget, mean, std)
            drawn(widget)
            times.append(time.perf_counter() - started)
        for other in app.query(kind):
            draw(other, mean, std)
        await pilot.pause(0.3)
        lines = ["".join(s.text for s in strip) for strip in app.screen._compositor.render_strips()]
        region = widget.content_region  # the first chart's inside: its border's title holds no axis
        inside = [line[region.x : region.right] for line in lines[region.y : region.bottom]]
    text = "\n".join(inside)
    labels = [label for label in ("group", "reward") if label in text]
    return (
        f"{name:16} {size[0]}x{size[1]}: redraw {1000 * statistics.median(times):6.1f} ms, "
        f"six mounted {1000 * statistics.median(mounts):5.0f} ms, "
        f"axis labels on screen: {', '.join(labels) or 'none'}, "
        f"tick labels in a chart: {len(TICK.findall(text))} ({region.height} rows inside)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 redraws: that it runs (CI)")
    args = parser.parse_args()
    print(described())
    print(
        ", ".join(
            f"{name} {version(name)}" for name in ("textual-plotext", "plotext", "textual-plot")
        )
    )
    redraws = 3 if args.quick else 20
    for size in SIZES:
        for name in WIDGETS:
            print(asyncio.run(measured(name, size, redraws)))


if __name__ == "__main__":
    main()
