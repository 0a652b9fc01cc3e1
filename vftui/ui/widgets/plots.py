"""Drawing on textual-plot's widget, for every charts screen: a chart cleared with its title and
legend on its border (never cut by a short chart, never over its lines), lines thinned to the points
its width holds, round ticks over the data's range, and margins no wider than its labels, so a chart
eight rows tall (six to an 80x24 screen) keeps rows to draw in and both axes labelled."""

from __future__ import annotations

from array import array
from collections.abc import Sequence

from rich.markup import escape
from textual.reactive import reactive
from textual_hires_canvas import Canvas, TextAlign
from textual_plot import HiResMode, NumericAxisFormatter, PlotWidget
from textual_plot.plot_widget import FloatScalar

from vftui.figures.series import nice_ticks, thinned, tick_label

LINE_COLORS = ("cyan", "magenta", "yellow", "blue", "green", "red", "white")  # ANSI colours
LEGEND_COLOR = {"gray": "ansi_bright_black"}  # a colour's markup on the border, where not ansi_<it>
LINE_STYLE = {"gray": "bright_black"}  # a colour's Rich style on the canvas, where not its name
LINES = HiResMode.BRAILLE  # 2x4 dots a cell: the most rows of detail a short chart can have
BARS = HiResMode.QUADRANT  # 2x2 a cell and solid: braille bars read as dots
MARGIN_BELOW = 2  # the x tick labels, then a row for both axes' labels
EDGE = 1e-6  # of a cell: a point this far inside the frame is drawn on its last dots


class Ticks(NumericAxisFormatter):
    """Labels as people write them (``0.25``, ``1200``, ``1.2e+06``) for the ticks ``axes`` set."""

    def get_labels_for_ticks(self, ticks: Sequence[float]) -> list[str]:
        return [tick_label(t) for t in ticks]


class Chart(PlotWidget, can_focus=False):
    """textual-plot's widget with the margins a short chart needs. Its own (2 rows above, 3 below,
    10 columns left) left a chart eight rows tall no row to draw in and cut its labels; here: none
    above, the tick labels and a row below (the y axis's unit at its left, the x axis's label at its
    middle), and a left margin as wide as the longest y tick label. Neither focusable nor zoomable,
    as the plotext charts before it: a live run redraws every second and would undo a zoom."""

    margin_top = reactive(0)
    margin_bottom = reactive(MARGIN_BELOW)
    margin_left = reactive(2)

    def __init__(self, id: str | None = None) -> None:
        super().__init__(id=id, allow_pan_and_zoom=False)
        self.set_x_formatter(Ticks())
        self.set_y_formatter(Ticks())

    def watch_margin_left(self) -> None:
        """The library sizes its canvases anew only on its own layout refresh, and one asked for
        now drew them at their old widths (a y tick label cut, the frame's right edge off the
        chart): asked for once the grid has its new columns."""
        super().watch_margin_left()
        self.call_after_refresh(self.refresh, layout=True)

    def get_hires_pixel_from_coordinate(
        self, x: FloatScalar, y: FloatScalar
    ) -> tuple[FloatScalar, FloatScalar]:
        """Where a value's dot goes, kept inside the frame. The library maps the x axis's last tick
        and the y axis's first onto the frame, which it draws over the lines (a 0% rate vanished):
        they go on the last dots inside, as the other two ends do. A value on a row's boundary goes
        to the row above, the one the library puts that value's tick label on."""
        px, py = super().get_hires_pixel_from_coordinate(x, y)
        inside = self._scale_rectangle
        return min(px, inside.right - EDGE), min(max(py - EDGE, inside.y), inside.bottom - EDGE)

    def _label(self, text: str) -> str:
        return f"[{self.get_component_rich_style('plot--label')}]{escape(text)}"

    def _render_y_label(self) -> None:
        """Under the tick labels at the left (the library's, above the plot, took a row and was
        centred off a narrow margin's left edge)."""
        below = self.query_one("#margin-bottom", Canvas)
        below.write_text(0, MARGIN_BELOW - 1, self._label(self._y_label))

    def _render_x_label(self) -> None:
        """On the row under the x tick labels, at the plot's middle."""
        middle = self.query_one("#plot", Canvas).size.width // 2 + self.margin_left
        below = self.query_one("#margin-bottom", Canvas)
        below.write_text(middle, MARGIN_BELOW - 1, self._label(self._x_label), TextAlign.CENTER)


def begin(widget: Chart, title: str, legend: dict[str, str] | None = None) -> None:
    """The chart cleared, its title and legend (label: colour) on its border."""
    widget.border_title = title
    widget.border_subtitle = "  ".join(
        f"[{LEGEND_COLOR.get(color, f'ansi_{color}')}]━━[/] {escape(label)}"  # a run's name is not markup
        for label, color in (legend or {}).items()
    )
    widget.clear()


