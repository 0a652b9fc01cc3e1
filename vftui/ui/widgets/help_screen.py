"""``?``: every key, with what it does."""

from __future__ import annotations

from rich.table import Table
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,question_mark", "dismiss", "close")]

    def __init__(self, bindings: list[tuple[str, str]]) -> None:
        super().__init__()
        self._rows = bindings

    def compose(self):
        table = Table(box=None, show_header=False, padding=(0, 2))
        table.add_column(style="bold")
        table.add_column()
        for keys, description in self._rows:
            table.add_row(keys, description)
        with Vertical(id="help-box"):
            yield Static("[b]vftui keys[/b]  (esc closes)", id="help-title")
            yield Static(table)
