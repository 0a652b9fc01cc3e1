"""The collector in a process of its own, for the dashboard.

A CPU-bound collector and a Textual app in one interpreter share one GIL: every frame
the app paints is time the collector does not run (bench/throughput.py shows the cost).
So the dashboard spawns the run:

- the child prepares the run on its own main thread (verifiers environments install
  signal handlers there) and reports ``Prepared`` or the error it refused with;
- its events go back in batches over one pipe, sent by a thread of their own, so the
  collector never waits on the view;
- ``RemoteControls`` forwards each control call over a second pipe and returns the
  child's answer, so keys still are method calls on the run's controls;
- the child stays until the parent hangs up (a dump after the end still works); a parent
  that dies is a hang-up too, and the child then stops the run gracefully and flushes.

Nothing here imports atroposlib or verifiers in the parent: the child imports the runner.
"""

from __future__ import annotations

import contextlib
import faulthandler
import gc
import itertools
import multiprocessing
import os
import pickle
import queue
import signal
import socket
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, TextIO

from vftui.config import RunConfig
from vftui.events import Event, GroupCollected, LogRecord, RunControls, RunState, RunStatus, RunSummary
from vftui.wording import LOADING_LIBRARIES
from vftui.run_files import LOG_SUFFIX

REPLY_TIMEOUT_S = 10.0
EXIT_TIMEOUT_S = 30.0
COMMANDS = frozenset({"temperature", "toggle_pause", "set_temperature", "nudge_temperature", "dump", "stop"})


@dataclass(frozen=True)
class Prepared:
    """The run is ready; what the parent needs to describe it afterwards."""

    out_path: str
    simulated: bool


@dataclass(frozen=True)
class Refused:
    """``prepare`` failed: the exception to raise in the parent (a UserError, usually)."""

    error: BaseException


@dataclass(frozen=True)
class Crashed:
    """An unexpected exception in the child, as text."""

    traceback: str


class CollectorGone(ConnectionError):
    """The collector process has ended and answers no more calls."""


# -- the parent's side ------------------------------------------------------------------


class RemoteControls(RunControls):
    """The run's controls, one pipe round trip per call.

    Once the child has gone, ``stop`` and ``toggle_pause`` do nothing, temperature calls
    return the last known value and ``dump`` raises ``CollectorGone``.
    """

    def __init__(self, conn: Connection, temperature: float) -> None:
        self._conn = conn
        self._lock = threading.Lock()
        self._temperature = temperature
        self._calls = itertools.count()

    def _call(self, name: str, *args: Any) -> Any:
        """Send a call and wait for its answer; a late answer to an earlier call is skipped."""
        with self._lock:
            call = next(self._calls)
            deadline = time.monotonic() + REPLY_TIMEOUT_S
            try:
                self._conn.send((call, name, args))
                while True:
                    if not self._conn.poll(max(0.0, deadline - time.monotonic())):
                        raise CollectorGone(f"the collector did not answer {name} within {REPLY_TIMEOUT_S:g} s")
                    answered, ok, value = self._conn.recv()
                    if answered == call:
                        break
            except CollectorGone:
                raise
            except (EOFError, OSError) as e:
                raise CollectorGone("the collector process has ended") from e
        if not ok:
            raise value
        return value

    def _temperature_call(self, name: str, *args: Any) -> float:
        with contextlib.suppress(CollectorGone):
            self._temperature = self._call(name, *args)
        return self._temperature

    @property
    def temperature(self) -> float:
        return self._temperature_call("temperature")

    def toggle_pause(self) -> None:
        with contextlib.suppress(CollectorGone):
            self._call("toggle_pause")

    def set_temperature(self, value: float) -> float:
        return self._temperature_call("set_temperature", value)

    def nudge_temperature(self, delta: float) -> float:
        return self._temperature_call("nudge_temperature", delta)

    def dump(self, path: Path | None = None) -> Path:
        return self._call("dump", path)

    def stop(self) -> None:
        with contextlib.suppress(CollectorGone):
            self._call("stop")


