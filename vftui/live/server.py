"""A running run's control socket: dashboards attach to it, ``vftui runs`` asks it how it does.

Every run (headless, detached or under a dashboard) listens on a Unix socket beside its
jsonl, ``<run>.sock``, created readable and writable by its owner only; both ends check
the other's uid (``SO_PEERCRED``) before reading a byte, so another user on the machine can
neither watch nor steer the run, nor pose as one. The framing is multiprocessing's (the same
``Connection`` the dashboard's own pipe uses). A peer's first message says what it wants:

- ``"events"``: the run so far (its start, last state and figures, the recent groups and
  log, then ``RunSoFar``), followed by every event as it happens, in batches;
- ``"controls"``: control calls, answered as ``wire.serve_commands`` answers the
  dashboard's pipe, except that a peer hanging up leaves the run alone;
- ``"status"``: one ``RunInfo``, for ``vftui runs``.
"""

from __future__ import annotations

import collections
import contextlib
import os
import select
import socket
import struct
import threading
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TypeVar, assert_never

from vftui import events as ev
from vftui import safe_files, stats
from vftui.errors import UserError
from vftui.figures.run_tally import RunTally
from vftui.live.wire import Outbox, serve_commands
from vftui.run_controls import RunControls

HELLO_TIMEOUT_S = 5.0
MAX_BACKLOG = (
    20_000  # events queued for one peer; a dashboard that stops reading (Ctrl-Z) is let go
)
RECENT_LOGS = 200

E = TypeVar("E", bound=ev.Event)


@dataclass(frozen=True)
class RunInfo:
    """How a live run is doing, in a line of ``vftui runs``."""

    state: ev.RunState
    groups_done: int
    groups_total: int
    groups_per_s: float
    out_path: str
    pid: int
    api: ev.ApiStatus | None = None  # rl: the trajectory API as the run last saw it
    mean_reward: float | None = None


def peer_uid(sock: socket.socket) -> int:
    """The uid of the process at the other end of a Unix socket, as the kernel saw it connect."""
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)[1]


class Replay:
    """What a dashboard attaching now needs to show the run as if it had watched from the start."""

    def __init__(self, window: int, tally: RunTally) -> None:
        self.tally = (
            tally  # the run's own: its figures count every group, a resumed run's earlier ones too
        )
        self.latest: dict[type, ev.Event] = {}
        self.groups: collections.deque[ev.GroupCollected] = collections.deque(maxlen=window)
        self.logs: collections.deque[ev.LogRecord] = collections.deque(maxlen=RECENT_LOGS)
        self.servers: dict[str, ev.ServerStatus] = {}
        self.alerts: dict[str, ev.Alert] = {}  # the active ones
        self.troubles: dict[str, ev.EndpointTrouble] = {}  # by service, until it works again

    def latest_of(self, kind: type[E]) -> E | None:
        """The last event of ``kind`` kept in ``latest`` (each is kept under its own type)."""
        event = self.latest.get(kind)
        return event if isinstance(event, kind) else None

    def add(self, event: ev.Event) -> None:  # noqa: C901 - one case per kind of event
        """Keep what a later dashboard needs of ``event`` and fold its groups into the run's tally (the one
        fold of a group in the run's process); every kind of event is named here."""
        match event:
            case ev.GroupCollected():
                self.groups.append(event.compacted())
                self.tally.add(event)
                self.troubles.clear()  # a group came through: whatever failed works again
            case ev.GroupDropped():
                self.tally.add(event)
            case ev.LogRecord():
                self.logs.append(event)
            case ev.ServerStatus():
                self.servers[event.url] = event
            case ev.Alert(active=True):
                self.alerts[event.name] = event
            case ev.Alert():
                self.alerts.pop(event.name, None)
            case ev.ApiStatus():
                self.latest[ev.ApiStatus] = event
                if event.reachable:
                    self.troubles.pop(ev.TRAJECTORY_API, None)
            case (
                ev.RunStarted()
                | ev.RunStatus()
                | ev.TemperatureChanged()
                | ev.RequestStats()
                | ev.Health()
                | ev.EvalReport()
                | ev.RunSummary()
            ):
                self.latest[type(event)] = event
            case ev.EndpointTrouble():
                self.troubles[event.service] = event
            case ev.GroupsDumped() | ev.MetricsWindow():
                pass  # of the moment: a dump is said once, the window's figures come again with the next groups
            case ev.FileProgress() | ev.RunSoFar():
                pass  # a viewed file's and a replay's own: a live run never sends them
            case _:
                assert_never(event)

    def events(self) -> list[ev.Event]:
        """The run so far, in an order the dashboard folds as it would have live."""
        first = [
            self.latest[kind]
            for kind in (ev.RunStarted, ev.TemperatureChanged)
            if kind in self.latest
        ]
        last = [
            self.latest[kind]
            for kind in (
                ev.RequestStats,
                ev.ApiStatus,
                ev.Health,
                ev.EvalReport,
                ev.RunStatus,
                ev.RunSummary,
            )
            if kind in self.latest
        ]
        return [
            *first,
            *self.groups,
            self.tally.so_far(),
            *self.logs,
            *self.servers.values(),
            *self.alerts.values(),
            *self.troubles.values(),
            *last,
        ]

    def info(self) -> RunInfo:
        started, status = self.latest_of(ev.RunStarted), self.latest_of(ev.RunStatus)
        state = status.state if status is not None else ev.RunState.STARTING
        return RunInfo(
            state=state,
            groups_done=max(
                [status.groups_done if status is not None else 0, *(g.index for g in self.groups)]
            ),
            groups_total=status.groups_total if status is not None else 0,
            groups_per_s=round(self.tally.groups_per_s(time.time(), state.collecting), 3),
            out_path=started.out_path if started is not None else "",
            pid=os.getpid(),
            api=self.latest_of(ev.ApiStatus),
            mean_reward=self.tally.metrics().get(stats.MEAN_REWARD),
        )


