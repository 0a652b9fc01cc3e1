"""One line of input in a box: ``/`` types a filter, ``t`` an exact temperature."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static


class PromptScreen(ModalScreen[Any]):
    """Dismissed with ``read(text)``'s value; a ValueError from it is shown under the input instead."""

    BINDINGS = [Binding("escape", "cancel", "cancel")]

    def __init__(
        self, question: str, value: str, read: Callable[[str], Any], hint: str = ""
    ) -> None:
        super().__init__()
        self._question, self._value, self._read, self._hint = question, value, read, hint

    def compose(self):
        with Vertical(classes="prompt-box"):
            yield Static(f"{self._question}, enter to apply, esc to cancel", markup=False)
            yield Input(value=self._value)
            yield Static(
                self._hint, classes="hint prompt-error", markup=False
            )  # it may quote what was typed

    def on_input_submitted(self, event: Input.Submitted) -> None:
        try:
            value = self._read(event.value)
        except ValueError as e:
            self.query_one(".prompt-error", Static).update(str(e))
            return
        self.dismiss(value)

    def action_cancel(self) -> None:
        self.dismiss(None)