class CollectorProcess:
    """The parent's handle on a run in a child process.

    ``start`` returns at once: the child prepares the run while the dashboard is already on
    screen, showing its steps. ``wait_summary`` blocks until the run's summary arrives (for
    the app's worker) and raises what prepare refused with (``refusal``) or a crash;
    ``close`` hangs up and reaps the child.
    """

    def __init__(
        self,
        config: RunConfig,
        emit: Callable[[Event], None],
        target: Callable[[RunConfig, Connection, Connection], None] | None = None,
    ) -> None:
        """``target`` is what the child runs (``child_main``; a bench passes a stand-in)."""
        context = multiprocessing.get_context("spawn")
        self._events, child_events = context.Pipe(duplex=False)
        self._commands, child_commands = context.Pipe()
        self._child_ends = (child_events, child_commands)
        self._process = context.Process(
            target=target or child_main, args=(config, child_events, child_commands), name="vftui-collector"
        )
        self._emit = emit
        self.controls = RemoteControls(self._commands, config.temperature)
        self._summary: RunSummary | None = None
        self.prepared: Prepared | None = None
        self.refusal: BaseException | None = None
        self._crash = ""
        self._ended = threading.Event()

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

    def wait_prepared(self) -> Prepared:
        """Block until the run is prepared; raises what prepare refused with, or a crash."""
        while self.prepared is None and not self._ended.wait(0.05):
            pass
        if self.prepared is None:
            self._raise_ending()
        return self.prepared

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

    def wait_summary(self) -> RunSummary:
        """The run's summary; raises if the child ended without one."""
        self._ended.wait()
        if self._summary is not None:
            return self._summary
        self._raise_ending()

    def _raise_ending(self) -> None:
        """Why the child ended without a summary."""
        if self.refusal is not None:
            raise self.refusal
        self._process.join(timeout=5)
        if self._crash:
            if self.prepared is None:
                raise RuntimeError(f"the collector failed to start:\n{self._crash}")
            where = Path(self.prepared.out_path).with_suffix(LOG_SUFFIX)
            raise RuntimeError(f"{self._crash.strip().splitlines()[-1]} (traceback in {where})")
        raise RuntimeError(f"the collector process ended without a summary (exit code {self._process.exitcode})")

    def close(self, timeout: float = EXIT_TIMEOUT_S) -> None:
        """Hang up (the child stops the run gracefully) and wait for it to exit."""
        self._commands.close()
        if self._process.pid is not None:
            self._process.join(timeout)
            if self._process.is_alive():
                self._process.terminate()
                self._process.join(5)
        self._events.close()


# -- the child's side -------------------------------------------------------------------


class Outbox:
    """Events queued by any thread, sent in batches over one connection by a thread of its own."""

    _CLOSE = object()

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.hung_up = False
        self._thread = threading.Thread(target=self._send_all, name="collector-outbox", daemon=True)
        self._thread.start()

    @property
    def backlog(self) -> int:
        """Events not sent yet: grows when the other end stops reading."""
        return self._queue.qsize()

    def put(self, event: Any) -> None:
        self._queue.put(event)

    def _send_all(self) -> None:
        while True:
            batch = [self._queue.get()]
            with contextlib.suppress(queue.Empty):
                while len(batch) < 1000:
                    batch.append(self._queue.get_nowait())
            closing = batch[-1] is self._CLOSE
            if closing:
                batch.pop()
            if batch and not self.hung_up:
                self.hung_up = not self._send(batch)  # the other end is gone; the run still stops and flushes
            if closing:
                return

    def _send(self, batch: list[Any]) -> bool:
        """Send one batch; False once the other end has hung up."""
        try:
            self._conn.send([e.compacted() if isinstance(e, GroupCollected) else e for e in batch])
        except OSError:
            return False
        except Exception:  # noqa: BLE001 - an event that does not pickle: send the rest and say so
            try:
                self._conn.send([_sendable(e) for e in batch])
            except OSError:
                return False
        return True

    def close(self) -> None:
        """Send what is queued, then stop."""
        self._queue.put(self._CLOSE)
        self._thread.join(timeout=EXIT_TIMEOUT_S)

    def hang_up(self) -> None:
        """Stop at once, queued events or not: the other end stopped reading (a send may be stuck)."""
        self.hung_up = True
        shut_down(self._conn)  # wakes a send blocked on a full buffer
        self._queue.put(self._CLOSE)


