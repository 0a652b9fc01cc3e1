"""The ``--no-ui`` view: progress lines on stderr, optional JSON events on stdout.

Exit codes: 0 the run completed, 1 it failed, 130 it was stopped (Ctrl-C, SIGTERM, or
SIGHUP when the terminal hangs up) before collecting every group; 2 (from the CLI) for
bad input. The stop signals are answered on a thread of their own, so reward code that
blocks the run's loop holds neither the first stop nor the second back.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, TextIO, assert_never

from vftui import events as ev
from vftui import stats
from vftui.collector import captured
from vftui.collector.lifecycle import run_to_end
from vftui.commands import run_end
from vftui.config import RunConfig
from vftui.errors import STOP_SIGNALS, RunEnded
from vftui.text import wording
from vftui.text.drop_lines import DropLines
from vftui.text.json_lines import to_json_line
from vftui.text.printable import say

if TYPE_CHECKING:  # the run is imported after the first line (lifecycle): its libraries are slow
    from vftui.collector.controls import Controls
    from vftui.collector.run import PreparedRun

SAID_ALIKE = {True: "yes", False: "no ", None: "-  "}
"""A progress line's ``identical``, in one width: ``-`` for one rollout, which has nothing to compare."""


def _worth_saying(record: ev.LogRecord) -> bool:
    """Without --verbose: our own warnings (a repaired file, a rate limit) and errors not from verifiers."""
    if record.logger.startswith("vftui"):
        return record.level in ("WARNING", "ERROR", "CRITICAL")
    return record.level in ("ERROR", "CRITICAL") and not record.logger.startswith("verifiers")


def _logged(record: ev.LogRecord) -> str:
    """vftui's own words as a sentence (``warning: ...``); a library's with the logger that said them."""
    if record.logger.startswith("vftui"):
        return f"{record.level.lower()}: {record.message}"
    return f"[{record.level.lower()}] {record.logger}: {record.message}"


class HeadlessView:
    """Turns events into lines a person (stderr) or a program (stdout, --json) reads."""

    def __init__(
        self,
        json_events: bool,
        verbose: bool = False,
        err: TextIO | None = None,
        out: TextIO | None = None,
        simulated: bool = False,
    ):
        self.json_events = json_events
        self.verbose = verbose
        self.err = err or sys.stderr
        self.out = out or sys.stdout
        self._total = 0
        self._throughput = stats.Throughput()
        self._simulated = simulated
        self._requests: ev.RequestStats | None = None
        self._drops = DropLines()
        self.on_reader_gone: Callable[[], None] = lambda: None
        self.reader_gone = False

    def __call__(self, event: ev.Event) -> None:
        if self.json_events:
            try:
                self.out.write(to_json_line(event) + "\n")
                self.out.flush()
            except BrokenPipeError:
                self._reader_gone()
        if owed := self._drops.due(time.monotonic()):
            self.say(owed)
        line = self.line_for(event)
        if line:
            self.say(line)

    def say(self, lines: str | list[str]) -> None:
        say(lines, self.err)

    def _reader_gone(self) -> None:
        """``--json | head``: the reader has what it wanted; stop the run as Ctrl-C would, quietly.

        stdout is pointed at /dev/null so nothing else (the interpreter's last flush) fails.
        """
        self.json_events = False
        self.reader_gone = True
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), self.out.fileno())
        self.on_reader_gone()

    def line_for(self, event: ev.Event) -> str | list[str] | None:  # noqa: C901 - one case per kind of event
        """What a person reads of ``event``: a line, several, or nothing."""
        match event:
            case ev.RunStarted():
                return self._started_lines(event)
            case ev.GroupCollected():
                return self._group_line(event)
            case ev.RequestStats():
                self._requests = event
            case ev.EndpointTrouble():
                return wording.trouble(event)
            case ev.GroupDropped():
                return self._drops.add(event, time.monotonic())
            case ev.RunStatus(state=ev.RunState.STARTING, detail=detail) if detail:
                return wording.run_state(event.state, detail)
            case ev.RunStatus(
                state=ev.RunState.PAUSED | ev.RunState.STOPPING | ev.RunState.PAUSING
            ):
                return wording.run_state(event.state, event.detail)
            case ev.TemperatureChanged():
                return wording.temperature_changed(event.temperature)
            case ev.GroupsDumped():
                return wording.dumped(event)
            case ev.Alert():
                return wording.alert(event)
            case ev.LogRecord() if self.verbose or _worth_saying(event):
                return _logged(event)
            case ev.EvalReport(final=True):
                return wording.eval_report(event)
            case ev.RunSummary():
                owed = self._drops.flush()
                summary = run_end.summary(event, self._simulated, resume="vftui run --no-ui")
                return [owed, *summary] if owed else summary
            case ev.RunStatus() | ev.LogRecord():
                return None  # running and finishing show in the group lines and the summary; library chatter
            case (
                ev.Health()
                | ev.EvalReport()
                | ev.ApiStatus()
                | ev.ServerStatus()
                | ev.MetricsWindow()
                | ev.FileProgress()
                | ev.RunSoFar()
            ):
                return None  # figures for the dashboard and --json; alerts are their lines here
            case _:
                assert_never(event)
        return None

    def _started_lines(self, event: ev.RunStarted) -> list[str]:
        self._total, self._simulated = event.groups_total, event.simulated
        todo = event.groups_total - event.groups_done
        what = "examples x" if event.mode is ev.Mode.EVAL else "groups of"
        lines = [
            f"vftui {event.mode}: env {event.env}, model {event.model}, endpoint {event.endpoint}",
            f"  {todo} {what} {event.group_size} at temperature {event.temperature:g} -> {event.out_path}",
        ]
        if event.simulated:
            lines.insert(0, f"vftui: {wording.SIMULATION_NOTE}")
        return lines

    def _group_line(self, g: ev.GroupCollected) -> str:
        self._throughput.add(
            g.started_at + g.elapsed_s, sum(len(t) for t in g.tokens), g.started_at
        )
        rate, _ = self._throughput.rates(time.time(), collecting=True)
        mean, std = stats.mean(g.scores), stats.population_std(g.scores)
        turns = stats.mean([float(t) for t in g.turns])
        width = len(str(self._total))
        line = (
            f"[{g.index:>{width}}/{self._total}] reward {mean:.3f} ± {std:.3f}  "
            f"identical {SAID_ALIKE[stats.alike(g.scores)]}  turns {turns:.1f}  "
            f"t={g.temperature:g}  {rate:.2f} groups/s"
        )
        return f"{line}  {wording.traffic(self._requests)}" if self._requests is not None else line


