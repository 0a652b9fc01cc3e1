"""An eval's figures as it runs: each a mean and its 95% interval, drawn on a track so the
interval is seen narrowing as examples come in."""

from __future__ import annotations

import math

from rich.console import Console, ConsoleOptions, RenderResult
from rich.text import Text
from textual.containers import Vertical
from textual.widgets import Sparkline

from vftui.events import EvalReport, Figure
from vftui.text import wording
from vftui.ui.model import DashboardModel
from vftui.ui.widgets.changed_lines import FiguresPanel

TRACK = 8  # the fewest cells of the interval's track; a wider panel gives it the rest of its width
FIGURE = 13  # cells of ``0.625 ± 0.084``


def finite(x: float | int | None) -> float | None:
    return float(x) if x is not None and math.isfinite(x) else None


def track(value: Figure, low: float, high: float, cells: int = TRACK) -> Text:
    """``──━━●━─``: the interval and the mean on a track of ``cells`` from ``low`` to ``high``."""
    span = (high - low) if math.isfinite(high - low) and high > low else 1.0

    def cell(x: float) -> int:
        share = min(1.0, max(0.0, (x - low) / span))  # a figure beyond the track sits at its end
        return round(share * (cells - 1))

    mean = finite(value["mean"])
    if mean is None:
        return Text("─" * cells, style="dim")
    ci_low, ci_high = finite(value["ci_low"]), finite(value["ci_high"])
    a = cell(ci_low if ci_low is not None else mean)
    b = cell(ci_high if ci_high is not None else mean)
    m = cell(mean)
    text = Text()
    for i in range(cells):
        if i == m:
            text.append("●", style="bold")
        elif a <= i <= b:
            text.append("━", style="cyan")
        else:
            text.append("─", style="dim")
    return text


def render_eval(report: EvalReport | None, width: int = 0) -> Text:
    """The figures, each with its track as wide as ``width`` leaves it (at least ``TRACK``)."""
    if report is None:
        return Text("waiting for the first examples", style="dim")
    at = f"step {report.step} · " if report.step is not None else ""
    text = Text(
        f"{at}{report.items}/{report.items_total} examples × {report.rollouts_per_item}",
        style="bold",
    )
    text.append(f"  pass ≥ {report.threshold:g}", style="dim")
    if report.errors:
        text.append(
            f"  {report.errors} errors", style="bold red"
        )  # examples that failed to score: in no figure
    names = max(map(len, report.figures), default=0)
    said = {name: wording.figure(value) for name, value in report.figures.items()}
    figure = max([FIGURE, *map(len, said.values())])
    cells = max(TRACK, width - names - figure - 2)
    for name, value in report.figures.items():
        bounds = (0.0, 1.0) if name != "reward" else _reward_bounds(value)
        text.append(f"\n{name:<{names}} ").append(f"{said[name]:<{figure}} ").append_text(
            track(value, *bounds, cells)
        )
    text.no_wrap, text.overflow = (
        True,
        "ellipsis",
    )  # a narrow column cuts the track, never wraps a figure
    return text


def _reward_bounds(value: Figure) -> tuple[float, float]:
    """0 to 1, widened to the interval when rewards go beyond it."""
    points = [
        v for v in map(finite, (value["ci_low"], value["ci_high"], value["mean"])) if v is not None
    ]
    return min([0.0, *points]), max([1.0, *points])


class Sized:
    """The figures drawn at the width the panel has when they are drawn (a resize draws them again)."""

    def __init__(self, report: EvalReport | None) -> None:
        self.report = report

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield render_eval(self.report, options.max_width)


class EvalFigures(FiguresPanel[EvalReport | None]):
    def render_figures(self, figures: EvalReport | None) -> Sized:
        return Sized(figures)


class EvalPanel(Vertical):
    BORDER_TITLE = "eval · 95% CI over examples"

    def compose(self):
        yield EvalFigures(id="eval-figures")
        yield Sparkline([], id="eval-curve")

    def show(self, model: DashboardModel) -> None:
        """rl: the curve of each eval's mean reward over trainer steps, beside the training reward's."""
        self.query_one(EvalFigures).figures = model.eval_report
        self.query_one(Sparkline).data = [reward for _, reward in model.eval_curve]
