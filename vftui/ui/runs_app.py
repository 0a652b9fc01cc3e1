"""``vftui runs`` in a terminal, k9s-style: every run as a row, sortable, refreshed every two seconds;
keys on the selected run: attach, view, pause or resume, stop.

Attach and view leave this screen and open the run's dashboard (``commands.runs`` does it once the
app has closed); pause and stop are one control call on the run's socket.
"""

from __future__ import annotations

from pathlib import Path

from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Footer, Static

from vftui.errors import UserError
from vftui.live.client import control
from vftui.run_files.files import RunFiles
from vftui.run_files.listing import COLUMNS, NOT_ANSWERING, RunLine, all_runs, cells, not_answering
from vftui.text.printable import printable
from vftui.ui import themes
from vftui.ui.lean_output import lean_driver

REFRESH_S = 2.0
SORTS = {
    "started": lambda r: -r.created,
    "state": lambda r: r.state,
    "env": lambda r: r.env,
    "reward": lambda r: -(r.mean_reward or float("-inf")),
    "groups": lambda r: -r.groups_done,
}


class RunsApp(App[tuple[str, Path] | None]):
    """Exits with ("attach" or "view", the run's jsonl) when a key asks for its dashboard."""

    CSS_PATH = "compare.tcss"
    TITLE = "vftui runs"
    BINDINGS = [
        Binding(
            "enter,a",
            "open('attach')",
            "attach",
            tooltip="the dashboard on the selected run (running)",
        ),
        Binding(
            "v", "open('view')", "view", tooltip="what the selected run collected, in the viewer"
        ),
        Binding(
            "p",
            "control('toggle_pause')",
            "pause/resume",
            tooltip="pause or resume the selected run",
        ),
        Binding("x", "control('stop')", "stop", tooltip="stop the selected run gracefully"),
        Binding("s", "sort", "sort", tooltip="sort by start, state, env, reward, groups"),
        Binding("q,ctrl+c,escape", "quit", "quit", priority=True),
    ]

    def __init__(self, theme_name: str = "vftui-dark", extra_themes=None) -> None:
        super().__init__()
        self.lines: list[RunLine] = []
        self.sort = "started"
        themes.install(self, theme_name, extra_themes)

    def get_driver_class(self) -> type:
        return lean_driver(super().get_driver_class())

    def compose(self) -> ComposeResult:
        yield Static(id="compare-header")
        yield DataTable(id="items", cursor_type="row", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(DataTable).add_columns(*COLUMNS)
        self.refresh_runs()
        self.set_interval(REFRESH_S, self.refresh_runs)

    def refresh_runs(self) -> None:
        """Every run again, in the chosen order; the cursor stays on its run."""
        table = self.query_one(DataTable)
        selected = self.selected
        self.lines = sorted(all_runs(), key=SORTS[self.sort])
        table.clear()
        for line in self.lines:
            table.add_row(*(printable(cell) for cell in cells(line)), key=str(line.out_path))
        if selected is not None and selected in [line.out_path for line in self.lines]:
            table.move_cursor(row=[line.out_path for line in self.lines].index(selected))
        running = sum(line.running for line in self.lines)
        self.query_one(Static).update(
            f"{len(self.lines)} runs, {running} running · sorted by {self.sort} "
            "· enter attach, v view, p pause, x stop, s sort"
        )

    @property
    def selected(self) -> Path | None:
        table = self.query_one(DataTable)
        return (
            self.lines[table.cursor_row].out_path
            if self.lines and 0 <= table.cursor_row < len(self.lines)
            else None
        )

    def action_open(self, how: str) -> None:
        if self.selected is not None:
            self.exit((how, self.selected))

    def action_control(self, call: str) -> None:
        path = self.selected
        if path is None:
            return
        try:
            line = next(line for line in self.lines if line.out_path == path)
            if line.state == NOT_ANSWERING:
                raise not_answering(line)
            control(RunFiles(path).socket, lambda controls: getattr(controls, call)())
        except UserError as e:
            self.notify(printable(str(e)), severity="error", markup=False)
            return
        self.notify(
            f"{'stopping' if call == 'stop' else 'pause or resume'} sent to {path.parent.name}"
        )
        self.set_timer(0.5, self.refresh_runs)

    def action_sort(self) -> None:
        names = list(SORTS)
        self.sort = names[(names.index(self.sort) + 1) % len(names)]
        self.refresh_runs()
