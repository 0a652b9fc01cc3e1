"""The charts screen's widget, textual-plotext (plotext, which pins plotext < 6 and is no longer
maintained), against textual-plot (maintained; braille lines, zoom and pan): the same mean ± std
reward chart over 2,000 groups, four to a screen as the charts screen lays them out, at 80x24,
100x30 and 160x48.

Prints per widget and size the time one redraw takes (data set and the widget rendered, median
of the redraws) and what a reader gets: whether both axes' labels are on screen, and how many tick
labels. The screen's own code draws with the first; the second is set up here with its own API.

    python bench/chart_widgets.py            # 20 redraws a widget and size
    python bench/chart_widgets.py --quick    # 3: that it runs and prints (CI)
"""

from __future__ import annotations

import argparse
import asyncio
import math
import random
import re
import statistics
import time

from _machine import described
from textual.app import App
from textual.containers import Grid
from textual.widget import Widget
from textual_plot import HiResMode, PlotWidget
from textual_plotext import PlotextPlot

SIZES = ((80, 24), (100, 30), (160, 48))
GROUPS = 2000
TICK = re.compile(r"-?\d+(?:\.\d+)?")


def series() -> tuple[list[float], list[float], list[float]]:
    rng = random.Random(0)
    xs = [float(x) for x in range(GROUPS)]
    mean = [0.6 + 0.3 * math.tanh((x - 1000) / 400) + rng.gauss(0, 0.05) for x in xs]
    std = [0.2 + rng.gauss(0, 0.02) for _ in xs]
    return xs, mean, std


def draw_plotext(widget: PlotextPlot, xs: list[float], mean: list[float], std: list[float]) -> None:
    plt = widget.plt
    plt.clear_data()
    plt.clear_figure()
    plt.plot(xs, [m + s for m, s in zip(mean, std, strict=True)], color="gray")
    plt.plot(xs, mean, color="green")
    plt.plot(xs, [m - s for m, s in zip(mean, std, strict=True)], color="gray")
    plt.xlabel("group")
    plt.ylabel("reward")


def draw_plot(widget: PlotWidget, xs: list[float], mean: list[float], std: list[float]) -> None:
    widget.clear()
    for ys, style in (
        ([m + s for m, s in zip(mean, std, strict=True)], "grey50"),
        (mean, "green"),
        ([m - s for m, s in zip(mean, std, strict=True)], "grey50"),
    ):
        widget.plot(xs, ys, line_style=style, hires_mode=HiResMode.BRAILLE)
    widget.set_xlabel("group")
    widget.set_ylabel("reward")


WIDGETS = {"textual-plotext": (PlotextPlot, draw_plotext), "textual-plot": (PlotWidget, draw_plot)}


class Charts(App):
    CSS = "Grid { grid-size: 2 2; }"

    def __init__(self, kind: type[Widget]) -> None:
        super().__init__()
        self.kind = kind

    def compose(self):
        with Grid():
            for _ in range(4):
                yield self.kind()


async def measured(name: str, size: tuple[int, int], redraws: int) -> str:
    kind, draw = WIDGETS[name]
    xs, mean, std = series()
    app = Charts(kind)
    async with app.run_test(size=size) as pilot:
        await pilot.pause(0.2)
        widget = app.query(kind).first()
        times = []
        for _ in range(redraws):
            started = time.perf_counter()
            draw(widget, xs, mean, std)
            widget.render()
            times.append(time.perf_counter() - started)
        for other in app.query(kind):
            draw(other, xs, mean, std)
            other.refresh()
        await pilot.pause(0.3)
        text = "\n".join(line.text for line in app.screen._compositor.render_strips())
    charts = text.split("\n")
    labels = [label for label in ("group", "reward") if label in text]
    ticks = len(TICK.findall("\n".join(charts[: size[1] // 2])))
    return (
        f"{name:16} {size[0]}x{size[1]}: redraw {1000 * statistics.median(times):6.1f} ms, "
        f"axis labels on screen: {', '.join(labels) or 'none'}, tick labels in a chart: {ticks // 2}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 redraws: that it runs (CI)")
    args = parser.parse_args()
    print(described())
    redraws = 3 if args.quick else 20
    for size in SIZES:
        for name in WIDGETS:
            print(asyncio.run(measured(name, size, redraws)))


if __name__ == "__main__":
    main()
