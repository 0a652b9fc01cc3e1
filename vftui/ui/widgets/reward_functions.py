"""Per reward function and per state metric: the window's mean and the run's."""

from __future__ import annotations

from rich.table import Table
from textual.widgets import Static

from vftui.ui.model import DashboardModel


def fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


class RewardFunctionsPanel(Static):
    def show(self, model: DashboardModel) -> None:
        table = Table(box=None, expand=True, padding=(0, 0, 0, 1), show_edge=False)
        table.add_column("function", no_wrap=True, overflow="ellipsis", ratio=1)
        table.add_column("window", justify="right", min_width=6, no_wrap=True)
        table.add_column("run", justify="right", min_width=6, no_wrap=True)
        window, run = model.window_metrics(), model.run_metrics()
        table.add_row("reward", fmt(window.get("metrics/mean_reward")), fmt(run.get("metrics/mean_reward")),
                      style="bold")
        for name, w, r in model.reward_function_rows():
            table.add_row(name, fmt(w), fmt(r))
        self.update(table, layout=False)
