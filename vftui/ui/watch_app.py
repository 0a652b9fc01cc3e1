"""``vftui watch``: a trajectory API someone else's run is using, live, with no collector.

A poller thread (``trajectory_api.watch``) puts ``ApiStatus`` snapshots in the inbox; the
app folds them into the same model the dashboard uses and shows the trajectory panel
full size, with the queue's history and a log of what changed.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.widgets import Static

from vftui.ui import themes
from vftui.ui.inbox import TICK_S, Inbox
from vftui.ui.lean_output import lean_driver
from vftui.ui.model import DashboardModel
from vftui.ui.widgets.keys_footer import KeysFooter
from vftui.ui.widgets.log_panel import LogPanel
from vftui.ui.widgets.trajectory_panel import TrajectoryPanel


class WatchApp(App[None]):
    CSS_PATH = "app.tcss"
    TITLE = "vftui watch"
    BINDINGS = [Binding("q,ctrl+c", "quit", "quit", priority=True)]

    def __init__(
        self, inbox: Inbox, api_url: str, theme_name: str = "vftui-dark", extra_themes=None
    ) -> None:
        super().__init__()
        self.inbox = inbox
        self.api_url = api_url
        self.model = DashboardModel()
        themes.install(self, theme_name, extra_themes)

    def get_driver_class(self) -> type:
        return lean_driver(super().get_driver_class())

    def compose(self) -> ComposeResult:
        yield Static(id="status")
        yield TrajectoryPanel(id="watch-api")
        yield LogPanel(id="log")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.query_one("#log").border_title = "changes"  # here the log is of what changed
        header = (
            Text("watch ", style="bold")
            .append(self.api_url)
            .append("  (no collector: read only)", style="dim")
        )
        self.query_one("#status", Static).update(header)
        self.set_interval(TICK_S, self.tick)

    def tick(self) -> None:
        if self.model.apply(self.inbox.drain(1000)):
            self.query_one(TrajectoryPanel).show(self.model)
            self.query_one(LogPanel).show(self.model)
