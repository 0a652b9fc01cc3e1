"""Drawing on textual-plotext's widget, for every charts screen: a chart cleared with its title and
legend on its border (never cut by a short chart, never over its lines), lines thinned to the points
its width holds, and round ticks over the data's range."""

from __future__ import annotations

from rich.markup import escape
from textual_plotext import PlotextPlot

from vftui.figures.series import nice_ticks, thinned, tick_label

LINE_COLORS = ("cyan", "magenta", "yellow", "blue", "green", "red", "white")  # plotext's names
LEGEND_COLOR = {"gray": "ansi_bright_black"}  # a plotext colour's markup, where not ansi_<it>


def begin(widget: PlotextPlot, title: str, legend: dict[str, str] | None = None):
    """The chart cleared, its title and legend (label: plotext colour) on its border; its plotext."""
    widget.border_title = title
    widget.border_subtitle = "  ".join(
        f"[{LEGEND_COLOR.get(color, f'ansi_{color}')}]━━[/] {escape(label)}"  # a run's name is not markup
        for label, color in (legend or {}).items()
    )
    plt = widget.plt
    plt.clear_data()
    plt.clear_figure()
    return plt


def points(widget: PlotextPlot) -> int:
    """How many points a line across it can show: plotext draws two a cell."""
    return max(10, widget.size.width * 2)


def axes(widget: PlotextPlot, xs: list[float], ys: list[float], low: float | None = None) -> None:
    """Round ticks over the data's range (``low``: where the y axis starts, a count's 0), the axes set to
    the first and last of them."""
    plt = widget.plt
    if not xs:
        return
    width, height = widget.size
    y_low = min(ys) if low is None else low
    y_high = max(max(ys), y_low + 1) if low is not None else max(ys)  # all counts 0: from 0 up
    for ticks, set_ticks, set_limits in (
        (nice_ticks(min(xs), max(xs), width // 8), plt.xticks, plt.xlim),
        (nice_ticks(y_low, y_high, height - 6), plt.yticks, plt.ylim),  # its rows
    ):
        if len(ticks) > 1:
            set_ticks(ticks, [tick_label(t) for t in ticks])
            set_limits(ticks[0], ticks[-1])


def lines(
    widget: PlotextPlot,
    title: str,
    unit: str,
    series: dict[str, list[float]],
    xlabel: str,
    colors: dict[str, str] | None = None,
) -> None:
    """Each named series as a line in its colour (the next of ``LINE_COLORS`` where not given)."""
    colors = colors or dict(zip(series, LINE_COLORS, strict=False))
    plt = begin(widget, title, colors)
    all_xs: list[float] = []
    all_ys: list[float] = []
    for label, values in series.items():
        xs, ys = thinned(values, points(widget))
        if xs:
            plt.plot(xs, ys, color=colors[label])
            all_xs += xs
            all_ys += ys
    axes(widget, all_xs, all_ys)
    plt.xlabel(xlabel)
    plt.ylabel(unit)
    widget.refresh()


def lines_by_step(
    widget: PlotextPlot,
    title: str,
    series: dict[str, list[tuple[int, float]]],
    colors: dict[str, str],
) -> None:
    """Each named series of (step, value) as a line in its colour, on one step axis: runs that began
    or stopped at other steps line up where their steps meet."""
    plt = begin(widget, title, {label: colors[label] for label in series})
    all_xs: list[float] = []
    all_ys: list[float] = []
    for label, found in series.items():
        if not found:
            continue
        xs, ys = thinned([float(v) for _, v in found], points(widget))
        steps = [float(s) for s, _ in found]
        # a bucket's x: the step at its middle position (positions are 1-based halves)
        xs = [steps[min(len(steps) - 1, max(0, int(x) - 1))] for x in xs]
        plt.plot(xs, ys, color=colors[label])
        all_xs += xs
        all_ys += ys
    axes(widget, all_xs, all_ys)
    plt.xlabel("step")
    widget.refresh()
