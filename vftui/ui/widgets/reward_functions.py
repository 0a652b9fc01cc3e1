"""Per reward function and per state metric: the window's mean and the run's."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from vftui.ui.model import DashboardModel
from vftui.ui.widgets.changed_lines import FiguresPanel


def fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


class RewardFunctionsPanel(FiguresPanel[tuple]):
    BORDER_TITLE = "reward functions"

    def show(self, model: DashboardModel) -> None:
        window, run = model.window_metrics(), model.run_metrics()
        kept: tuple[tuple[str, str, str], ...] = ()
        if model.dropped:  # every scored group counts in "reward"; this one is over those sent
            kept = (
                (
                    "reward (sent)",
                    fmt(window.get("metrics/mean_reward_kept")),
                    fmt(run.get("metrics/mean_reward_kept")),
                ),
            )
        rows = (
            ("reward", fmt(window.get("metrics/mean_reward")), fmt(run.get("metrics/mean_reward"))),
            *kept,
            *((name, fmt(w), fmt(r)) for name, w, r in model.reward_function_rows()),
        )
        room = max(2, self.content_size.height - 1)  # under the header
        if len(rows) > room:  # say what does not fit rather than drop it silently
            rows = (*rows[: room - 1], (f"… {len(rows) - room + 1} more (g charts them)", "", ""))
        self.figures = (rows, model.window_label)

    def render_figures(self, figures: tuple) -> Table:
        return render_table(*figures)


def render_table(rows: tuple[tuple[str, str, str], ...], label: str) -> Table:
    table = Table(box=None, expand=True, padding=(0, 0, 0, 1), show_edge=False)
    table.add_column("function", no_wrap=True, overflow="ellipsis", ratio=1)
    table.add_column(label, justify="right", min_width=6, no_wrap=True)
    table.add_column("run", justify="right", min_width=6, no_wrap=True)
    for i, row in enumerate(rows):
        table.add_row(
            *map(Text, row), style="bold" if i == 0 else None
        )  # names are the env's, not markup
    return table
