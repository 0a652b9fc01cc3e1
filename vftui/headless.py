"""The ``--no-ui`` view: progress lines on stderr, optional JSON events on stdout.

Exit codes: 0 the run completed, 1 it failed, 130 it was stopped (Ctrl-C, SIGTERM, or
SIGHUP when the terminal hangs up) before collecting every group; 2 (from the CLI) for
bad input.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TextIO

from vftui import stats
from vftui.config import RunConfig
from vftui.events import (
    EndpointTrouble,
    Event,
    GroupCollected,
    GroupDropped,
    GroupsDumped,
    LogRecord,
    RequestStats,
    RunStarted,
    RunState,
    RunStatus,
    RunSummary,
    TemperatureChanged,
    to_json_line,
)
from vftui.printable import printable

if TYPE_CHECKING:  # the dashboard imports this module for its summary and exit codes, not the collector
    from vftui.collector.runner import Run

EXIT_OK, EXIT_FAILED, EXIT_INTERRUPTED = 0, 1, 130
# Each stops a run as Ctrl-C does: the groups in flight are finished and saved; twice cancels them.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
SIMULATION_NOTE = "SIMULATION: built-in endpoint and tokenizer, not a real model"


def _worth_saying(record: LogRecord) -> bool:
    """Without --verbose: our own warnings (a repaired file, a rate limit) and errors not from verifiers."""
    if record.logger.startswith("vftui"):
        return record.level in ("WARNING", "ERROR", "CRITICAL")
    return record.level in ("ERROR", "CRITICAL") and not record.logger.startswith("verifiers")


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
        self._first_done = 0
        self._clock_start: float | None = None
        self._simulated = simulated
        self._requests: RequestStats | None = None
        self.on_reader_gone: Callable[[], None] = lambda: None

    def __call__(self, event: Event) -> None:
        if self.json_events:
            try:
                self.out.write(to_json_line(event) + "\n")
                self.out.flush()
            except BrokenPipeError:
                self._reader_gone()
        line = self.line_for(event)
        if line:
            self.say(line)

    def say(self, text: str) -> None:
        """A line for a person, with anything from outside made harmless for the terminal."""
        try:
            print(printable(text), file=self.err, flush=True)
        except OSError:  # the terminal is gone (SSH hung up): the run goes on, its files tell the rest
            pass

    def _reader_gone(self) -> None:
        """``--json | head``: the reader has what it wanted; stop the run as Ctrl-C would, quietly.

        stdout is pointed at /dev/null so nothing else (the interpreter's last flush) fails.
        """
        self.json_events = False
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), self.out.fileno())
        self.on_reader_gone()

    def line_for(self, event: Event) -> str | None:
        if isinstance(event, RunStarted):
            self._total, self._first_done = event.groups_total, event.groups_done
            self._clock_start, self._simulated = time.monotonic(), event.simulated
            todo = event.groups_total - event.groups_done
            lines = [
                f"vftui {event.mode}: env {event.env}, model {event.model}, endpoint {event.endpoint}",
                f"  {todo} groups of {event.group_size} at temperature {event.temperature:g} -> {event.out_path}",
            ]
            if event.simulated:
                lines.insert(0, f"vftui: {SIMULATION_NOTE}")
            return "\n".join(lines)
        if isinstance(event, GroupCollected):
            return self._group_line(event)
        if isinstance(event, RequestStats):
            self._requests = event
            return None
        if isinstance(event, EndpointTrouble):
            return (
                f"{event.service} error (attempt {event.attempts}): {event.error}; "
                f"retrying in {event.retry_in_s:.1f} s"
            )
        if isinstance(event, GroupDropped):
            return f"group of item {event.item} not sent: {event.reason}"
        if isinstance(event, RunStatus) and event.state is RunState.STARTING and event.detail:
            return f"run starting: {event.detail}"
        if isinstance(event, RunStatus) and event.state in (RunState.PAUSED, RunState.STOPPING, RunState.PAUSING):
            return f"run {event.state.value}" + (f": {event.detail}" if event.detail else "")
        if isinstance(event, TemperatureChanged):
            return f"temperature -> {event.temperature:g} (from the next group)"
        if isinstance(event, GroupsDumped):
            return f"dumped {event.groups} groups to {event.path}"
        if isinstance(event, LogRecord) and (self.verbose or _worth_saying(event)):
            return f"[{event.level.lower()}] {event.logger}: {event.message}"
        if isinstance(event, RunSummary):
            return self.summary_text(event)
        return None

    def _group_line(self, g: GroupCollected) -> str:
        elapsed = time.monotonic() - (self._clock_start or time.monotonic())
        rate = (g.index - self._first_done) / elapsed if elapsed > 0 else 0.0
        mean, std = stats.mean(g.scores), stats.population_std(g.scores)
        turns = stats.mean([float(t) for t in g.turns])
        width = len(str(self._total))
        line = (
            f"[{g.index:>{width}}/{self._total}] reward {mean:.3f} ± {std:.3f}  "
            f"identical {'yes' if g.identical else 'no '}  turns {turns:.1f}  "
            f"t={g.temperature:g}  {rate:.2f} groups/s"
        )
        return f"{line}  {self._requests.line}" if self._requests is not None else line

    def summary_text(self, s: RunSummary) -> str:
        m = s.metrics
        head = {
            RunState.FINISHED: "finished" if s.groups_done >= s.groups_total else "stopped",
            RunState.FAILED: "FAILED",
        }.get(s.state, s.state.value)
        lines = [f"run {head}: {s.groups_done}/{s.groups_total} groups in {s.elapsed_s:.1f} s"]
        if s.error:
            lines.append(f"  reason: {s.error}")
        if s.dropped:
            reasons = "; ".join(f"{n} {reason}" for reason, n in sorted(s.dropped.items(), key=lambda kv: -kv[1]))
            lines.append(f"  {sum(s.dropped.values())} scored groups were not sent: {reasons}")
        if m:
            kept = (f", {m['metrics/mean_reward_kept']:.4f} over the groups kept"
                    if s.dropped and "metrics/mean_reward_kept" in m else "")
            lines.append(
                f"  mean reward {m.get('metrics/mean_reward', 0):.4f}{kept}, reward std {m.get('metrics/reward_std', 0):.4f}, "
                f"identical-score rate {m.get('metrics/identical_score_rate', 0):.3f} "
                f"({int(m.get('metrics/groups_with_identical_scores', 0))}/{int(m.get('metrics/groups_total', 0))} groups)"
            )
            lines.append(
                f"  turns avg {m.get('metrics/avg_num_turns', 0):.2f}, max {int(m.get('metrics/max_num_turns', 0))}"
            )
            skip = {"mean_reward", "mean_reward_kept", "reward_std", "avg_num_turns", "max_num_turns",
                    "groups_with_identical_scores", "groups_total", "identical_score_rate"}
            per_fn = [f"{k.removeprefix('metrics/')} {v:.4f}" for k, v in m.items() if k.removeprefix("metrics/") not in skip]
            if per_fn:
                lines.append("  " + ", ".join(per_fn))
        lines.append(f"  output: {s.out_path}")
        if self._simulated:
            lines.append(f"  ({SIMULATION_NOTE})")
        return "\n".join(lines)


def exit_code(summary: RunSummary) -> int:
    if summary.state is RunState.FAILED:
        return EXIT_FAILED
    return EXIT_OK if summary.groups_done >= summary.groups_total else EXIT_INTERRUPTED


async def _drive(run: Run, view: HeadlessView) -> RunSummary:
    loop = asyncio.get_running_loop()
    controls = run.controls
    assert controls is not None

    def on_signal() -> None:
        if not controls.stop_requested:
            view.say("stopping after the groups in flight (press Ctrl-C again to cancel them)")
        controls.stop()

    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, on_signal)
    return await run.execute()


def run_headless(config: RunConfig, verbose: bool = False) -> int:
    view = HeadlessView(config.json_events, verbose)
    from vftui.collector.runner import Run

    run = Run(config, view)
    try:
        run.prepare()
        view.on_reader_gone = run.controls.stop
        summary = asyncio.run(_drive(run, view))
    finally:
        run.close()
    return exit_code(summary)