def _stop(controls: Controls) -> None:
    with contextlib.suppress(
        RunEnded
    ):  # a signal, or the reader leaving, after the end: nothing to stop
        controls.stop()


@contextlib.contextmanager
def _signals_on_a_thread(on_signal: Callable[[], None]) -> Iterator[None]:
    """``STOP_SIGNALS`` answered by a thread: the interpreter's C-level handler writes each signal's number to
    the wakeup fd whatever the main thread is doing, where a handler on the loop would wait for the loop; the
    groups in flight are finished and saved, twice cancels them. After the run their handler stays and does
    nothing (its outcome is decided, its files closed) until the CLI's ``main`` returns."""
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    for sig in STOP_SIGNALS:
        if (
            signal.getsignal(sig) is not signal.SIG_IGN
        ):  # one ignored from the start (nohup) stays so
            signal.signal(sig, _answered_by_the_thread)
    previous_fd = signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    thread = threading.Thread(
        target=_answer, args=(read_end, on_signal), name="stop-signals", daemon=True
    )
    thread.start()
    try:
        yield
    finally:
        signal.set_wakeup_fd(previous_fd)
        os.close(write_end)  # the thread reads the end of the pipe and returns
        thread.join()
        os.close(read_end)


def _stops_interrupt_the_preparation() -> None:
    """Until the run answers ``STOP_SIGNALS`` itself, each interrupts as Ctrl-C does, so what was prepared (a new
    run folder) is undone and the exit is 130: SIGTERM and SIGHUP killed the process, leaving the folder."""
    for sig in STOP_SIGNALS:
        if (
            signal.getsignal(sig) is not signal.SIG_IGN
        ):  # one ignored from the start (nohup) stays so
            signal.signal(sig, signal.default_int_handler)


def _answered_by_the_thread(signum: int, frame: object) -> None:
    """The Python-level handler: nothing (Ctrl-C raises no KeyboardInterrupt); ``_answer`` acts on it."""


def _answer(read_end: int, on_signal: Callable[[], None]) -> None:
    while numbers := os.read(read_end, 64):
        for number in numbers:
            if number in STOP_SIGNALS:
                on_signal()


def run_headless(config: RunConfig, verbose: bool = False) -> int:
    """The run in this process; what its environment and libraries write goes to its log file (``captured``),
    so stdout holds vftui's lines alone (``--json``) and stderr only what vftui made safe to show."""
    _stops_interrupt_the_preparation()
    terminal = captured.Terminal.keep()
    view = HeadlessView(config.json_events, verbose, err=terminal.err, out=terminal.out)
    try:
        summary = run_to_end(config, view, _Headless(view))
    finally:
        terminal.restore()
    assert summary is not None  # this host takes no crash: it is raised
    return run_end.exit_code(summary)


class _Headless:
    """The run's host in ``run --no-ui``: stops answered on a thread of its own, the reader of ``--json``
    leaving stops the run, lines said on the terminal."""

    def __init__(self, view: HeadlessView) -> None:
        self._view = view

    def prepared(self, run: PreparedRun) -> None:
        """A stop still interrupts as Ctrl-C does until the run answers it (``while_running``)."""

    @contextlib.contextmanager
    def while_running(self, run: PreparedRun) -> Iterator[None]:
        controls = run.controls

        def on_signal() -> None:
            first = not controls.stop_requested
            try:
                controls.stop()
            except RunEnded:
                return  # its summary is out: nothing to stop, nothing to say
            if first:
                self.say("stopping after the groups in flight (press Ctrl-C again to cancel them)")

        self._view.on_reader_gone = lambda: _stop(controls)
        if self._view.reader_gone:  # it left while the run was being prepared
            controls.stop()
        with _signals_on_a_thread(on_signal):
            yield

    def say(self, line: str) -> None:
        self._view.say(line)
