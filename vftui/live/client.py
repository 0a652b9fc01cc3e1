"""A dashboard's end of a run's control socket (``live.server`` is the run's).

``connect`` checks that the run at the other end is our own user's; ``ask_status`` is what
``vftui runs`` asks each run, within a second: a run stopped with Ctrl-Z accepts nothing (or
accepts and says nothing) and is listed as not answering; ``AttachedRun`` is what ``vftui
attach`` drives the dashboard with: the run's events, its controls and its summary.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path

from vftui.errors import UserError
from vftui.events import Event, RunSummary
from vftui.live.server import RunInfo, peer_uid
from vftui.live.wire import RemoteControls, shut_down

STATUS_TIMEOUT_S = 1.0  # a live run answers in milliseconds


@dataclass(frozen=True)
class NotAnswering:
    """A run's process listens but answers nothing in time: stopped (Ctrl-Z), or stuck."""


class Busy(UserError):
    """A run that takes no more connections: its queue is full, so it has accepted none for a while."""


def connect(path: Path, wish: str, timeout: float | None = None) -> Connection:
    """A connection to the run listening at ``path``, checked to be our own user's; ``timeout`` bounds the
    connect (a run stopped with Ctrl-Z fills its queue, and then a connect would wait for ever)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(os.fspath(path))
        if peer_uid(sock) != os.getuid():
            raise UserError(f"{path} belongs to another user; not attaching to it")
        sock.settimeout(None)
    except (BlockingIOError, TimeoutError):
        sock.close()
        raise Busy(f"the run at {path} takes no connection; is it stopped (Ctrl-Z)?") from None
    except OSError as e:
        sock.close()
        raise UserError(
            f"no run answers at {path} ({e.strerror or e}); is it still running?"
        ) from None
    except BaseException:
        sock.close()
        raise
    conn = Connection(sock.detach())
    try:
        conn.send(wish)
    except OSError as e:  # it hung up at once (a run of another user's refuses us this way)
        conn.close()
        raise UserError(
            f"no run answers at {path} ({e.strerror or e}); is it still running?"
        ) from None
    return conn


def ask_status(path: Path, timeout: float = STATUS_TIMEOUT_S) -> RunInfo | NotAnswering | None:
    """A live run's ``RunInfo``; ``NotAnswering`` when its process listens but says nothing within ``timeout``;
    None when nothing (of ours) listens there."""
    try:
        conn = connect(path, "status", timeout)
    except Busy:
        return NotAnswering()
    except UserError:
        return None
    try:
        return conn.recv() if conn.poll(timeout) else NotAnswering()
    except (EOFError, OSError):
        return None
    finally:
        conn.close()


def control(path: Path, call: Callable[[RemoteControls], object]) -> None:
    """One control call on the run listening at ``path`` (``vftui runs``' pause and stop keys)."""
    conn = connect(path, "controls", STATUS_TIMEOUT_S)
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
        self.controls = RemoteControls(
            self._commands, float("nan")
        )  # the run's own comes with its events
        threading.Thread(
            target=self._pump, args=(self._events,), name="attached-events", daemon=True
        ).start()
        return self

    def _pump(self, events: Connection) -> None:
        try:
            while True:
                for event in events.recv():
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
