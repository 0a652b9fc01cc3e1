"""``vftui runs`` in a terminal, k9s-style: every run as a row, sortable, filtered with ``/``, refreshed
every two seconds; keys on the selected run: attach, view, pause or resume, stop (asked first).

Attach and view leave this screen and open the run's dashboard (``commands.runs`` does it once the
app has closed, and opens this screen again when that dashboard quits); pause and stop are one control
call on the run's socket.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.widgets import DataTable, Static

from vftui.errors import UserError
from vftui.live.client import control
from vftui.run_files.files import RunFiles
from vftui.run_files.listing import (
    COLUMNS,
    NOT_ANSWERING,
    RunLine,
    all_runs,
    cells,
    kept_elsewhere,
    not_answering,
)
from vftui.text.printable import one_line
from vftui.ui import themes
from vftui.ui.background import in_background
from vftui.ui.lean_output import lean_driver
from vftui.ui.palette import KeyCommands
from vftui.ui.screens.confirm import ConfirmScreen
from vftui.ui.screens.prompt import PromptScreen
from vftui.ui.terminal import in_browser
from vftui.ui.widgets.keys_footer import KeysFooter
from vftui.ui.widgets.status_bar import shorten_left

REFRESH_S = 2.0
SORTS = {
    "started": lambda r: -r.created,
    "state": lambda r: r.state,
    "env": lambda r: r.env,
    "reward": lambda r: -(r.mean_reward or float("-inf")),
    "groups": lambda r: -(r.groups_done or 0),
}
PATH = COLUMNS.index("PATH")
DROPPED_FIRST = ("MODEL", "STARTED", "MODE", "TIME", "ENV")  # when the terminal is narrow
MAX_PATH_TAIL = 60  # cells of a path's run folder and file worth dropping columns for
MIN_FOLDER = 6  # cells of a run folder's name worth keeping, its middle cut, rather than its file's
FOLDER_TIME = len("20260115-102233")  # how a run folder vftui makes begins: its start
SCROLLBAR = 2  # cells: the table's, once its rows are more than it shows
FILTER_TERM = re.compile(r"(reward|groups)(<=|>=|<|>|=)(-?[0-9.]+)$")
FILTER_HELP = (
    "words every row must hold (state, env, mode, model, id, path), and reward<0.5 or groups>=100"
)


def run_filter(text: str) -> Callable[[RunLine], bool]:
    """A predicate from a filter like ``running alphabet reward<0.8``; a term it cannot read is a ValueError."""
    checks: list[Callable[[RunLine], bool]] = []
    for term in text.lower().split():
        if match := FILTER_TERM.match(term):
            name, op, number = match.groups()
            try:
                limit = float(number)
            except ValueError:
                raise ValueError(f"cannot read '{term}'; {FILTER_HELP}") from None
            value = (lambda r: r.mean_reward) if name == "reward" else (lambda r: r.groups_done)
            checks.append(_compared(value, op, limit))
        elif any(c in term for c in "<>="):
            raise ValueError(f"cannot read '{term}'; {FILTER_HELP}")
        else:
            checks.append(_holds(term))
    return lambda r: all(check(r) for check in checks)


def _compared(
    value: Callable[[RunLine], float | None], op: str, limit: float
) -> Callable[[RunLine], bool]:
    """A ``reward<0.5`` term of the filter."""
    return lambda r: _compare(value(r), op, limit)


def _holds(word: str) -> Callable[[RunLine], bool]:
    """A word term of the filter: in one of the row's cells."""
    return lambda r: any(word in cell.lower() for cell in cells(r))


def _compare(value: float | None, op: str, limit: float) -> bool:
    if value is None:  # a run with no reward yet matches no comparison
        return False
    return {
        "<": value < limit,
        "<=": value <= limit,
        ">": value > limit,
        ">=": value >= limit,
        "=": value == limit,
    }[op]


def fit(rows: list[tuple[str, ...]], width: int, scrollbar: bool = False) -> tuple[list[int], int]:
    """The columns a terminal ``width`` cells wide shows, and the cells its path gets (cut from the left):
    the least telling columns go first, until the path has room for its run's folder and file."""
    natural = [max(len(row[i]) for row in [COLUMNS, *rows]) for i in range(len(COLUMNS))]
    tail = max((len(os.sep.join(Path(row[PATH]).parts[-2:])) + 2 for row in rows), default=4)
    want = min(natural[PATH], tail, MAX_PATH_TAIL)
    edges = 2 + (SCROLLBAR if scrollbar else 0)  # the path column's padding, the table's scrollbar
    shown = [i for i in range(len(COLUMNS)) if i != PATH]
    for name in ("", *DROPPED_FIRST):
        if name:
            shown.remove(COLUMNS.index(name))
        room = width - edges - sum(natural[i] + 2 for i in shown)
        if room >= want:
            break
    return [*shown, PATH], max(len("PATH"), min(natural[PATH], room))


