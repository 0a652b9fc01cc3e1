"""How often a whole group scores the same: no learning signal for GRPO-style trainers."""

from __future__ import annotations

from rich.text import Text
from textual.containers import Vertical
from textual.widgets import Sparkline

from vftui.ui.model import DashboardModel
from vftui.ui.widgets.changed_lines import FiguresPanel


class IdenticalRates(FiguresPanel):
    def render_figures(self, figures: tuple[float, float, float | None, str]) -> Text:
        window, run, alert_above, label = figures
        text = Text()
        text.append(
            f"{label} {window:.0%}", style="bold red" if alert_above is not None else "bold"
        )
        text.append(f"  run {run:.0%}")
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
        alert = window > model.identical_alert
        self.set_class(alert, "-alert")
        self.query_one(IdenticalRates).figures = (
            round(window, 2),
            round(run, 2),
            model.identical_alert if alert else None,
            model.window_label,
        )
        history = list(model.identical_history)
        windows = (history[max(0, i - 9) : i + 1] for i in range(len(history)))
        smoothed = [sum(w) / len(w) for w in windows]
        self.query_one(Sparkline).data = smoothed