def shut_down(conn: Connection) -> None:
    """End a socket connection for both sides at once, waking a thread blocked reading or writing it
    (closing the descriptor alone does not); then close it."""
    with contextlib.suppress(OSError, ValueError):
        fd = os.dup(conn.fileno())
        try:
            sock = socket.socket(fileno=fd)
        except OSError:
            os.close(fd)
            raise
        with sock:
            sock.shutdown(socket.SHUT_RDWR)
    conn.close()


def serve_commands(conn: Connection, controls: RunControls, stop_on_hang_up: bool = True) -> None:
    """Answer control calls until the caller hangs up; the dashboard that started the run hanging
    up stops it (``stop_on_hang_up``), one that attached later does not."""
    while True:
        try:
            call, name, args = conn.recv()
        except (EOFError, OSError):
            if stop_on_hang_up:
                controls.stop()
            return
        try:
            if name not in COMMANDS:
                raise ValueError(f"unknown control {name!r}")
            member = getattr(controls, name)
            reply = (call, True, member(*args) if callable(member) else member)
        except Exception as e:  # noqa: BLE001 - the caller re-raises it
            reply = (call, False, e if _picklable(e) else RuntimeError(str(e)))
        try:
            conn.send(reply)
        except OSError:
            if stop_on_hang_up:
                controls.stop()
            return


def child_main(config: RunConfig, events: Connection, commands: Connection) -> None:
    """The child process: prepare, report, collect, answer controls until hung up.

    The dashboard is on screen from the start, so nothing here may write to the terminal:
    output goes to a scratch file until the run's own log file is known.
    """
    import asyncio

    early = _capture_output(tempfile.TemporaryFile("w+"))
    outbox = Outbox(events)
    outbox.put(RunStatus(RunState.STARTING, 0, config.steps, LOADING_LIBRARIES))
    from vftui.collector.runner import Run

    run = Run(config, outbox.put)
    try:
        try:
            plan = run.prepare()
        except KeyboardInterrupt:
            return
        except Exception as e:  # noqa: BLE001 - the parent raises it as prepare would have
            outbox.put(Refused(e) if _picklable(e) else Crashed(traceback.format_exc()))
            return
        # From here the parent drives the run: terminal signals go to it, and the
        # terminal is the dashboard's, so library output goes to a file beside the run.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        log_path = plan.out_path.with_suffix(LOG_SUFFIX)
        log = open(log_path, "a", buffering=1)  # noqa: SIM115 - lives as long as the process
        early.seek(0)
        log.write(early.read())  # what the libraries said while the run was prepared
        _capture_output(log)
        # The libraries and the environment loaded by now live as long as the run; keeping
        # them out of the collector's reach keeps full collections (which stall control
        # calls as well as collecting) short.
        gc.freeze()
        outbox.put(Prepared(str(plan.out_path), plan.simulated))
        server = threading.Thread(target=serve_commands, args=(commands, run.controls), name="collector-controls")
        server.start()
        try:
            asyncio.run(run.execute(redirect_prints=True))
        except Exception:  # noqa: BLE001 - reported to the parent, which shows it
            traceback.print_exc()  # into the log file, for the whole story
            outbox.put(Crashed(traceback.format_exc()))
        server.join()
        _remove_if_empty(log_path)
    finally:
        run.close()
        outbox.close()


def _sendable(event: Any) -> Any:
    """The event, or a log line saying it could not be sent."""
    event = event.compacted() if isinstance(event, GroupCollected) else event
    if _picklable(event):
        return event
    return LogRecord("ERROR", "vftui", f"a {type(event).__name__} event could not be sent to the dashboard")


def _picklable(value: Any) -> bool:
    try:
        pickle.dumps(value)
    except Exception:  # noqa: BLE001 - any failure means "send something else"
        return False
    return True


def _capture_output(file: TextIO) -> TextIO:
    """Point stdout/stderr (Python's and the file descriptors) at ``file``."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os.dup2(file.fileno(), 1)
    os.dup2(file.fileno(), 2)
    sys.stdout = sys.stderr = file
    faulthandler.enable(file)
    return file


def _remove_if_empty(path: Path) -> None:
    with contextlib.suppress(OSError):
        if path.stat().st_size == 0:
            path.unlink()
