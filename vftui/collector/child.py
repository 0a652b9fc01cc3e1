"""The collector's side of the dashboard's child process (``live.process`` is the parent's).

The child prepares the run on its own main thread (verifiers environments install signal
handlers there), reports ``Prepared`` or the error it refused with, collects, and answers
control calls until the parent hangs up. The dashboard is on screen from the start, so
nothing here may write to the terminal: output goes to a scratch file until the run's own
log file (beside its jsonl) is known. The run is imported lazily (``lifecycle``): the parent
imports this module only to name it as the child's target.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
import traceback
from collections.abc import Iterator
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING

from vftui.collector.lifecycle import run_to_end
from vftui.config import RunConfig
from vftui.errors import RunEnded
from vftui.live.process import STOP_SIGNAL, Crashed, Prepared, Refused
from vftui.live.wire import Outbox, picklable, serve_commands
from vftui.run_controls import RunControls

if TYPE_CHECKING:
    from vftui.collector.run import PreparedRun


def child_main(config: RunConfig, events: Connection, commands: Connection) -> None:
    """Prepare, report, collect, answer controls until hung up."""
    stop = _ParentsStop()
    _no_process_locks()
    outbox = Outbox(events)
    try:
        run_to_end(config, outbox.put, _Child(stop, outbox, commands))
    except KeyboardInterrupt:  # the parent's stop, or Ctrl-C before the dashboard took the terminal
        outbox.put(Refused(KeyboardInterrupt()))
    except Exception as e:  # noqa: BLE001 - the parent raises it as prepare would have
        outbox.put(Refused(e) if picklable(e) else Crashed(traceback.format_exc()))
    finally:
        outbox.close()


class _Child:
    """The run's host in the dashboard's child: the parent drives the run (its stop, its controls over a pipe),
    the terminal is the dashboard's, and a crash is reported to the parent."""

    def __init__(self, stop: _ParentsStop, outbox: Outbox, commands: Connection) -> None:
        self._stop = stop
        self._outbox = outbox
        self._commands = commands

    def prepared(self, run: PreparedRun) -> None:
        self._stop.prepared.set()
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the terminal's signals are the parent's now
        signal.signal(signal.SIGHUP, signal.SIG_IGN)

    @contextlib.contextmanager
    def while_running(self, run: PreparedRun) -> Iterator[None]:
        self._outbox.put(Prepared(str(run.plan.files.log), run.plan.simulated))
        server = threading.Thread(
            target=serve_commands, args=(self._commands, run.controls), name="collector-controls"
        )
        server.start()
        self._stop.then_stop(
            run.controls
        )  # one the parent sent before it knew the run was prepared
        try:
            yield
        except Exception:  # noqa: BLE001 - reported to the parent, which shows it
            traceback.print_exc()  # into the log file, for the whole story
            self._outbox.put(Crashed(traceback.format_exc()))
        server.join()

    def say(self, line: str) -> None:
        """Into the log file beside the run's jsonl: the parent says why, by the exit code."""
        print(line, file=sys.stderr, flush=True)


def _no_process_locks() -> None:
    """tqdm (datasets' progress bars) locks with a multiprocessing semaphore by default; a collector ended by a
    second stop leaves it, and the dashboard's resource tracker then warns of it on the terminal. This process
    shares its bars with no other: a thread lock does."""
    with contextlib.suppress(ImportError):
        import tqdm

        tqdm.tqdm.set_lock(threading.RLock())


class _ParentsStop:
    """The parent's stop before this process answers its calls (``live.process.STOP_SIGNAL``): while the run is
    prepared it interrupts the preparation (KeyboardInterrupt, which undoes what was made); after, it stops the
    run from a thread of its own, as the parent's call would."""

    def __init__(self) -> None:
        self.prepared = threading.Event()
        self._asked = threading.Event()
        signal.signal(STOP_SIGNAL, self._signalled)

    def _signalled(self, signum: int, frame: object) -> None:
        self._asked.set()
        if not self.prepared.is_set():
            raise KeyboardInterrupt

    def then_stop(self, controls: RunControls) -> None:
        def stop_when_asked() -> None:
            self._asked.wait()
            with contextlib.suppress(RunEnded):  # it ended meanwhile
                controls.stop()

        threading.Thread(target=stop_when_asked, name="parents-stop", daemon=True).start()
