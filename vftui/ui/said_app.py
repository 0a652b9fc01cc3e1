"""A sentence shown in a served tab: a session that cannot start (its run ended, its file went away) says
why where its reader is, since a served session's stderr reaches nobody's screen."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.widgets import Footer, Static


class SaidApp(App[None]):
    CSS_PATH = "said.tcss"
    BINDINGS = [("q", "quit", "close")]

    def __init__(self, sentence: str) -> None:
        super().__init__()
        self.sentence = sentence

    def compose(self) -> ComposeResult:
        yield Static(
            f"{self.sentence}\n\nq ends this session; close the tab.", id="said", markup=False
        )
        yield Footer()
