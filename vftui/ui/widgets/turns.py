"""Turns per rollout: average, maximum and a small histogram."""

from __future__ import annotations

from rich.text import Text

from vftui.ui.model import DashboardModel
from vftui.ui.widgets.quiet_static import QuietStatic

BAR_WIDTH = 12


class TurnsPanel(QuietStatic):
    def show(self, model: DashboardModel) -> None:
        window = model.window_metrics()
        avg, peak_turns = window.get("metrics/avg_num_turns", 0), int(window.get("metrics/max_num_turns", 0))
        hist = tuple(model.turn_histogram()[-6:])
        self.show_if_changed((round(avg, 2), peak_turns, hist), lambda: render_turns(avg, peak_turns, hist))


def render_turns(avg: float, max_turns: int, hist: tuple[tuple[int, int], ...]) -> Text:
    text = Text(f"avg {avg:.2f}  max {max_turns}")
    peak = max((count for _, count in hist), default=1)
    for turns, count in hist:
        bar = "█" * max(1, round(count / peak * BAR_WIDTH))
        text.append(f"\n{turns:>3} ").append(bar, style="cyan").append(f" {count}")
    return text
