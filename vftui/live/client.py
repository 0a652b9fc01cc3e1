"""A dashboard's end of a run's control socket (``live.server`` is the run's).

``connect`` checks that the run at the other end is our own user's; ``ask_status`` is what
``vftui runs`` asks each run; ``AttachedRun`` is what ``vftui attach`` drives the dashboard
with: the run's events, its controls and its summary.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path

from vftui.errors import UserError
from vftui.events import Event, RunSummary
from vftui.live.server import RunInfo, peer_uid
from vftui.live.wire import REPLY_TIMEOUT_S, RemoteControls, shut_down


def connect(path: Path, wish: str) -> Connection:
    """A connection to the run listening at ``path``, checked to be our own user's."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(os.fspath(path))
        if peer_uid(sock) != os.getuid():
            raise UserError(f"{path} belongs to another user; not attaching to it")
    except OSError as e:
        sock.close()
        raise UserError(f"no run answers at {path} ({e.strerror or e}); is it still running?") from None
    except BaseException:
        sock.close()
        raise
    conn = Connection(sock.detach())
    try:
        conn.send(wish)
    except OSError as e:  # it hung up at once (a run of another user's refuses us this way)
        conn.close()
        raise UserError(f"no run answers at {path} ({e.strerror or e}); is it still running?") from None
    return conn


def ask_status(path: Path, timeout: float = REPLY_TIMEOUT_S) -> RunInfo | None:
    """A live run's ``RunInfo``, or None when nothing (of ours) answers there."""
    try:
        conn = connect(path, "status")
    except UserError:
        return None
    try:
        return conn.recv() if conn.poll(timeout) else None
    except (EOFError, OSError):
        return None
    finally:
        conn.close()


def control(path: Path, call: Callable[[RemoteControls], object]) -> None:
    """One control call on the run listening at ``path`` (``vftui runs``' pause and stop keys)."""
    conn = connect(path, "controls")
    try:
        call(RemoteControls(conn, float("nan")))
    finally:
        shut_down(conn)


class AttachedRun:
    """A dashboard's handle on a run it attached to: its events, its controls, its summary.

    ``start`` connects (a UserError when nothing of ours answers) and feeds ``emit`` from a
    thread; ``wait_summary`` blocks until the run's summary comes, or fails when the run
    went away without one; ``close`` hangs up and leaves the run as it is.
    """

    def __init__(self, path: Path, emit: Callable[[Event], None]) -> None:
        self.path = path
        self._emit = emit
        self._events: Connection | None = None
        self._commands: Connection | None = None
        self.controls: RemoteControls | None = None
        self.summary: RunSummary | None = None
        self._ended = threading.Event()

    def start(self) -> AttachedRun:
        self._events = connect(self.path, "events")
        self._commands = connect(self.path, "controls")
        self.controls = RemoteControls(self._commands, float("nan"))  # the run's own comes with its events
        threading.Thread(target=self._pump, name="attached-events", daemon=True).start()
        return self

    def _pump(self) -> None:
        try:
            while True:
                for event in self._events.recv():
                    self._emit(event)
                    if isinstance(event, RunSummary):
                        self.summary = event
        except (EOFError, OSError):
            pass
        finally:
            self._ended.set()

    def wait_summary(self, give_up: threading.Event | None = None) -> RunSummary | None:
        """The run's summary; None as soon as ``give_up`` is set (the dashboard left the run running)."""
        while not self._ended.wait(0.1):
            if give_up is not None and give_up.is_set():
                return None
        if self.summary is None:
            raise RuntimeError("the run went away without a summary (its process ended)")
        return self.summary

    def close(self) -> None:
        for conn in (self._commands, self._events):
            if conn is not None:
                shut_down(conn)
