"""A question answered with one key per answer (no mouse needed); escape cancels."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static

Answer = tuple[str, str, Any]
"""The keys that give it (comma-separated), its words in the hint, the value the screen returns."""

YES_OR_NO: tuple[Answer, ...] = (("y,enter", "yes", True), ("n", "no", False))


class ConfirmScreen(ModalScreen[Any]):
    """Dismissed with the value of the answer whose key was pressed; escape gives None."""

    BINDINGS = [Binding("escape", "answer(None)", "cancel")]

    def __init__(self, question: str, answers: tuple[Answer, ...] = YES_OR_NO) -> None:
        super().__init__()
        self._question = question
        self._answers = answers
        self.answered = False

    def action_answer(self, value: Any) -> None:
        """Dismissed once: a second key before it has gone (q after y) would pop the screen below it."""
        if not self.answered:
            self.answered = True
            self.dismiss(value)

    def compose(self):
        hint = Text("   ").join(
            Text.assemble((keys.split(",")[0], "bold"), f" {words}")
            for keys, words, _ in self._answers
        )
        with Vertical(id="confirm-box"):
            yield Static(self._question)
            yield Static(hint, classes="hint")

    def on_key(self, event: events.Key) -> None:
        for keys, _, value in self._answers:
            if event.key in keys.split(","):
                event.stop()
                self.action_answer(value)
                return
