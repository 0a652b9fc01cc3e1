"""A yes/no question, answered with y/n (or enter/escape); no mouse needed."""

from __future__ import annotations

from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static


class ConfirmScreen(ModalScreen[bool]):
    BINDINGS = [
        Binding("y,enter", "answer(True)", "yes"),
        Binding("n,escape", "answer(False)", "no"),
    ]

    def __init__(self, question: str) -> None:
        super().__init__()
        self._question = question

    def compose(self):
        with Vertical(id="confirm-box"):
            yield Static(self._question)
            yield Static("[b]y[/b] yes   [b]n[/b] no", classes="hint")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
