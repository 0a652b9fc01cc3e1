"""``m``: every metric the run logs, known to the overview or not, under its own name."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import ModalScreen
from textual.widgets import DataTable, Input, Static

from vftui.text.printable import one_line
from vftui.training.check_in import number
from vftui.training.follow import Follower
from vftui.ui.widgets.keys_footer import KeysFooter


class MetricsScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,m", "dismiss", "back")]

    def __init__(self, follower: Follower) -> None:
        super().__init__()
        self.follower = follower
        self.rows = follower.table()

    def compose(self) -> ComposeResult:
        yield Static(
            f"{len(self.rows)} metrics: newest value, its step, its early level", id="metrics-title"
        )
        yield Input(placeholder="filter names (substring)", id="metrics-filter")
        yield DataTable(id="metrics-table", cursor_type="row", zebra_stripes=True)
        yield KeysFooter()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns("name", "step", "value", "early")
        self._fill("")
        table.focus()

    @on(Input.Changed, "#metrics-filter")
    def _filtered(self, event: Input.Changed) -> None:
        self._fill(event.value)

    def _fill(self, part: str) -> None:
        table = self.query_one(DataTable)
        table.clear()
        for name, step, value, early in self.rows:
            if part.lower() in name.lower():
                table.add_row(
                    one_line(name),
                    str(step),
                    number(value),
                    "-" if early is None else number(early),
                )
