"""The collector's side of the dashboard's child process (``live.process`` is the parent's).

The child prepares the run on its own main thread (verifiers environments install signal
handlers there), reports ``Prepared`` or the error it refused with, collects, and answers
control calls until the parent hangs up. The dashboard is on screen from the start, so
nothing here may write to the terminal: output goes to a scratch file until the run's own
log file (beside its jsonl) is known. This module imports the run lazily: the parent
imports it only to name it as the child's target.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import tempfile
import threading
import traceback
from multiprocessing.connection import Connection

from vftui.collector import captured
from vftui.config import RunConfig
from vftui.errors import RunEnded
from vftui.events import RunControls, RunState, RunStatus
from vftui.live.process import STOP_SIGNAL, Crashed, Prepared, Refused
from vftui.live.wire import Outbox, picklable, serve_commands
from vftui.text.wording import LOADING_LIBRARIES


def child_main(config: RunConfig, events: Connection, commands: Connection) -> None:
    """Prepare, report, collect, answer controls until hung up."""
    import asyncio

    stop = _ParentsStop()
    early = captured.capture(tempfile.TemporaryFile("w+"))  # noqa: SIM115 - the output until the log file is known
    _no_process_locks()
    outbox = Outbox(events)
    outbox.put(RunStatus(RunState.STARTING, 0, config.groups_hint, LOADING_LIBRARIES))
    from vftui.collector import scoring_limit
    from vftui.collector.run import Run

    run = Run(config, outbox.put)
    try:
        try:
            plan = run.prepare()
            stop.prepared.set()  # within the try: a stop that came as prepare returned is still caught
        except (
            KeyboardInterrupt
        ):  # the parent's stop, or Ctrl-C before the dashboard took the terminal
            outbox.put(Refused(KeyboardInterrupt()))
            return
        except Exception as e:  # noqa: BLE001 - the parent raises it as prepare would have
            outbox.put(Refused(e) if picklable(e) else Crashed(traceback.format_exc()))
            return
        # From here the parent drives the run: terminal signals go to it, and the
        # terminal is the dashboard's, so library output goes to a file beside the run.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        log_path = captured.switch_to_log(plan.files, early, outbox.put)
        outbox.put(Prepared(str(plan.files.log), plan.simulated))
        server = threading.Thread(
            target=serve_commands, args=(commands, run.controls), name="collector-controls"
        )
        server.start()
        stop.then_stop(run.controls)  # one the parent sent before it knew the run was prepared
        try:
            with scoring_limit.limit.may_end_process(
                _into_the_log
            ):  # the parent says why, by the exit code
                asyncio.run(run.execute())
        except Exception:  # noqa: BLE001 - reported to the parent, which shows it
            traceback.print_exc()  # into the log file, for the whole story
            outbox.put(Crashed(traceback.format_exc()))
        server.join()
        if log_path is not None:
            captured.remove_if_empty(log_path)
    finally:
        run.close()
        outbox.close()


def _into_the_log(line: str) -> None:
    print(
        line, file=sys.stderr, flush=True
    )  # the log file beside the run's jsonl, where the child's output goes


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
