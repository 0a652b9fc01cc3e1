"""Events and control calls between a run and a view, over ``multiprocessing`` connections.

One framing serves the dashboard's pipes to its collector process and the control socket
every run listens on (``live.server``):

- events go in batches, sent by a thread of their own (``Outbox``), so a run never waits
  on a view;
- a control call is ``(call number, name, args)`` answered by ``(call number, ok, value)``;
  ``RemoteControls`` makes each one a method call, as on the run's own ``Controls``, and
  ``serve_commands`` answers them on the run's side. The calls allowed are exactly the
  members of ``run_controls.RunControls``.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import pickle
import queue
import socket
import threading
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from vftui.errors import RunEnded, Unanswered
from vftui.events import GroupCollected, LogRecord
from vftui.run_controls import RunControls

REPLY_TIMEOUT_S = 10.0
EXIT_TIMEOUT_S = 30.0
BATCH = 1000  # events per send at most
COMMANDS = frozenset(name for name in vars(RunControls) if not name.startswith("_"))
"""The control calls a peer may make: what a key can do, and no more."""
WHAT = {
    "toggle_pause": "pause or resume",
    "set_temperature": "change the temperature",
    "nudge_temperature": "change the temperature",
}


class CollectorGone(ConnectionError):
    """The run has ended (or hung up) and answers no more calls."""


class NoAnswer(CollectorGone):
    """No answer in time: the process is there but busy (still preparing the run, or stuck); the call may
    still be carried out when it answers."""


class RemoteControls(RunControls):
    """The run's controls, one round trip per call.

    Once the run's process has gone (the run ended, or its collector died), pause and temperature
    calls are refused with ``RunEnded``, as an ended run's own controls refuse them, ``stop`` does
    nothing, the ``temperature`` is the last known value and ``dump`` raises ``CollectorGone``. A call
    not answered within ``reply_timeout_s`` raises ``Unanswered``: the run may still carry it out, late.
    """

    def __init__(
        self, conn: Connection, temperature: float, reply_timeout_s: float = REPLY_TIMEOUT_S
    ) -> None:
        self._conn, self._reply_timeout_s = conn, reply_timeout_s
        self._lock = threading.Lock()
        self._temperature = temperature
        self._calls = itertools.count()

    def _call(self, name: str, *args: Any) -> Any:
        """Send a call and wait for its answer; a late answer to an earlier call is skipped."""
        with self._lock:
            call = next(self._calls)
            deadline = time.monotonic() + self._reply_timeout_s
            try:
                self._conn.send((call, name, args))
                while True:
                    if not self._conn.poll(max(0.0, deadline - time.monotonic())):
                        raise NoAnswer(
                            f"the collector did not answer {name} within {self._reply_timeout_s:g} s"
                        )
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

    def _steer(self, name: str, *args: Any) -> Any:
        try:
            return self._call(name, *args)
        except NoAnswer as e:  # a key that seemed to do nothing says so: it may still act, late
            raise Unanswered(
                f"the run did not answer within {self._reply_timeout_s:g} s; it may still {WHAT[name]} "
                "when it does"
            ) from e
        except CollectorGone as e:  # the key did nothing, and the view says why
            raise RunEnded("the run's process has ended: there is nothing left to steer") from e

    @property
    def temperature(self) -> float:
        with contextlib.suppress(CollectorGone):
            self._temperature = self._call("temperature")
        return self._temperature

    def toggle_pause(self) -> None:
        self._steer("toggle_pause")

    def set_temperature(self, value: float) -> float:
        return self._temperature_call("set_temperature", value)

    def nudge_temperature(self, delta: float) -> float:
        return self._temperature_call("nudge_temperature", delta)

    def _temperature_call(self, name: str, *args: Any) -> float:
        self._temperature = self._steer(name, *args)
        return self._temperature

    def dump(self, path: Path | None = None, where: str = "") -> Path:
        return self._call("dump", path, where)

    def stop(self) -> None:
        with contextlib.suppress(CollectorGone):
            self._call("stop")


def serve_commands(conn: Connection, controls: RunControls, stop_on_hang_up: bool = True) -> None:
    """Answer control calls until the caller hangs up; the dashboard that started the run hanging
    up stops it (``stop_on_hang_up``), one that attached later does not."""

    def hung_up() -> None:
        if stop_on_hang_up:
            with contextlib.suppress(RunEnded):  # it had ended: nothing to stop
                controls.stop()

    while True:
        try:
            call, name, args = conn.recv()
        except (EOFError, OSError):
            hung_up()
            return
        try:
            if name not in COMMANDS:
                raise ValueError(f"unknown control {name!r}")
            member = getattr(controls, name)
            reply = (call, True, member(*args) if callable(member) else member)
        except Exception as e:  # noqa: BLE001 - the caller re-raises it
            reply = (call, False, e if picklable(e) else RuntimeError(str(e)))
        try:
            conn.send(reply)
        except OSError:
            hung_up()
            return


class Outbox:
    """Events queued by any thread, sent in batches over one connection by a thread of its own."""

    _CLOSE = object()

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.hung_up = False
        self._thread = threading.Thread(target=self._send_all, name="outbox", daemon=True)
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
                while len(batch) < BATCH:
                    batch.append(self._queue.get_nowait())
            closing = batch[-1] is self._CLOSE
            if closing:
                batch.pop()
            if batch and not self.hung_up:
                self.hung_up = not self._send(
                    batch
                )  # the other end is gone; the run still stops and flushes
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


def picklable(value: Any) -> bool:
    try:
        pickle.dumps(value)
    except Exception:  # noqa: BLE001 - any failure means "send something else"
        return False
    return True


def _sendable(event: Any) -> Any:
    """The event, or a log line saying it could not be sent."""
    event = event.compacted() if isinstance(event, GroupCollected) else event
    if picklable(event):
        return event
    return LogRecord(
        "ERROR", "vftui", f"a {type(event).__name__} event could not be sent to the dashboard"
    )
