"""The rewards panel: the recent groups' table over a sparkline of mean reward."""

from __future__ import annotations

from textual.containers import Vertical
from textual.widgets import Sparkline

from vftui.ui.model import SORTS, DashboardModel
from vftui.ui.widgets.group_table import GroupTable


class RewardsPanel(Vertical):
    BORDER_TITLE = "rewards"
    _title = BORDER_TITLE

    def compose(self):
        yield GroupTable(id="rewards-table")
        yield Sparkline([], id="reward-sparkline")

    def show(self, model: DashboardModel) -> None:
        self.query_one(GroupTable).sync(model.visible_groups(), model.score_range())
        order = "" if model.sort == "arrival" else f" · {SORTS[model.sort][0]}"
        shown = f" · filter: {model.filter_text}" if model.filter_text else ""
        title = f"{self.BORDER_TITLE}{order}{shown}"
        if (
            title != self._title
        ):  # Textual repaints the whole panel on every assignment, changed or not
            self._title = self.border_title = title
        self.query_one(Sparkline).data = list(model.reward_history)