def points(widget: Chart) -> int:
    """How many points a line across it can show: braille has two dots a cell across."""
    return max(10, widget.size.width * 2)


def line(widget: Chart, xs: list[float], ys: list[float], color: str) -> None:
    """A line through the points; a lone point as a dot (a line of one point draws nothing)."""
    style = LINE_STYLE.get(color, color)
    if len(xs) == 1:
        widget.scatter(xs, ys, marker_style=style, hires_mode=LINES)
    else:
        widget.plot(xs, ys, line_style=style, hires_mode=LINES)


def axes(
    widget: Chart,
    xs: list[float],
    ys: list[float],
    xlabel: str,
    ylabel: str = "",
    low: float | None = None,
) -> tuple[float, float]:
    """Round ticks over the data's range (``low``: where the y axis starts, a count's 0), the axes
    set to the first and last of them, the left margin to the widest y tick label, and the axes'
    labels. The x axis's ends: where a rule across the whole chart runs."""
    widget.set_xlabel(xlabel)
    widget.set_ylabel(ylabel)
    x_ticks: list[float] = []
    y_ticks: list[float] = []
    if xs:
        width, height = widget.size
        rows = height - MARGIN_BELOW - 2  # inside the plot's frame
        y_low = min(ys) if low is None else low
        y_high = max(max(ys), y_low + 1) if low is not None else max(ys)  # all counts 0: from 0 up
        x_ticks = nice_ticks(min(xs), max(xs), width // 8)
        y_ticks = nice_ticks(y_low, y_high, rows - 2)  # a label on every row crowds
    for ticks, set_ticks, set_limits in (
        (x_ticks, widget.set_xticks, widget.set_xlimits),
        (y_ticks, widget.set_yticks, widget.set_ylimits),
    ):
        if len(ticks) > 1:
            set_ticks(ticks)
            set_limits(ticks[0], ticks[-1])
        else:  # no data, or none finite: the library's own, not the last draw's
            set_ticks(None)
            set_limits(None, None)
    widget.margin_left = 1 + max((len(tick_label(t)) for t in y_ticks), default=3)
    if len(x_ticks) > 1:
        return x_ticks[0], x_ticks[-1]
    return (min(xs), max(xs)) if xs else (0.0, 1.0)


def lines(
    widget: Chart,
    title: str,
    unit: str,
    series: dict[str, list[float]],
    xlabel: str,
    colors: dict[str, str] | None = None,
) -> None:
    """Each named series as a line in its colour (the next of ``LINE_COLORS`` where not given)."""
    colors = colors or dict(zip(series, LINE_COLORS, strict=False))
    begin(widget, title, colors)
    all_xs: list[float] = []
    all_ys: list[float] = []
    for label, values in series.items():
        xs, ys = thinned(values, points(widget))
        if xs:
            line(widget, xs, ys, colors[label])
            all_xs += xs
            all_ys += ys
    axes(widget, all_xs, all_ys, xlabel, unit)


def mean_std(
    widget: Chart, title: str, mean: array | list[float], std: array | list[float]
) -> None:
    """The mean as a line between mean + std and mean - std in gray."""
    begin(widget, title, {"mean reward": "green", "± std": "gray"})
    xs, middle = thinned(mean, points(widget))
    _, spread = thinned(std, points(widget))
    high = [m + s for m, s in zip(middle, spread, strict=True)]
    low = [m - s for m, s in zip(middle, spread, strict=True)]
    if xs:
        line(widget, xs, high, "gray")
        line(widget, xs, low, "gray")
        line(widget, xs, middle, "green")  # last: on top where a short chart's lines meet
    axes(widget, xs, high + low, "group", "reward")


def lines_by_step(
    widget: Chart,
    title: str,
    series: dict[str, list[tuple[int, float]]],
    colors: dict[str, str],
) -> None:
    """Each named series of (step, value) as a line in its colour, on one step axis: runs that began
    or stopped at other steps line up where their steps meet."""
    begin(widget, title, {label: colors[label] for label in series})
    all_xs: list[float] = []
    all_ys: list[float] = []
    for label, found in series.items():
        if not found:
            continue
        xs, ys = thinned([float(v) for _, v in found], points(widget))
        steps = [float(s) for s, _ in found]
        # a bucket's x: the step at its middle position (positions are 1-based halves)
        xs = [steps[min(len(steps) - 1, max(0, int(x) - 1))] for x in xs]
        line(widget, xs, ys, colors[label])
        all_xs += xs
        all_ys += ys
    axes(widget, all_xs, all_ys, "step")
