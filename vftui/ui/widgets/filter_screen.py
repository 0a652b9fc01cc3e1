"""``/``: show only the groups that match, e.g. ``varied reward<0.8``."""

from __future__ import annotations

from collections.abc import Callable

from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from vftui.ui.model import FILTER_HELP


class FilterScreen(ModalScreen[str | None]):
    BINDINGS = [Binding("escape", "cancel", "cancel")]

    def __init__(self, current: str, check: Callable[[str], None]) -> None:
        super().__init__()
        self._current = current
        self._check = check

    def compose(self):
        with Vertical(id="filter-box"):
            yield Static("filter groups (empty shows all), enter to apply, esc to cancel")
            yield Input(value=self._current, placeholder="varied reward<0.8", id="filter-input")
            yield Static(FILTER_HELP, id="filter-error", classes="hint", markup=False)  # it quotes what was typed

    def on_input_submitted(self, event: Input.Submitted) -> None:
        try:
            self._check(event.value)
        except ValueError as e:
            self.query_one("#filter-error", Static).update(str(e))
            return
        self.dismiss(event.value)

    def action_cancel(self) -> None:
        self.dismiss(None)
