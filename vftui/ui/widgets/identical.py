"""How often a whole group scores the same: no learning signal for GRPO-style trainers."""

from __future__ import annotations

from rich.text import Text
from textual.containers import Vertical
from textual.widgets import Sparkline

from vftui.ui.model import DashboardModel
from vftui.ui.widgets.changed_lines import FiguresPanel


class IdenticalRates(FiguresPanel[tuple[float | None, float | None, float | None, str]]):
    def render_figures(self, figures: tuple[float | None, float | None, float | None, str]) -> Text:
        window, run, alert_above, label = figures
        text = Text()
        text.append(
            f"{label} {_rate(window)}", style="bold red" if alert_above is not None else "bold"
        )
        text.append(f"  run {_rate(run)}")
        if alert_above is not None:
            text.append(f"  > {alert_above:.0%}", style="red")
        return text


class IdenticalPanel(Vertical):
    BORDER_TITLE = "identical scores"

    def compose(self):
        yield IdenticalRates(id="identical-text")
        yield Sparkline([], id="identical-sparkline")

    def show(self, model: DashboardModel) -> None:
        window, run = model.identical_rates()
        alert = window is not None and window > model.identical_alert
        self.set_class(alert, "-alert")
        self.query_one(IdenticalRates).figures = (
            None if window is None else round(window, 2),
            None if run is None else round(run, 2),
            model.identical_alert if alert else None,
            model.window_label,
        )
        history = list(model.identical_history)
        windows = (history[max(0, i - 9) : i + 1] for i in range(len(history)))
        smoothed = [sum(w) / len(w) for w in windows]
        self.query_one(Sparkline).data = smoothed


def _rate(rate: float | None) -> str:
    """A percentage, or - where no group had two rollouts to compare."""
    return "-" if rate is None else f"{rate:.0%}"
