"""The live dashboard: a Textual app that watches a collector run and steers it.

Events arrive on the inbox (from the collector process's pipe, see
``live.process``); a thread worker waits for the run's summary. A timer drains the
inbox at a fixed rate, folds the batch into the ``DashboardModel`` and hands the model
down to the dashboard screen (``screens.dashboard``), so a fast collector costs one
repaint per tick, never a backlog. The app holds the run: its feed, its end, the
signals and the quit question; the screen holds the widgets and the keys that steer it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import signal
import threading
from collections.abc import Callable
from typing import Any

from textual.app import App
from textual.binding import Binding
from textual.screen import Screen

from vftui.errors import RunEnded, UserError
from vftui.events import RunState, RunSummary
from vftui.text import wording
from vftui.ui import themes
from vftui.ui.feeds import Feed
from vftui.ui.inbox import TICK_S
from vftui.ui.lean_output import lean_driver
from vftui.ui.model import DashboardModel
from vftui.ui.palette import KeyCommands
from vftui.ui.screens.confirm import ConfirmScreen
from vftui.ui.screens.dashboard import DashboardScreen, steer
from vftui.ui.screens.health import ModelScreen

MAX_EVENTS_PER_TICK = 20_000
SIGNALS_THAT_STOP = (signal.SIGTERM, signal.SIGHUP)  # Ctrl-C is a key here; see on_mount


class VftuiApp(App[RunSummary | None]):
    CSS_PATH = ["app.tcss", "charts.tcss"]
    TITLE = "vftui"
    COMMANDS = App.COMMANDS | {KeyCommands}  # ctrl+p: the keys of the screen in front too
    BINDINGS = [
        Binding(
            "q,ctrl+c",
            "quit_run",
            "quit",
            priority=True,
            tooltip="quit (asks first while running: stop the run gracefully, or leave an attached one running)",
        ),
    ]

    def __init__(
        self,
        feed: Feed,
        *,
        window: int = 256,
        identical_alert: float = 0.5,
        theme_name: str = "vftui-dark",
        extra_themes: dict[str, Any] | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        """``feed``: a run this dashboard started, one it attached to, or a file (``ui.feeds``)."""
        super().__init__()
        self.feed = feed
        self.inbox = feed.inbox
        self.controls = feed.controls
        self.closed = (
            threading.Event()
        )  # set as the app ends: a worker that would go on (a followed file) waits on it
        self.left_running = False
        self.model = DashboardModel(window=window, identical_alert=identical_alert, rows=feed.rows)
        self.model.attached = feed.leaves_run
        if clock is not None:
            self.model.clock = clock
        self.result: RunSummary | None = None
        self._quitting = False
        self._quit_question: ConfirmScreen | None = None  # while q's question is on screen
        self.dashboard = DashboardScreen(self.model, self.controls)
        themes.install(self, theme_name, extra_themes)

    # -- layout -------------------------------------------------------------------------

    def get_driver_class(self) -> type:
        return lean_driver(super().get_driver_class())

    def get_default_screen(self) -> Screen:
        return self.dashboard

    def on_mount(self) -> None:
        # Everything loaded so far lives as long as the app; keeping it out of the
        # collector's reach stops full collections from stalling frames mid-run.
        gc.freeze()
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, self.signalled)
        loop.add_signal_handler(signal.SIGHUP, self.terminal_hung_up)
        self.set_interval(TICK_S, self.tick)
        self.inbox.wake = functools.partial(self._wake, loop)
        self.call_after_refresh(self._start_worker)
        self.tick()

    def _wake(self, loop: asyncio.AbstractEventLoop) -> None:
        """From the thread that feeds the inbox: a tick now, for a change of the run's state."""
        with contextlib.suppress(RuntimeError):  # the app closed its loop meanwhile
            loop.call_soon_threadsafe(self.tick)

    def _start_worker(self) -> None:
        """After the first frame, whose painting the worker's thread would slow (they share the GIL)."""
        self.run_worker(
            lambda: self.feed.execute(self.closed),
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
        if self.feed.leaves_run:
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
        controls = self.controls  # None: nothing to stop (run_goes_on says so too)
        if controls is None or not self.run_goes_on() or not steer(self, controls.stop):
            self.exit(self.result)

    # -- attributes down ----------------------------------------------------------------

    def tick(self) -> None:
        """Fold what came since the last tick and hand the model down to the dashboard."""
        if not self.screen_stack:
            return  # a timer that fires while the app closes: nothing is on screen any more
        self.model.apply(self.inbox.drain(MAX_EVENTS_PER_TICK))
        if self.dashboard.is_mounted:
            self.dashboard.show()
        if isinstance(self.screen, ModelScreen) and self.screen.drawn:
            self.screen.show(self.model)

    async def action_quit(self) -> None:
        """The command palette's Quit: the same question and graceful stop as q."""
        self.action_quit_run()

    def action_quit_run(self) -> None:
        """Close at once when nothing runs; else the feed's question: stop the run, or leave it running."""
        if not self.run_goes_on() or self.feed.quit_question is None:
            self.exit(self.result)
            return
        if self._quitting:
            self.stop_and_exit()  # a second quit cancels the groups in flight
            return
        if self._quit_question is not None:  # asked again: its own run stops, as y would say
            if not self.feed.leaves_run:
                self._quit_question.action_answer("stop")
            return

        def answer(choice: str | None) -> None:
            self._quit_question = None
            if choice is None and not self.run_goes_on():  # closed by the run's end, under it
                self.notify("the run ended while you were asked: q closes the dashboard")
            elif choice == "leave":
                self.leave_running()
            elif choice == "stop":
                self.stop_and_exit()
                self.notify("stopping: finishing the groups in flight (q again cancels them)")

        self._quit_question = ConfirmScreen(*self.feed.quit_question)
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
        if self.controls is not None and self.result is None and not self.feed.leaves_run:
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
        interrupted = worker.error is None and worker.result is None and not self.feed.leaves_run
        if (
            self._quitting or interrupted
        ):  # interrupted: its own run stopped while it was prepared, never begun
            self.exit(self.result)
