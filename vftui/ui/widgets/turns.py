"""Turns per rollout: average, maximum and a small histogram."""

from __future__ import annotations

from rich.text import Text

from vftui.ui.model import DashboardModel
from vftui.ui.widgets.changed_lines import FiguresPanel

BAR_WIDTH = 12


class TurnsPanel(FiguresPanel[tuple]):
    BORDER_TITLE = "turns"

    def show(self, model: DashboardModel) -> None:
        window = model.window_metrics()
        avg, peak_turns = (
            window.get("metrics/avg_num_turns", 0),
            int(window.get("metrics/max_num_turns", 0)),
        )
        hist, hidden = fit(
            model.turn_histogram(), max(1, self.content_size.height - 1)
        )  # under the averages
        self.figures = (round(avg, 2), peak_turns, tuple(hist), model.filtered, hidden)

    def render_figures(self, figures: tuple) -> Text:
        return render_turns(*figures)


def fit(hist: list[tuple[int, int]], rows: int) -> tuple[list[tuple[int, int]], int]:
    """The histogram in ``rows`` rows: all of it, or its most frequent counts and a row saying how many are not
    shown."""
    if len(hist) <= rows:
        return hist, 0
    kept = sorted(sorted(hist, key=lambda h: -h[1])[: rows - 1])
    return kept, len(hist) - len(kept)


def render_turns(
    avg: float, max_turns: int, hist: tuple[tuple[int, int], ...], filtered: bool, hidden: int
) -> Text:
    text = Text(f"avg {avg:.2f}  max {max_turns}" + ("  (filtered)" if filtered else ""))
    peak = max((count for _, count in hist), default=1)
    for turns, count in hist:
        bar = "█" * max(1, round(count / peak * BAR_WIDTH))
        text.append(f"\n{turns:>3} ").append(bar, style="cyan").append(f" {count}")
    if hidden:
        text.append(f"\n  … {hidden} more turn counts", style="dim")
    return text
