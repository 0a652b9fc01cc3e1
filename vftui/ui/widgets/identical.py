"""How often a whole group scores the same: no learning signal for GRPO-style trainers."""

from __future__ import annotations

from rich.text import Text
from textual.containers import Vertical
from textual.widgets import Sparkline

from vftui.ui.model import DashboardModel
from vftui.ui.widgets.quiet_static import QuietStatic


class IdenticalPanel(Vertical):
    def compose(self):
        yield QuietStatic(id="identical-text")
        yield Sparkline([], id="identical-sparkline")

    def show(self, model: DashboardModel) -> None:
        window, run = model.identical_rates()
        alert = window > model.identical_alert
        self.set_class(alert, "-alert")
        text = Text()
        text.append(f"window {window:.0%}", style="bold red" if alert else "bold")
        text.append(f"  run {run:.0%}")
        if alert:
            text.append(f"  > {model.identical_alert:.0%}", style="red")
        self.query_one("#identical-text", QuietStatic).show_if_changed(text.markup, lambda: text)
        history = list(model.identical_history)
        windows = (history[max(0, i - 9) : i + 1] for i in range(len(history)))
        smoothed = [sum(w) / len(w) for w in windows]
        self.query_one(Sparkline).data = smoothed
