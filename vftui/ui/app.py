"""The live dashboard: a Textual app that watches a collector run and steers it.

Events arrive on the inbox (from the collector process's pipe, see
``live.process``); a thread worker waits for the run's summary. A timer drains the
inbox at a fixed rate, folds the batch into the ``DashboardModel`` and hands the model
down to the widgets, so a fast collector costs one repaint per tick, never a backlog.
Every key is a method call on the run's controls.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import math
import os
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from textual.app import App, ComposeResult, SuspendNotSupported
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.reactive import reactive
from textual.screen import Screen

from vftui.errors import RunEnded, Unanswered, UserError
from vftui.events import GroupCollected, Mode, RunState, RunSummary
from vftui.run_controls import MAX_TEMPERATURE, MIN_TEMPERATURE, checked_temperature
from vftui.text import wording
from vftui.text.printable import printable, with_texts
from vftui.ui import themes
from vftui.ui.background import in_background
from vftui.ui.decode import TokenDecoder
from vftui.ui.inbox import TICK_S
from vftui.ui.lean_output import lean_driver
from vftui.ui.model import FILTER_HELP, SORTS, DashboardModel, parse_filter
from vftui.ui.pager_text import pager_text
from vftui.ui.palette import KeyCommands
from vftui.ui.screens.best_worst import BestWorstScreen
from vftui.ui.screens.confirm import ConfirmScreen
from vftui.ui.screens.health import HealthScreen, ModelScreen
from vftui.ui.screens.help import HelpScreen, help_rows, key_names
from vftui.ui.screens.prompt import PromptScreen
from vftui.ui.sources import Source
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
MAX_EVENTS_PER_TICK = 20_000
SIGNALS_THAT_STOP = (signal.SIGTERM, signal.SIGHUP)  # Ctrl-C is a key here; see on_mount
TEMPERATURE_RANGE = f"{MIN_TEMPERATURE:g}–{MAX_TEMPERATURE:g}"
TEMPERATURE_KEYS = f"sampling temperature ±0.1 for the next groups ({TEMPERATURE_RANGE})"


def read_temperature(text: str) -> float:
    """A typed temperature; a ValueError says what is wrong with it."""
    try:
        return checked_temperature(float(text))
    except ValueError:
        raise ValueError(f"a number from {TEMPERATURE_RANGE}, please") from None


class VftuiApp(App[RunSummary | None]):
    CSS_PATH = ["app.tcss", "charts.tcss"]
    TITLE = "vftui"
    COMMANDS = App.COMMANDS | {KeyCommands}  # ctrl+p: the keys of the screen in front too
    # Classes on the screen for app.tcss: -narrow and -low drop the side column; -short (under
    # 36 rows) gives the turns panel's rows to the trajectory API's in rl mode.
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
        Binding("d", "dump", "dump", tooltip="dump the groups in memory to a new jsonl"),
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
        Binding(
            "q,ctrl+c",
            "quit_run",
            "quit",
            priority=True,
            tooltip="quit (asks first while running: stop the run gracefully, or leave an attached one running)",
        ),
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

    def __init__(
        self,
        source: Source,
        *,
        window: int = 256,
        identical_alert: float = 0.5,
        theme_name: str = "vftui-dark",
        extra_themes: dict[str, Any] | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        """``source``: a run this dashboard started, one it attached to, or a file (``ui.sources``)."""
        super().__init__()
        self.source = source
        self.inbox = source.inbox
        self.controls = source.controls
        self.closed = (
            threading.Event()
        )  # set as the app ends: a worker that would go on (a followed file) waits on it
        self.left_running = False
        self.model = DashboardModel(
            window=window, identical_alert=identical_alert, rows=source.rows
        )
        self.model.attached = source.leaves_run
        if clock is not None:
            self.model.clock = clock
        self.decoder = TokenDecoder(
            loading=True
        )  # until the run says which tokenizer, and it is loaded
        self.result: RunSummary | None = None
        self._quitting = False
        self._quit_question: ConfirmScreen | None = None  # while q's question is on screen
        self._pager_asked = False  # v while the tokenizer loads: the pager opens once it has
        self._shown_version = -1
        self._previewed: int | None = None  # the number of the group in the preview
        self._picked = False  # the user chose it: it stays until the user moves
        self._preview_at = 0.0
        themes.install(self, theme_name, extra_themes)

    # -- layout -------------------------------------------------------------------------

    def get_driver_class(self) -> type:
        return lean_driver(super().get_driver_class())

    def compose(self) -> ComposeResult:
        yield StatusBar(id="status")
        with Horizontal(id="main"):
            with Vertical(id="left"):
                yield RewardsPanel(id="rewards")
                yield TokenPreview(id="tokens").data_bind(
                    VftuiApp.rollout, VftuiApp.show_ids, VftuiApp.fold, group=VftuiApp.previewed
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
        self.panels = [
            self.query_one(p)
            for p in (
                RewardsPanel,
                RewardFunctionsPanel,
                EvalPanel,
                TurnsPanel,
                IdenticalPanel,
                TrajectoryPanel,
                LogPanel,
            )
        ]
        self.status_bar = self.query_one(StatusBar)
        self.rewards = self.query_one(RewardsPanel)
        self.table = self.query_one(GroupTable)
        self.preview = self.query_one(TokenPreview)
        self.preview.decoder = self.decoder
        # Everything loaded so far lives as long as the app; keeping it out of the
        # collector's reach stops full collections from stalling frames mid-run.
        gc.freeze()
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, self.signalled)
        loop.add_signal_handler(signal.SIGHUP, self.terminal_hung_up)
        self.set_interval(TICK_S, self.tick)
        self.inbox.wake = functools.partial(self._wake, loop)
        self.call_after_refresh(self._start_worker)
        self.table.focus()
        self.tick()

    def _wake(self, loop: asyncio.AbstractEventLoop) -> None:
        """From the thread that feeds the inbox: a tick now, for a change of the run's state."""
        with contextlib.suppress(RuntimeError):  # the app closed its loop meanwhile
            loop.call_soon_threadsafe(self.tick)

    def _start_worker(self) -> None:
        """After the first frame, whose painting the worker's thread would slow (they share the GIL)."""
        self.run_worker(
            lambda: self.source.execute(self.closed),
            thread=True,
            name="collector",
            exit_on_error=False,
        )
        self.set_timer(
            TICK_S / 5, self.tick
        )  # a viewed file's first rows are read by then: show them

    def terminal_hung_up(self) -> None:
        """SIGHUP: if the terminal is gone nothing can be drawn any more (the driver's ``hang_up``); then as any
        signal to stop, exit 130 included."""
        hang_up = getattr(self._driver, "hang_up", None)  # our terminal driver (tests run headless)
        if hang_up is not None:
            hang_up()
        self.signalled()

    def signalled(self) -> None:
        """SIGTERM or SIGHUP: the run stops as a confirmed quit does, unless it lives on without us."""
        if self.source.leaves_run:
            self.leave_running()
        else:
            self.stop_and_exit()

    def run_goes_on(self) -> bool:
        """A run is collecting, which this dashboard could stop."""
        ended = self.result is not None or self.model.state in (RunState.FINISHED, RunState.FAILED)
        return self.controls is not None and not ended

    def stop_and_exit(self) -> None:
        """Stop the run gracefully, then close and restore the terminal; again: cancel the groups in flight."""
        self._quitting = True
        if not self.run_goes_on() or not self._steer(self.controls.stop):
            self.exit(self.result)

    def _steer(self, call: Callable[[], object]) -> bool:
        """Make a call on the run's controls; False when the run refuses it (it has ended). Either that or a
        late answer is said."""
        try:
            call()
        except (
            RunEnded,
            Unanswered,
        ) as e:  # ended: nothing was done; unanswered: it may still act, late
            self.notify(printable(str(e)), severity="warning", markup=False)
            return not isinstance(e, RunEnded)
        return True

    # -- attributes down ----------------------------------------------------------------

    def tick(self) -> None:
        """Fold what came since the last tick and hand the model down to the panels."""
        if not self.screen_stack:
            return  # a timer that fires while the app closes: nothing is on screen any more
        batch = self.inbox.drain(MAX_EVENTS_PER_TICK)
        started_before, state_before = self.model.run_started, self.model.state
        self.model.apply(batch)
        if self.model.run_started is not started_before and self.model.run_started is not None:
            self.set_class(self.model.run_started.mode is Mode.RL, "-rl")
            self.set_class(self.model.run_started.mode is Mode.EVAL, "-eval")
            self._load_decoder(self.model.run_started.tokenizer)
        self.set_class(
            self.model.eval_report is not None and self.model.eval_report.step is not None, "-evals"
        )
        self.status_bar.show(self.model)
        self.rewards.loading = (
            self.model.run_started is None and self.model.state is RunState.STARTING
        )
        if self.model.version != self._shown_version:
            self._shown_version = self.model.version
            for panel in self.panels:
                panel.show(self.model)
        if not self._picked:  # a group the user picked stays
            self.refresh_preview(
                force=self.model.state is not state_before
            )  # paused or ended: catch up at once
        if isinstance(self.screen, ModelScreen) and self.screen.is_mounted:
            self.screen.show(self.model)

    class DecoderLoaded(Message):
        def __init__(self, decoder: TokenDecoder) -> None:
            super().__init__()
            self.decoder = decoder

    def _load_decoder(self, name: str) -> None:
        """Loading transformers takes seconds: the preview shows token ids until it is done."""
        in_background(self, lambda: self.DecoderLoaded(TokenDecoder.load(name)), "tokenizer")

    def on_vftui_app_decoder_loaded(self, message: DecoderLoaded) -> None:
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

    def on_group_table_highlighted(self, event: GroupTable.Highlighted) -> None:
        """A group the user picked stays in the preview until the user moves (its leaving the window moves
        the cursor, not the preview); on the last row the preview follows the newest again."""
        if event.by_user:
            self._picked = not self.table.following
        elif self._picked:
            return
        self.rollout = 0
        self.refresh_preview(force=event.by_user)

    # -- keys: each one a call on the controls ----------------------------------------------

    LIVE_ONLY = frozenset({"toggle_pause", "temperature", "type_temperature", "dump", "health"})

    def check_action(self, action: str, parameters: tuple) -> bool | None:
        """Keys that steer a run are hidden (and do nothing) when viewing a file."""
        return not (action in self.LIVE_ONLY and self.controls is None)

    def action_toggle_pause(self) -> None:
        """The run's answer (a RunStatus) wakes the inbox: shown at once; while it starts, it has none
        to give yet, so the pause taken is said here."""
        if self._steer(self.controls.toggle_pause) and self.model.state is RunState.STARTING:
            self.model.pause_asked = not self.model.pause_asked
            self.model.note("INFO", wording.pause_at_start(self.model.pause_asked))
            self.status_bar.show(self.model)

    def action_temperature(self, delta: float) -> None:
        self._steer(lambda: self._show_temperature(self.controls.nudge_temperature(delta)))

    def _show_temperature(self, value: float) -> None:
        self.model.temperature = value
        self.status_bar.show(self.model)

    def action_type_temperature(self) -> None:
        def apply(value: float | None) -> None:
            if value is not None:
                self._steer(lambda: self._show_temperature(self.controls.set_temperature(value)))

        if (
            self.model.summary is not None
        ):  # an ended run refuses any temperature, saying why: no prompt first
            self._steer(lambda: self.controls.nudge_temperature(0.0))
            return
        question = f"temperature for the next groups ({TEMPERATURE_RANGE})"
        known = (
            self.model.temperature
            if self.model.temperature is not None
            else self.controls.temperature
        )
        self.push_screen(
            PromptScreen(
                question, f"{known:.2f}" if math.isfinite(known) else "", read_temperature
            ),
            apply,
        )

    def action_dump(self) -> None:
        try:
            path: Path = self.controls.dump()
        except OSError as e:
            self.notify(
                printable(f"dump failed: {e}"),
                title="dump",
                severity="error",
                timeout=8,
                markup=False,
            )
            return
        self.notify(
            printable(f"dumped the groups in memory to {path}"),
            title="dump",
            timeout=8,
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
        self.push_screen(BestWorstScreen(group, self.decoder, self.fold))

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
            with self.suspend():
                subprocess.run(pager, input=text, text=True, check=False)
        except (SuspendNotSupported, OSError) as e:
            self.notify(f"cannot open the pager {pager[0]!r}: {e}", severity="error", markup=False)
        finally:
            signal.signal(signal.SIGINT, previous)

    def action_filter(self) -> None:
        def apply(text: str | None) -> None:
            if text is not None:
                self.model.set_filter(text)
                self._picked = (
                    False  # the preview follows the filter: a group it hides leaves the preview
                )
                self.tick()
                self.refresh_preview()
                shown = len(self.model.visible_groups())
                total = len(self.model.all_groups())
                self.notify(
                    f"{shown} of {total} groups match" if text.strip() else "filter cleared"
                )

        def read(text: str) -> str:
            parse_filter(text)  # a ValueError says what cannot be read
            return text

        self.push_screen(
            PromptScreen(
                "filter groups (empty shows all)", self.model.filter_text, read, FILTER_HELP
            ),
            apply,
        )

    def action_cycle_sort(self) -> None:
        self.notify(f"groups {self.model.cycle_sort()}")
        self.tick()
        self.table.action_move(-1_000_000)  # the first row is the one the order puts first

    def action_charts(self) -> None:
        from vftui.ui.screens.charts import (
            ChartsScreen,  # plotext loads when first asked for, not before the first frame
        )

        self.push_screen(ChartsScreen(self.model))

    def action_health(self) -> None:
        self.push_screen(HealthScreen(self.model))

    def action_toggle_ids(self) -> None:
        self.show_ids = not self.show_ids

    def action_help(self) -> None:
        """Every key from the bindings that hold it: the app's, the table's, Textual's own."""
        app_keys = [
            b for b in self.BINDINGS if self.check_action(b.action.split("(")[0], ()) is not False
        ]
        rows = help_rows(
            [*app_keys, *GroupTable.BINDINGS, *Screen.BINDINGS[:2]]
        )  # [:2]: tab, shift+tab
        rows.append(
            (
                key_names(Binding(self.COMMAND_PALETTE_BINDING, "command_palette")),
                "command palette: every key's action by name, themes too",
            )
        )
        self.push_screen(HelpScreen(rows))

    async def action_quit(self) -> None:
        """The command palette's Quit: the same question and graceful stop as q."""
        self.action_quit_run()

    def action_quit_run(self) -> None:
        """Close at once when nothing runs; else the source's question: stop the run, or leave it running."""
        if not self.run_goes_on() or self.source.quit_question is None:
            self.exit(self.result)
            return
        if self._quitting:
            self.stop_and_exit()  # a second quit cancels the groups in flight
            return
        if self._quit_question is not None:  # asked again: its own run stops, as y would say
            if not self.source.leaves_run:
                self._quit_question.action_answer("stop")
            return

        def answer(choice: str | None) -> None:
            self._quit_question = None
            if choice == "leave":
                self.leave_running()
            elif choice == "stop":
                self.stop_and_exit()
                self.notify("stopping: finishing the groups in flight (q again cancels them)")

        self._quit_question = ConfirmScreen(*self.source.quit_question)
        self.push_screen(self._quit_question, answer)

    def eval_lines(self) -> list[str]:
        """An eval's figures as the headless view prints them at its end, for the lines after the app."""
        report = self.model.eval_report
        return wording.eval_report(report) if report is not None else []

    def leave_running(self) -> None:
        """Close this dashboard; the run goes on (``vftui attach`` opens another)."""
        self.left_running = True
        self.exit(None)

    def on_unmount(self) -> None:
        """However the app ends, a collector still running is told to stop (and flush), unless it lives on its own."""
        self.closed.set()
        self.inbox.wake = None
        loop = asyncio.get_running_loop()
        for sig in SIGNALS_THAT_STOP:
            loop.remove_signal_handler(sig)
        if self.controls is not None and self.result is None and not self.source.leaves_run:
            with contextlib.suppress(RunEnded):
                self.controls.stop()

    def on_worker_state_changed(self, event) -> None:
        worker = event.worker
        if worker.name != "collector" or not worker.is_finished:
            return
        if isinstance(
            worker.error, UserError
        ):  # a setting the run refused: the command prints its sentence
            self.exit(None)
            return
        if worker.error is not None:
            self.model.fail(f"collector crashed: {worker.error}")
            self.notify(self.model.detail, severity="error", timeout=30, markup=False)
        else:
            self.result = worker.result
        self.tick()
        if self._quit_question is not None and not self._quitting:  # its question is gone
            self._quit_question.action_answer(None)
            self.notify("the run ended while you were asked: q closes the dashboard")
        interrupted = worker.error is None and worker.result is None and not self.source.leaves_run
        if (
            self._quitting or interrupted
        ):  # interrupted: its own run stopped while it was prepared, never begun
            self.exit(self.result)
