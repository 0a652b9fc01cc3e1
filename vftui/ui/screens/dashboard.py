"""The dashboard: the run's status line, its groups and their tokens, the side panels and the log.

The app folds the run's events into the model each tick (a batch: a fast run sends hundreds a second)
and hands it down (``show``), which sets this screen's reactives: what they change (the mode's
layout, the panels once the model has news, the preview once the run's state moves) is each one's
watcher. This screen owns the widgets that draw it and the keys that steer the run, each a call on the
run's controls (none for a viewed file, whose steering keys are hidden). What it learns on its own
(the tokenizer, a search, an export) comes back to it as a message.
"""

from __future__ import annotations

import math
import os
import shlex
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from textual import on
from textual.app import App, ComposeResult, SuspendNotSupported
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.reactive import reactive
from textual.screen import Screen
from textual.widget import Widget

from vftui.errors import RunEnded, Unanswered
from vftui.events import GroupCollected, Mode, RunStarted, RunState
from vftui.figures.group_filter import FILTER_HELP, parse_filter, search_terms
from vftui.run_controls import MAX_TEMPERATURE, MIN_TEMPERATURE, RunControls, checked_temperature
from vftui.text import wording
from vftui.text.printable import printable, with_texts
from vftui.ui import exporting
from vftui.ui.background import in_background
from vftui.ui.decode import TokenDecoder
from vftui.ui.model import SORTS, DashboardModel
from vftui.ui.pager_text import pager_text
from vftui.ui.screens.best_worst import BestWorstScreen
from vftui.ui.screens.health import HealthScreen
from vftui.ui.screens.help import HelpScreen, help_rows, key_names
from vftui.ui.screens.prompt import PromptScreen
from vftui.ui.widgets.eval_panel import EvalPanel
from vftui.ui.widgets.group_table import MOVE, GroupTable
from vftui.ui.widgets.identical import IdenticalPanel
from vftui.ui.widgets.keys_footer import KeysFooter
from vftui.ui.widgets.log_panel import LogPanel
from vftui.ui.widgets.reward_functions import RewardFunctionsPanel
from vftui.ui.widgets.rewards import RewardsPanel
from vftui.ui.widgets.status_bar import StatusBar
from vftui.ui.widgets.token_preview import TokenPreview
from vftui.ui.widgets.trajectory_panel import TrajectoryPanel
from vftui.ui.widgets.turns import TurnsPanel

PREVIEW_FOLLOW_S = 2.0  # a preview is a screenful of styled tokens: following the newest group, redrawn this seldom
TEMPERATURE_RANGE = f"{MIN_TEMPERATURE:g}–{MAX_TEMPERATURE:g}"
TEMPERATURE_KEYS = f"sampling temperature ±0.1 for the next groups ({TEMPERATURE_RANGE})"


def read_temperature(text: str) -> float:
    """A typed temperature; a ValueError says what is wrong with it."""
    try:
        return checked_temperature(float(text))
    except ValueError:
        raise ValueError(f"a number from {TEMPERATURE_RANGE}, please") from None


class Panel(Protocol):
    """A side panel: it draws from the model as the app hands it down."""

    def show(self, model: DashboardModel) -> None: ...


def steer(node: Widget | App[Any], call: Callable[[], object]) -> bool:
    """Make a call on the run's controls; False when the run refuses it (it has ended). Either that or a
    late answer is said."""
    try:
        call()
    except (
        RunEnded,
        Unanswered,
    ) as e:  # ended: nothing was done; unanswered: it may still act, late
        node.notify(printable(str(e)), severity="warning", markup=False)
        return not isinstance(e, RunEnded)
    return True


