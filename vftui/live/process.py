"""The dashboard's handle on the collector it runs in a child process.

A CPU-bound collector and a Textual app in one interpreter share one GIL: every frame the
app paints is time the collector does not run (bench/throughput.py shows the cost). So the
dashboard spawns the run (``collector.child.child_main`` is the child's side):

- the child prepares the run on its own main thread and reports ``Prepared`` or the error
  it refused with (``Refused``), or a crash;
- its events come back in batches over one pipe (``wire.Outbox``), read here by a thread;
- ``RemoteControls`` forwards each control call over a second pipe, which the child answers
  once it has prepared the run; a stop before that interrupts the preparation (``STOP_SIGNAL``:
  an environment can take minutes to load, and a stop must not wait for it);
- the child stays until the parent hangs up (a dump after the end still works); a parent
  that dies is a hang-up too, and the child then stops the run gracefully and flushes.

Nothing here imports the collector: the child imports it, by the target it is given.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.context import ForkContext, ForkServerContext, SpawnContext
from multiprocessing.process import BaseProcess
from typing import Any

from vftui.errors import EXIT_INTERRUPTED
from vftui.events import Event, RunSummary
from vftui.live.wire import EXIT_TIMEOUT_S, RemoteControls

STOPPED_HARD = (
    "run stopped: reward code held it past the second stop, so its process was ended "
    "(its file holds whole lines: --resume it)"
)

STOP_SIGNAL = (
    signal.SIGUSR2
)  # the parent's stop, before the child answers calls: no terminal sends it
ChildMain = Callable[[Any, Connection, Connection], None]
"""The child's entry point: (the run's config, the events pipe, the commands pipe)."""


@dataclass(frozen=True)
class Prepared:
    """The run is ready; what the parent needs to describe it afterwards."""

    log_path: str  # where the child's output goes: a crash's traceback is there
    simulated: bool


@dataclass(frozen=True)
class Refused:
    """``prepare`` failed: the exception to raise in the parent (a UserError, usually)."""

    error: BaseException


@dataclass(frozen=True)
class Crashed:
    """An unexpected exception in the child, as text."""

    traceback: str


class CollectorProcess:
    """The parent's handle on a run in a child process.

    ``start`` returns at once: the child prepares the run while the dashboard is already on
    screen, showing its steps. ``wait_summary`` blocks until the run's summary arrives (for
    the app's worker) and raises what prepare refused with (``refusal``) or a crash;
    ``close`` hangs up and reaps the child.
    """

    def __init__(
        self,
        config: Any,
        emit: Callable[[Event], None],
        target: ChildMain,
        context: SpawnContext | ForkServerContext | ForkContext | None = None,
    ) -> None:
        """``target`` is what the child runs (``collector.child.child_main``; a bench passes a stand-in);
        ``context`` how it starts: spawned by default, a fresh interpreter (the dashboard's threads make a
        fork unsafe); the tests' workers pass a forkserver that imported the collector once."""
        context = context or multiprocessing.get_context("spawn")
        self._events, child_events = context.Pipe(duplex=False)
        self._commands, child_commands = context.Pipe()
        self._child_ends = (child_events, child_commands)
        self._process: BaseProcess = context.Process(
            target=target, args=(config, child_events, child_commands), name="vftui-collector"
        )
        self._emit = emit
        self.controls = ChildControls(self, config.start_temperature)
        self._summary: RunSummary | None = None
        self.prepared: Prepared | None = None
        self.refusal: BaseException | None = None
        self._crash = ""
        self._ended = threading.Event()

    @property
    def stopped_hard(self) -> bool:
        """The child ended itself, a second stop not obeyed in time (``scoring_limit``): a stopped run, not a crash."""
        return self._process.exitcode == EXIT_INTERRUPTED

    @property
    def pid(self) -> int | None:
        """The collector process's id, once started."""
        return self._process.pid

    def start(self) -> CollectorProcess:
        self._process.start()
        for end in self._child_ends:
            end.close()  # so a dead child reads as EOF here
        threading.Thread(target=self._pump, name="collector-events", daemon=True).start()
        return self

    def _pump(self) -> None:
        try:
            while True:
                for item in self._events.recv():
                    match item:
                        case Prepared():
                            self.prepared = item
                        case Refused(error=error):
                            self.refusal = error
                            self._ended.set()
                        case Crashed(traceback=text):
                            self._crash = text
                            self._ended.set()
                        case RunSummary():
                            self._emit(item)
                            self._summary = item
                            self._ended.set()  # the child stays (a dump still works) until we hang up
                        case _:
                            self._emit(item)
        except (EOFError, OSError):
            pass
        finally:
            self._ended.set()

    @property
    def interrupted(self) -> bool:
        """A stop (or Ctrl-C) interrupted the run's preparation, or came before the child could hear it: the run
        never began."""
        return isinstance(self.refusal, KeyboardInterrupt) or self._process.exitcode == -STOP_SIGNAL

    def interrupt_preparation(self) -> bool:
        """A stop before the child has said it prepared the run: it is told by ``STOP_SIGNAL`` (it answers no call
        yet), and stops its preparation, or the run if the preparation was over. False once it has prepared."""
        if self.prepared is not None or self._ended.is_set() or self._process.pid is None:
            return False
        os.kill(self._process.pid, STOP_SIGNAL)
        return True

    def wait_summary(self) -> RunSummary | None:
        """The run's summary; None when its preparation was interrupted; raises if the child ended without one."""
        self._ended.wait()
        if self._summary is not None:
            return self._summary
        if self.interrupted:
            return None
        raise self._why_it_ended()

    def _why_it_ended(self) -> BaseException:
        """Why the child ended without a summary."""
        if self.refusal is not None:
            return self.refusal
        self._process.join(timeout=5)
        if self.stopped_hard:
            return RuntimeError(STOPPED_HARD)
        if self._crash:
            if self.prepared is None:
                return RuntimeError(f"the collector failed to start:\n{self._crash}")
            return RuntimeError(
                f"{self._crash.strip().splitlines()[-1]} (traceback in {self.prepared.log_path})"
            )
        return RuntimeError(
            f"the collector process ended without a summary (exit code {self._process.exitcode})"
        )

    def close(self, timeout: float = EXIT_TIMEOUT_S) -> None:
        """Hang up (the child stops the run gracefully) and wait for it to exit."""
        self._commands.close()
        if self._process.pid is not None:
            self._process.join(timeout)
            if self._process.is_alive():
                self._process.terminate()
                self._process.join(5)
        self._events.close()


class ChildControls(RemoteControls):
    """The dashboard's controls of its own child: a stop before the child answers calls interrupts its
    preparation, where the call would wait for an answer that comes only once the preparation is over."""

    def __init__(self, process: CollectorProcess, temperature: float) -> None:
        super().__init__(process._commands, temperature)
        self._process = process

    def stop(self) -> None:
        if not self._process.interrupt_preparation():
            super().stop()


def vftui_command(*args: str) -> list[str]:
    """``python -P -m vftui ARGS``, vftui started again as a child (``run --detach``, rl's sim trainer):
    ``-P`` keeps the working folder off ``sys.path``, so a folder named ``vftui`` there (a clone's parent)
    is never imported in place of the installed package."""
    return [sys.executable, "-P", "-m", "vftui", *args]
