"""``t``: type an exact sampling temperature for the next groups."""

from __future__ import annotations

from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.validation import Number
from textual.widgets import Input, Static


class TemperatureScreen(ModalScreen[float | None]):
    BINDINGS = [Binding("escape", "cancel", "cancel")]

    def __init__(self, current: float) -> None:
        super().__init__()
        self._current = current

    def compose(self):
        with Vertical(id="temperature-box"):
            yield Static("temperature for the next groups (0 – 2), enter to apply, esc to cancel")
            yield Input(value=f"{self._current:.2f}", validators=[Number(minimum=0, maximum=2)], id="temperature-input")
            yield Static("", id="temperature-error", classes="hint")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.validation_result is not None and not event.validation_result.is_valid:
            self.query_one("#temperature-error", Static).update("a number between 0 and 2, please")
            return
        self.dismiss(float(event.value))

    def action_cancel(self) -> None:
        self.dismiss(None)
