"""The app of ``vftui watch RUN_DIR``: it holds the training screen and the global keys."""

from __future__ import annotations

from collections.abc import Callable

from textual.app import App
from textual.binding import Binding

from vftui.training.follow import Follower, Snapshot
from vftui.ui import themes
from vftui.ui.lean_output import lean_driver
from vftui.ui.training.screen import TrainingScreen
from vftui.ui.training.tokens_screen import DecoderLoader


class TrainingApp(App[None]):
    CSS_PATH = "training.tcss"
    TITLE = "vftui watch"
    BINDINGS = [Binding("q,ctrl+c", "quit", "quit", priority=True)]

    def __init__(
        self,
        follower: Follower,
        every_s: float = 1.0,
        theme_name: str = "vftui-dark",
        extra_themes=None,
        on_change: Callable[[Snapshot, str], None] | None = None,
        load_decoder: DecoderLoader | None = None,
        others: list[Follower] | None = None,
    ) -> None:
        super().__init__()
        self.training = TrainingScreen(follower, every_s, on_change, load_decoder, others)
        themes.install(self, theme_name, extra_themes)

    def get_driver_class(self) -> type:
        return lean_driver(super().get_driver_class())

    def on_mount(self) -> None:
        self.push_screen(self.training)