def at_home(path: str) -> str:
    """``~/x`` for a path in the user's home folder."""
    home = str(Path.home())
    if home not in ("", os.sep) and (path == home or path.startswith(home + os.sep)):
        return "~" + path[len(home) :]
    return path


def short_path(path: str, width: int) -> str:
    """A run's path in ``width`` cells, keeping what tells it from the others: its run folder and
    file name (the folders in front are often every run's). In less room than the whole path: its
    start, then its folder and file (``/tmp/…/my-run/groups.jsonl``); then these alone
    (``…/my-run/groups.jsonl``); then with the folder's middle cut, its start the longer, which is a
    run folder's time (``…/20260115-102233…sort/groups.jsonl``); then the folder alone
    (``…/20260115-1022…/…``); else its end."""
    if len(path) <= width:
        return path
    parts = path.split(os.sep)
    if len(parts) < 3 or not all(parts[-2:]):
        return shorten_left(path, width)
    folder, name = parts[-2:]
    firsts = 1 if parts[0] else 2  # "~" (or a relative path's first folder), else "/tmp"
    kept = f"…{os.sep}{folder}{os.sep}{name}"
    headed = f"{os.sep.join(parts[:firsts])}{os.sep}{kept}"
    if len(parts) - 2 > firsts and len(headed) <= width:
        return headed
    if len(kept) <= width:
        return kept
    # the folder's middle cut; where that leaves less than its time, the file's name goes instead,
    # if the folder has more to tell (a run folder vftui made: its files are all groups.jsonl)
    cuts = [(name, FOLDER_TIME), *([("…", MIN_FOLDER)] if len(folder) > len(name) else [])]
    for end, least in cuts:
        room = width - len(f"…{os.sep}…{os.sep}{end}")  # the folder's own characters
        if room >= len(folder):
            return f"…{os.sep}{folder}{os.sep}{end}"
        if room >= least:
            last = max(0, min(room // 4, room - FOLDER_TIME))  # its end, once its time is shown
            cut = folder[: room - last] + "…" + folder[len(folder) - last :][:last]
            return f"…{os.sep}{cut}{os.sep}{end}"
    return shorten_left(path, width)


class RunsApp(App[tuple[str, Path] | None]):
    """Exits with ("attach" or "view", the run's jsonl) when a key asks for its dashboard."""

    CSS_PATH = ["app.tcss", "runs.tcss"]  # the dashboard's question and prompt boxes
    TITLE = "vftui runs"
    COMMANDS = App.COMMANDS | {KeyCommands}  # ctrl+p: the keys of the screen in front too
    BINDINGS = [
        Binding(
            "a",
            "open('attach')",
            "attach",
            key_display="enter",
            tooltip="the dashboard on the selected run (running)",
        ),
        Binding(
            "v", "open('view')", "view", tooltip="what the selected run collected, in the viewer"
        ),
        Binding(
            "p",
            "control('toggle_pause')",
            "pause",
            tooltip="pause or resume the selected run",
        ),
        Binding("x", "stop", "stop", tooltip="stop the selected run gracefully (asks first)"),
        Binding("s", "sort", "sort", tooltip="sort by start, state, env, reward, groups"),
        Binding("slash", "filter", "filter", tooltip="show only the runs that match"),
        Binding("q,escape", "quit", "quit"),  # not over a question or the filter's box
        Binding("ctrl+c", "quit", "quit", show=False, priority=True),
    ]

    def __init__(
        self,
        theme_name: str = "vftui-dark",
        extra_themes=None,
        selected: Path | None = None,
        notice: str = "",
    ) -> None:
        """``selected``: the run the cursor starts on (the one a dashboard was opened on); ``notice``: a
        sentence to show at once (why that dashboard could not open)."""
        super().__init__()
        self.every: list[RunLine] = []  # as last asked
        self.lines: list[RunLine] = []  # those shown
        self.sort = "started"
        self.filter_text = ""
        self._selected_at_start, self._notice = selected, notice
        self._layout: tuple[list[int], int] | None = None
        self._asking = False  # a thread is asking every run
        themes.install(self, theme_name, extra_themes)

    def get_driver_class(self) -> type:
        return lean_driver(super().get_driver_class())

    def compose(self) -> ComposeResult:
        yield Static(id="runs-header")
        yield DataTable(id="runs", cursor_type="row", zebra_stripes=True)
        yield KeysFooter()

    def on_mount(self) -> None:
        self.refresh_runs()
        if self._selected_at_start is not None:
            self._move_to(self._selected_at_start)
        if self._notice:
            self.notify(one_line(self._notice), severity="error", markup=False, timeout=10)
        self.set_interval(REFRESH_S, self._ask_again)

    def on_resize(self) -> None:
        self.show_runs()

    def refresh_runs(self) -> None:
        """Every run asked again, then shown."""
        self.every = all_runs()
        self.show_runs()

    class Asked(Message):
        def __init__(self, every: list[RunLine]) -> None:
            super().__init__()
            self.every = every

    def _ask_again(self) -> None:
        """Every two seconds, in a thread: thousands of runs take seconds to ask, and keys must not wait."""
        if not self._asking:
            self._asking = True
            in_background(self, lambda: self.Asked(all_runs()), "runs")

    def on_runs_app_asked(self, message: Asked) -> None:
        self._asking = False
        self.every = message.every
        self.show_runs()

    def show_runs(self) -> None:
        """The runs the filter keeps, in the chosen order, in the columns the width allows; the cursor stays
        on its run."""
        table = self.query_one(DataTable)
        selected = self.selected
        keep = run_filter(self.filter_text)
        # every run in the chosen order wherever its files are; ties newest first (as ``all_runs``)
        self.lines = sorted((r for r in self.every if keep(r)), key=SORTS[self.sort])
        rows = [
            (*cells[:PATH], at_home(cells[PATH]))
            for cells in (tuple(one_line(cell) for cell in cells(line)) for line in self.lines)
        ]
        layout = fit(rows, self.size.width, scrollbar=len(rows) > self.size.height - 3)
        if layout != self._layout:
            self._layout = layout
            table.clear(columns=True)
            table.add_columns(*(COLUMNS[i] for i in layout[0]))
        else:
            table.clear()
        shown, path_width = layout
        for line, row in zip(self.lines, rows, strict=True):
            cut = [*row[:PATH], short_path(row[PATH], path_width)]
            table.add_row(*(cut[i] for i in shown), key=str(line.out_path))
        if selected is not None:
            self._move_to(selected)
        self._say()

    def _move_to(self, path: Path) -> None:
        places = [line.out_path for line in self.lines]
        if path in places:
            self.query_one(DataTable).move_cursor(row=places.index(path))

    def _say(self) -> None:
        every = self.every
        running = sum(line.running for line in every)
        elsewhere = sum(kept_elsewhere(line) for line in every)
        counted = f"{len(every)} runs, {running} running"
        if self.filter_text:
            counted = f"{len(self.lines)} of {len(every)} runs match '{one_line(self.filter_text)}'"
        aside = f" · {elsewhere} kept elsewhere (--out)" if elsewhere else ""
        self.query_one("#runs-header", Static).update(
            f"{counted} · sorted by {self.sort}{aside}", layout=False
        )

    @property
    def selected(self) -> Path | None:
        table = self.query_one(DataTable)
        return (
            self.lines[table.cursor_row].out_path
            if self.lines and 0 <= table.cursor_row < len(self.lines)
            else None
        )

    def _selected_line(self) -> RunLine | None:
        path = self.selected
        return next((line for line in self.lines if line.out_path == path), None)

    def on_data_table_row_selected(self) -> None:
        """Enter on a row: the table's own key for it."""
        self.action_open("attach")

    def action_open(self, how: str) -> None:
        line = self._selected_line()
        if line is None:
            return
        if (
            in_browser()
        ):  # the tab's connection ends with this app: the run opens in a tab of its own
            self.open_url(f"/open/{how}/{line.id}", new_tab=True)
        else:
            self.exit((how, line.out_path))

    def action_stop(self) -> None:
        """Asks first: a stop cannot be taken back (the run finishes the groups in flight, then ends)."""
        line = self._selected_line()
        if line is None:
            return
        if not line.running:
            self.notify(f"run {line.id} is not running ({line.state})", severity="warning")
            return
        question = (
            f"Stop run {line.id} ({one_line(line.env) or 'an env'}, "
            f"{line.groups_done}/{line.groups_total} groups)? It finishes the groups in flight, then ends."
        )
        self.push_screen(
            ConfirmScreen(question),
            lambda yes: self.action_control("stop", line.out_path) if yes else None,
        )

    def action_control(self, call: str, path: Path | None = None) -> None:
        path = path or self.selected
        line = next((line for line in self.lines if line.out_path == path), None)
        if line is None:
            return
        try:
            if line.state == NOT_ANSWERING:
                raise not_answering(line)
            control(RunFiles(line.out_path).socket, lambda controls: getattr(controls, call)())
        except UserError as e:
            self.notify(one_line(str(e)), severity="error", markup=False)
            return
        self.notify(f"{'stopping' if call == 'stop' else 'pause or resume'} sent to run {line.id}")
        self.set_timer(0.5, self._ask_again)

    def action_sort(self) -> None:
        names = list(SORTS)
        self.sort = names[(names.index(self.sort) + 1) % len(names)]
        self.show_runs()

    def action_filter(self) -> None:
        def apply(text: str | None) -> None:
            if text is not None:
                self.filter_text = text.strip()
                self.show_runs()

        def read(text: str) -> str:
            run_filter(text)  # a ValueError says what cannot be read
            return text

        self.push_screen(
            PromptScreen("filter runs (empty shows all)", self.filter_text, read, FILTER_HELP),
            apply,
        )