class DashboardScreen(Screen[None]):
    # Classes for app.tcss: -narrow and -low drop the side column; -short (under 36 rows) gives the
    # turns panel's rows to the trajectory API's in rl mode.
    HORIZONTAL_BREAKPOINTS = [
        (0, "-narrow"),
        (70, "-medium"),
        (120, "-wide"),
    ]  # -wide: the side column grows
    VERTICAL_BREAKPOINTS = [(0, "-low"), (20, "-short"), (36, "-tall")]
    BINDINGS = [
        Binding(
            "space,p",
            "toggle_pause",
            "pause",
            tooltip="pause or resume (pausing… until the groups in flight finish)",
        ),
        Binding(
            "plus,equals_sign", "temperature(0.1)", "T+", key_display="+", tooltip=TEMPERATURE_KEYS
        ),
        Binding(
            "minus,underscore",
            "temperature(-0.1)",
            "T-",
            key_display="-",
            show=False,
            tooltip=TEMPERATURE_KEYS,
        ),
        Binding("t", "type_temperature", "set T", show=False, tooltip="type an exact temperature"),
        Binding(
            "d",
            "dump",
            "dump",
            tooltip="dump the groups the filter shows (all without one) to a new jsonl, as collected",
        ),
        Binding(
            "x",
            "export",
            "export",
            show=False,  # at 80 columns the footer keeps help; ? and the palette list it
            tooltip="export the rollouts of the groups the filter shows as training data "
            "(.parquet: prime-rl's SFT; .jsonl: TRL's messages), as vftui export does",
        ),
        Binding("j", "cursor(1)", "next group", show=False, tooltip=MOVE),
        Binding("k", "cursor(-1)", "previous group", show=False, tooltip=MOVE),
        Binding(
            "enter",
            "next_rollout",
            "rollout",
            show=False,
            tooltip="next rollout of the selected group",
        ),
        Binding(
            "backspace",
            "next_rollout(-1)",
            "rollout back",
            show=False,
            tooltip="the previous rollout of the selected group",
        ),
        Binding(
            "f",
            "toggle_fold",
            "fold prompt",
            show=False,
            tooltip="fold the prompt and tool schemas away: the rollout from the model's first words",
        ),
        Binding(
            "v",
            "pager",
            "pager",
            show=False,
            tooltip="open the rollout in $PAGER (less by default)",
        ),
        Binding(
            "b",
            "best_worst",
            "best vs worst",
            show=False,
            tooltip="the selected group's best and worst rollouts side by side",
        ),
        Binding(
            "i", "toggle_ids", "token ids", show=False, tooltip="show token ids in the preview"
        ),
        Binding("slash", "filter", "filter", tooltip=f"filter groups ({FILTER_HELP})"),
        Binding(
            "o",
            "cycle_sort",
            "order",
            show=False,
            tooltip="order the table: " + "; ".join(label for label, _ in SORTS.values()),
        ),
        Binding(
            "h", "health", "health", tooltip="the run's health: truncation, drops, requests, alerts"
        ),
        Binding(
            "g",
            "charts",
            "charts",
            show=False,
            tooltip="the run over time: reward ± std, functions, histogram, "
            "length against the cap, rates; in rl lag, queue, KV cache",
        ),
        Binding("question_mark", "help", "help", tooltip="this list"),
    ]

    # Bound to the preview (``data_bind``), which repaints itself; a reactive of the app's own would
    # repaint the whole screen on each change (a full screen each time the preview follows a group).
    rollout: reactive[int] = reactive(
        0, init=False, repaint=False
    )  # enter: the next rollout of the group in the preview
    show_ids: reactive[bool] = reactive(False, init=False, repaint=False)  # i
    fold: reactive[bool] = reactive(False, init=False, repaint=False)  # f
    previewed: reactive[GroupCollected | None] = reactive(
        None, always_update=True, init=False, repaint=False
    )
    # The model's, set down each tick by ``show``: each watcher redraws what depends on it alone.
    run_started: reactive[RunStarted | None] = reactive(None, init=False, repaint=False)
    version: reactive[int] = reactive(-1, init=False, repaint=False)  # the model's: its panels
    state: reactive[RunState] = reactive(RunState.STARTING, init=False, repaint=False)

    def __init__(self, model: DashboardModel, controls: RunControls | None) -> None:
        super().__init__()
        self.model, self.controls = model, controls
        self.exports = exporting.Running()
        self.decoder = TokenDecoder(
            loading=True
        )  # until the run says which tokenizer, and it is loaded
        self._pager_asked = False  # v while the tokenizer loads: the pager opens once it has
        self._previewed: int | None = None  # the number of the group in the preview
        self._picked = False  # the user chose it: it stays until the user moves
        self._preview_at = 0.0

    def compose(self) -> ComposeResult:
        yield StatusBar(id="status")
        with Horizontal(id="main"):
            with Vertical(id="left"):
                yield RewardsPanel(id="rewards")
                yield TokenPreview(id="tokens").data_bind(
                    DashboardScreen.rollout,
                    DashboardScreen.show_ids,
                    DashboardScreen.fold,
                    group=DashboardScreen.previewed,
                )
            with Vertical(id="right"):
                yield RewardFunctionsPanel(id="functions")
                yield EvalPanel(id="eval")
                yield TurnsPanel(id="turns")
                yield IdenticalPanel(id="identical")
                yield TrajectoryPanel(id="trajectory")
                yield LogPanel(id="log")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.panels: list[Panel] = [
            self.query_one(RewardsPanel),
            self.query_one(RewardFunctionsPanel),
            self.query_one(EvalPanel),
            self.query_one(TurnsPanel),
            self.query_one(IdenticalPanel),
            self.query_one(TrajectoryPanel),
            self.query_one(LogPanel),
        ]
        self.status_bar = self.query_one(StatusBar)
        self.rewards = self.query_one(RewardsPanel)
        self.table = self.query_one(GroupTable)
        self.preview = self.query_one(TokenPreview)
        self.preview.decoder = self.decoder
        self.table.focus()
        self._show_loading()
        self.show()

    # -- attributes down ----------------------------------------------------------------

    def redraw(self) -> None:
        """The model again, after a key changed what it shows (a filter, an order: a new version)."""
        self.show()

    def show(self) -> None:
        """The model as it is now, after a tick folded what came: its facts down to the reactives (the
        order matters: the panels, the table among them, before the preview that reads the table)."""
        model = self.model
        self.run_started = model.run_started
        self.version = model.version
        self.state = model.state
        self.set_class(
            model.eval_report is not None and model.eval_report.step is not None, "-evals"
        )
        self.status_bar.show(model)  # its clock moves every tick
        if not self._picked:  # a group the user picked stays
            self.refresh_preview(force=False)

    def watch_run_started(self, started: RunStarted | None) -> None:
        """The run said what it is: the mode's layout, and its tokenizer for the preview."""
        self._show_loading()
        if started is None:
            return
        self.set_class(started.mode is Mode.RL, "-rl")
        self.set_class(started.mode is Mode.EVAL, "-eval")
        self._load_decoder(started.tokenizer)

    def watch_version(self) -> None:
        """The model has news (a group, a drop, a status): every panel draws it."""
        for panel in self.panels:
            panel.show(self.model)

    def watch_state(self) -> None:
        """Paused or ended: the preview catches up at once, not at its next follow."""
        self._show_loading()
        if not self._picked:
            self.refresh_preview(force=True)

    def _show_loading(self) -> None:
        """The groups' panel spins until the run says what it is."""
        self.rewards.loading = self.run_started is None and self.state is RunState.STARTING

    class DecoderLoaded(Message):
        def __init__(self, decoder: TokenDecoder) -> None:
            super().__init__()
            self.decoder = decoder

    def _load_decoder(self, name: str) -> None:
        """Loading transformers takes seconds: the preview shows token ids until it is done."""
        in_background(self, lambda: self.DecoderLoaded(TokenDecoder.load(name)), "tokenizer")

    @on(DecoderLoaded)
    def _decoder_loaded(self, message: DecoderLoaded) -> None:
        self.decoder = message.decoder
        self.preview.decoder = self.decoder
        if self._pager_asked:  # v was pressed while it loaded
            self._pager_asked = False
            self.action_pager()

    def selected_group(self) -> GroupCollected | None:
        """The selected group, whole: a viewed file's row is read from disk, made printable as events are."""
        selected = self.table.selected
        if selected is None or self.model.rows is None:
            return selected
        try:
            return with_texts(self.model.rows.group(selected), printable)
        except (OSError, ValueError) as e:
            self.notify(printable(str(e)), title="view", severity="error", markup=False)
            return None

    def refresh_preview(self, force: bool = True) -> None:
        """Put the selected group in the preview if it is another one.

        While the table follows a live run the selection moves every tick; laying out a
        2k-token rollout that often would starve the keyboard, so following refreshes
        at most once a second. Anything the user does refreshes at once.
        """
        row = self.table.selected
        index = row.index if row is not None else None
        if index == self._previewed:
            return
        now = time.monotonic()
        live = self.model.state in (
            RunState.RUNNING,
            RunState.PAUSING,
        )  # only a collecting run moves this fast
        if (
            not force
            and live
            and self.table.following
            and now - self._preview_at < PREVIEW_FOLLOW_S
        ):
            return
        self._previewed, self._preview_at = index, now
        self.previewed = self.selected_group()
        self.table.previewed = index

    @on(GroupTable.Highlighted)
    def _highlighted(self, event: GroupTable.Highlighted) -> None:
        """A group the user picked stays in the preview until the user moves (its leaving the window moves
        the cursor, not the preview); on the last row the preview follows the newest again."""
        if event.by_user:
            self._picked = not self.table.following
        elif self._picked:
            return
        self.rollout = 0
        self.refresh_preview(force=event.by_user)

    # -- keys: each one a call on the controls ----------------------------------------------

    LIVE_ONLY = frozenset({"toggle_pause", "temperature", "type_temperature", "health"})

    def check_action(self, action: str, parameters: tuple) -> bool | None:
        """Keys that steer a run are hidden (and do nothing) when viewing a file."""
        return not (action in self.LIVE_ONLY and self.controls is None)

    @property
    def run_controls(self) -> RunControls:
        """The controls the keys that steer a run call: ``check_action`` hides those keys without a run."""
        if self.controls is None:
            raise RuntimeError("no run to steer: a file is viewed")
        return self.controls

    def action_toggle_pause(self) -> None:
        """The run's answer (a RunStatus) wakes the inbox: shown at once; while it starts, it has none
        to give yet, so the pause taken is said here."""
        if steer(self, self.run_controls.toggle_pause) and self.model.state is RunState.STARTING:
            self.model.pause_asked = not self.model.pause_asked
            self.model.note("INFO", wording.pause_at_start(self.model.pause_asked))
            self.status_bar.show(self.model)

    def action_temperature(self, delta: float) -> None:
        steer(self, lambda: self._show_temperature(self.run_controls.nudge_temperature(delta)))

    def _show_temperature(self, value: float) -> None:
        self.model.temperature = value
        self.status_bar.show(self.model)

    def action_type_temperature(self) -> None:
        def apply(value: float | None) -> None:
            if value is not None:
                steer(
                    self, lambda: self._show_temperature(self.run_controls.set_temperature(value))
                )

        if (
            self.model.summary is not None
        ):  # an ended run refuses any temperature, saying why: no prompt first
            steer(self, lambda: self.run_controls.nudge_temperature(0.0))
            return
        question = f"temperature for the next groups ({TEMPERATURE_RANGE})"
        known = (
            self.model.temperature
            if self.model.temperature is not None
            else self.run_controls.temperature
        )
        self.app.push_screen(
            PromptScreen(
                question, f"{known:.2f}" if math.isfinite(known) else "", read_temperature
            ),
            apply,
        )

    def action_dump(self) -> None:
        """A run: its collector writes the groups in memory the filter shows (its answer, a
        GroupsDumped, says how many of how many). A viewed file: those of the file, as collected."""
        where = self.model.filter_text
        if self.controls is None:
            source = self._source()
            if source is None:
                return
            out = exporting.default_out(source, "-dump.jsonl", time.time())
            self.exports.start(self, source, out, "atropos", where)
            return
        try:
            path = self.controls.dump(where=where)
        except OSError as e:
            self.notify(
                printable(f"dump failed: {e}"),
                title="dump",
                severity="error",
                timeout=8,
                markup=False,
            )
            return
        which = f"that '{where}' shows " if where else ""
        self.notify(
            printable(f"dumped the groups in memory {which}to {path}"),
            title="dump",
            timeout=8,
            markup=False,
        )

    def action_export(self) -> None:
        source = self._source()
        if source is None:
            return
        where = self.model.filter_text
        which = f"the groups '{where}' shows" if where else "every group"

        def write(out: Path | None) -> None:
            if out is not None:
                fmt = exporting.FORMAT_OF[out.suffix.lower()]
                self.exports.start(self, source, out, fmt, where)

        self.app.push_screen(
            PromptScreen(
                f"export the rollouts of {which} in {source.name} (all of it, read again) to",
                str(exporting.default_out(source, "-sft.parquet", time.time())),
                exporting.read_out,
                ".parquet: prime-rl's SFT data; .jsonl: TRL's messages",
            ),
            write,
        )

    def on_unmount(self) -> None:
        self.exports.stop_all()

    def _source(self) -> Path | None:
        """The file the groups shown come from: the viewed one, or the run's own (None, said, before
        the run has named it)."""
        if self.model.rows is not None:
            return self.model.rows.path
        if self.model.run_started is None:
            self.notify("no groups yet: the run has not started", severity="warning")
            return None
        return Path(self.model.run_started.out_path)

    @on(exporting.Exported)
    def _exported(self, message: exporting.Exported) -> None:
        self.notify(
            printable("\n".join(message.lines)),
            title="export",
            severity=message.severity,
            timeout=12,
            markup=False,
        )

    def action_cursor(self, step: int) -> None:
        self.table.action_move(step)

    def action_next_rollout(self, step: int = 1) -> None:
        self.rollout += step

    def action_toggle_fold(self) -> None:
        self.fold = not self.fold

    def action_best_worst(self) -> None:
        group = self.previewed
        if group is None or not group.scores:
            self.notify("no group selected", severity="warning")
            return
        self.app.push_screen(BestWorstScreen(group, self.decoder, self.fold))

    def action_pager(self) -> None:
        """The previewed rollout in the user's pager (``pager_text``); the dashboard comes back after it. While
        the tokenizer loads, the pager opens once it is ready: never with raw token ids."""
        group = self.previewed
        if group is None or not group.scores:
            self.notify("no group selected", severity="warning")
            return
        if self.decoder.loading:
            self._pager_asked = True
            self.notify("the tokenizer is loading: the pager opens once it is ready", timeout=4)
            return
        text = pager_text(group, self.rollout % len(group.tokens), self.decoder, self.size.width)
        try:
            pager = shlex.split(os.environ.get("PAGER") or "less -R") or ["less", "-R"]
        except ValueError as e:  # an unbalanced quote
            self.notify(
                f"$PAGER does not split into words ({e}): fix it or unset it",
                severity="error",
                markup=False,
            )
            return
        # Ctrl-C in the pager reaches this process too: it is the pager's, not a stop of the run. A handler that
        # does nothing (not SIG_IGN, which the pager would inherit) keeps it from ending the dashboard.
        previous = signal.signal(signal.SIGINT, lambda *_: None)
        try:
            with self.app.suspend():
                subprocess.run(pager, input=text, text=True, check=False)
        except (SuspendNotSupported, OSError) as e:
            self.notify(f"cannot open the pager {pager[0]!r}: {e}", severity="error", markup=False)
        finally:
            signal.signal(signal.SIGINT, previous)

    class Searched(Message):
        """A viewed file's text search is done: the filter it was for, and what it found."""

        def __init__(
            self, text: str, found: dict[str, set[tuple[int, int]]], read: int, error: str = ""
        ) -> None:
            super().__init__()
            self.text, self.found, self.read, self.error = text, found, read, error

    def action_filter(self) -> None:
        def apply(text: str | None) -> None:
            if text is None:
                return
            needles = search_terms(text)
            rows = self.model.rows
            if needles and rows is not None:  # a file's rows hold no messages: read them first
                at = rows.snapshot()
                self.notify(f"searching the {len(at):,} groups read for {', '.join(needles)}…")

                def search() -> DashboardScreen.Searched:
                    try:
                        return self.Searched(text, at.search(needles), len(at))
                    except (OSError, ValueError) as e:
                        return self.Searched(text, {}, len(at), f"the search failed: {e}")

                in_background(self, search, "search")
                return
            self._filtered(text)

        def read(text: str) -> str:
            parse_filter(text)  # a ValueError says what cannot be read
            return text

        self.app.push_screen(
            PromptScreen(
                "filter groups (empty shows all)", self.model.filter_text, read, FILTER_HELP
            ),
            apply,
        )

    @on(Searched)
    def _searched(self, message: Searched) -> None:
        if message.error:
            self.notify(printable(message.error), severity="error", markup=False)
            return
        self._filtered(message.text, message.found, message.read)

    def _filtered(
        self, text: str, found: dict[str, set[tuple[int, int]]] | None = None, read: int = 0
    ) -> None:
        self.model.set_filter(text, found)
        self._picked = False  # the preview follows the filter: a group it hides leaves the preview
        self.redraw()
        self.refresh_preview()
        shown = len(self.model.visible_groups())
        total = len(self.model.all_groups())
        searched = (
            f" (text searched in the {read:,} read then)"
            if found is not None and read < total
            else ""
        )
        self.notify(
            f"{shown} of {total} groups match{searched}" if text.strip() else "filter cleared"
        )

    def action_cycle_sort(self) -> None:
        self.notify(f"groups {self.model.cycle_sort()}")
        self.redraw()
        self.table.action_move(-1_000_000)  # the first row is the one the order puts first

    def action_charts(self) -> None:
        from vftui.ui.screens.charts import (
            ChartsScreen,  # textual-plot loads when first asked for, not before the first frame
        )

        self.app.push_screen(ChartsScreen(self.model))

    def action_health(self) -> None:
        self.app.push_screen(HealthScreen(self.model))

    def action_toggle_ids(self) -> None:
        self.show_ids = not self.show_ids

    def action_help(self) -> None:
        """Every key from the bindings that hold it: the screen's, the app's, the table's, Textual's own."""
        keys = [
            b
            for b in [*self.BINDINGS, *self.app.BINDINGS]
            if isinstance(b, Binding) and self.check_action(b.action.split("(")[0], ()) is not False
        ]
        rows = help_rows(
            [*keys, *GroupTable.BINDINGS, *Screen.BINDINGS[:2]]
        )  # [:2]: tab, shift+tab
        rows.append(
            (
                key_names(Binding(self.app.COMMAND_PALETTE_BINDING, "command_palette")),
                "command palette: every key's action by name, themes too",
            )
        )
        self.app.push_screen(HelpScreen(rows))
