"""Turns per rollout: average, maximum and a small histogram."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from vftui.ui.model import DashboardModel

BAR_WIDTH = 12


class TurnsPanel(Static):
    def show(self, model: DashboardModel) -> None:
        window = model.window_metrics()
        text = Text()
        text.append(f"avg {window.get('metrics/avg_num_turns', 0):.2f}  max {int(window.get('metrics/max_num_turns', 0))}")
        hist = model.turn_histogram()
        peak = max((count for _, count in hist), default=1)
        for turns, count in hist[-6:]:
            bar = "█" * max(1, round(count / peak * BAR_WIDTH))
            text.append(f"\n{turns:>3} ").append(bar, style="cyan").append(f" {count}")
        self.update(text, layout=False)
