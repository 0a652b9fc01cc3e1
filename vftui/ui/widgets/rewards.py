"""Recent groups, one row each, with every rollout's reward as a coloured cell."""

from __future__ import annotations

from rich.text import Text
from textual.containers import Vertical
from textual.widgets import DataTable, Sparkline

from vftui import stats
from vftui.events import GroupCollected
from vftui.ui.model import DashboardModel

BLOCKS = "▁▂▃▄▅▆▇█"
COLOURS = ["red", "dark_orange", "yellow", "green_yellow", "green"]


def reward_cells(scores: list[float], low: float, high: float) -> Text:
    text = Text()
    span = (high - low) or 1.0
    for score in scores:
        level = min(1.0, max(0.0, (score - low) / span))
        text.append(BLOCKS[round(level * (len(BLOCKS) - 1))], style=COLOURS[round(level * (len(COLOURS) - 1))])
    return text


class RewardsTable(DataTable):
    """Rows keyed by group index; new groups are appended, the oldest dropped."""

    filter_text = ""

    def on_mount(self) -> None:
        self.cursor_type = "row"
        self.zebra_stripes = True
        for label, key in (("#", "n"), ("item", "item"), ("rewards", "r"), ("mean", "mean"),
                           ("std", "std"), ("=", "same"), ("T", "t")):
            self.add_column(label, key=key)

    def sync(self, model: DashboardModel) -> None:
        groups = model.visible_groups()
        if not groups:
            self.clear()
            self.filter_text = model.filter_text
            return
        scores = [s for g in model.groups for s in g.scores]
        low, high = min(scores), max(scores)
        keep = {str(g.index) for g in groups}
        for key in [k.value for k in self.rows if k.value not in keep]:
            self.remove_row(key)
        follow = self.row_count == 0 or self.cursor_row >= self.row_count - 1
        if model.filter_text != self.filter_text:
            self.filter_text = model.filter_text
            self.clear()  # rebuild in order
        for g in groups:
            if str(g.index) not in self.rows:
                self.add_row(*self.cells(g, low, high), key=str(g.index))
        if follow:
            self.move_cursor(row=self.row_count - 1, animate=False)

    @staticmethod
    def cells(g: GroupCollected, low: float, high: float) -> list:
        return [
            str(g.index), str(g.item), reward_cells(g.scores, low, high), f"{stats.mean(g.scores):.3f}",
            f"{stats.population_std(g.scores):.3f}", Text("=", style="bold yellow") if g.identical else "",
            f"{g.temperature:.2f}",
        ]


class RewardsPanel(Vertical):
    def compose(self):
        yield RewardsTable(id="rewards-table")
        yield Sparkline([], id="reward-sparkline")

    def show(self, model: DashboardModel) -> None:
        self.query_one(RewardsTable).sync(model)
        self.query_one(Sparkline).data = list(model.reward_history)