class RunServer:
    """Publishes a run's events to attached peers and answers their calls; ``publish`` is the run's emit.

    Its lock covers the replay and the tally's fold together with the peers' queues: a peer attaching
    gets the run so far, then exactly the events after it."""

    def __init__(self, window: int, tally: RunTally, uid: int | None = None) -> None:
        self._lock = threading.Lock()
        self._replay = Replay(window, tally)
        self._peers: list[Outbox] = []
        self._uid = os.getuid() if uid is None else uid
        self._sock: socket.socket | None = None
        self._path: Path | None = None
        self._closed = threading.Event()
        self._controls: RunControls | None = None

    def publish(self, event: ev.Event) -> None:
        with self._lock:
            self._replay.add(event)
            for peer in list(self._peers):
                if peer.backlog > MAX_BACKLOG or peer.hung_up:
                    self._peers.remove(peer)
                    peer.hang_up()
                else:
                    peer.put(event)

    def listen(self, path: Path, controls: RunControls, private: bool = False) -> None:
        """Start answering on ``path`` (owner-only; a stale socket of a dead run is replaced).

        ``private``: its folder is ours in the shared temporary folder (``RunFiles.socket``), and must be
        ours alone: one made by someone else (another user, or mode 0755) is refused, since whoever can
        write in it can swap our socket for theirs.
        """
        self._controls = controls
        if private:
            try:
                safe_files.own_folder(path.parent, private=True)
            except OSError as e:
                raise UserError(
                    f"the folder for the run's control socket, {path.parent}, is not this user's "
                    f"alone ({e.strerror}); remove it, or set TMPDIR to another folder"
                ) from e
        with contextlib.suppress(FileNotFoundError):
            path.unlink()  # our lock on the jsonl is held: whoever made it is gone
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        # bind gives the file the socket's own mode (less the umask): born 0600, so there is no moment in
        # which others may connect, and no chmod by name that a link swapped in after bind would redirect
        try:
            os.fchmod(sock.fileno(), 0o600)
            sock.bind(os.fspath(path))
            sock.listen(16)
        except OSError:
            sock.close()
            raise
        self._sock, self._path = sock, path
        threading.Thread(
            target=self._accept_all, args=(sock,), name="run-socket", daemon=True
        ).start()

    def close(self) -> None:
        """Stop listening, send the peers what is queued, and remove the socket."""
        self._closed.set()
        if self._path is not None:
            with contextlib.suppress(OSError):
                self._path.unlink()
        if self._sock is not None:
            self._sock.close()
        with self._lock:
            peers, self._peers = self._peers, []
        for peer in peers:
            peer.close()

    def _accept_all(self, listening: socket.socket) -> None:
        while not self._closed.is_set():
            try:
                ready, _, _ = select.select([listening], [], [], 0.5)
                if not ready:
                    continue
                sock, _ = listening.accept()
            except (OSError, ValueError):  # closed under us
                return
            threading.Thread(
                target=self._greet, args=(sock,), name="run-socket-peer", daemon=True
            ).start()

    def _greet(self, sock: socket.socket) -> None:
        """Check who it is, then give it what it asked for."""
        try:
            allowed = peer_uid(sock) == self._uid
        except OSError:
            allowed = False
        if not allowed:
            sock.close()  # another user's process: not a byte read or written
            return
        conn = Connection(sock.detach())
        try:
            if not conn.poll(HELLO_TIMEOUT_S):
                raise EOFError
            wish = conn.recv()
        except (EOFError, OSError, ValueError):
            conn.close()
            return
        if wish == "events":
            with self._lock:
                peer = Outbox(conn)
                for event in self._replay.events():
                    peer.put(event)
                self._peers.append(peer)
        elif wish == "controls" and self._controls is not None:
            serve_commands(conn, self._controls, stop_on_hang_up=False)
            conn.close()
        elif wish == "status":
            with self._lock:
                info = self._replay.info()
            with contextlib.suppress(OSError):
                conn.send(info)
            conn.close()
        else:
            conn.close()
