"""An eval's figures as it runs: each a mean and its 95% interval, drawn on a track so the
interval is seen narrowing as examples come in."""

from __future__ import annotations

from rich.text import Text
from textual.containers import Vertical
from textual.widgets import Sparkline

from vftui.events import EvalReport, Figure
from vftui.text import wording
from vftui.ui.model import DashboardModel
from vftui.ui.widgets.changed_lines import FiguresPanel

TRACK = 8  # cells of the interval's track: the side column is about 30 wide


def track(value: Figure, low: float, high: float) -> Text:
    """``──━━●━─``: the interval and the mean on a track from ``low`` to ``high``."""
    span = (high - low) or 1.0

    def cell(x: float) -> int:
        return max(0, min(TRACK - 1, round((x - low) / span * (TRACK - 1))))

    mean = value["mean"]
    if mean is None:
        return Text("─" * TRACK, style="dim")
    a = cell(value["ci_low"] if value["ci_low"] is not None else mean)
    b = cell(value["ci_high"] if value["ci_high"] is not None else mean)
    m = cell(mean)
    text = Text()
    for i in range(TRACK):
        if i == m:
            text.append("●", style="bold")
        elif a <= i <= b:
            text.append("━", style="cyan")
        else:
            text.append("─", style="dim")
    return text


def render_eval(report: EvalReport | None) -> Text:
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
    width = max(map(len, report.figures), default=0)
    for name, value in report.figures.items():
        bounds = (0.0, 1.0) if name != "reward" else _reward_bounds(value)
        text.append(f"\n{name:<{width}} ").append(f"{wording.figure(value):<13} ").append_text(
            track(value, *bounds)
        )
    text.no_wrap, text.overflow = (
        True,
        "ellipsis",
    )  # a narrow column cuts the track, never wraps a figure
    return text


def _reward_bounds(value: Figure) -> tuple[float, float]:
    """0 to 1, widened to the interval when rewards go beyond it."""
    points = [v for v in (value["ci_low"], value["ci_high"], value["mean"]) if v is not None]
    return min([0.0, *points]), max([1.0, *points])


class EvalFigures(FiguresPanel):
    def render_figures(self, figures: EvalReport | None) -> Text:
        return render_eval(figures)


class EvalPanel(Vertical):
    BORDER_TITLE = "eval · 95% CI over examples"

    def compose(self):
        yield EvalFigures(id="eval-figures")
        yield Sparkline([], id="eval-curve")

    def show(self, model: DashboardModel) -> None:
        """rl: the curve of each eval's mean reward over trainer steps, beside the training reward's."""
        self.query_one(EvalFigures).figures = model.eval_report
        self.query_one(Sparkline).data = [reward for _, reward in model.eval_curve]
