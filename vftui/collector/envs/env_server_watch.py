"""Whether the env server a run's rollouts wait on is still there (``--env-server``), so a dead one fails the
run in seconds, in one sentence naming it, where each rollout waited its whole time limit (the run's
``--timeout`` times the taskset's turns, and 120 s: about 42 minutes by default).

verifiers' ``EnvClient`` runs a rollout untimed over a ZMQ DEALER socket, which reconnects in silence: a
request the server took when it died is never answered. What is watched, on the run's loop:

- the connection: the client's socket, remade with ZMQ heartbeats (a peer whose host went away, or that
  stopped, is dropped in seconds as one that exited is), and its monitor's events. A dropped connection
  loses the requests the server held; once it is back (a restarted server) they fail, to be retried, and
  when nothing has answered there for ``GONE_AFTER_S``, the server is gone;
- a pool spawned for the run: its process, and each of its worker processes (verifiers' pool neither
  replaces a worker that died nor stops sending it requests, so the run cannot go on);
- the server's health check, while rollouts wait: none answered for ``UNANSWERED_S`` (a loop held by a
  sync judge answers late, and is not dead; a server that answers nothing at all is);
- what it sends (``env_server_answers``): a message past ``MAX_ANSWER_BYTES`` is never received; ZMQ closes
  the connection for good instead, which is told from a dropped one by ZMQ not retrying it.

A server declared gone fails each rollout waiting on it, and each one after it, with ``RunFailed``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from pathlib import Path
from typing import Any

from vftui.collector.envs.env_server_answers import MAX_ANSWER_BYTES, BoundedSocket
from vftui.errors import RunFailed

logger = logging.getLogger(__name__)
TICK_S = 0.5  # how often the processes and the connection's state are looked at
GONE_AFTER_S = 10.0  # a dropped connection not back by then: the server is gone
# a connection ZMQ dropped without retrying it by then: it closed it, on a message past MAXMSGSIZE (or not ZMQ's)
CLOSED_AFTER_S = 1.0
UNANSWERED_S = 60.0  # no health answer for this long while rollouts wait: the server is hung
HEALTH_EVERY_S = 5.0
HEARTBEAT_IVL_MS, HEARTBEAT_TIMEOUT_MS = 1_000, 5_000  # a silent peer is dropped in 5 s
KEPT_OPTIONS = ("LINGER", "SNDHWM", "RCVHWM")  # verifiers' own settings of the socket, kept


class ServerWatch:
    """The client of the server at ``address`` and what is known of the server's life; ``pool`` the one spawned
    for the run (a ``SpawnedPool``), if any."""

    def __init__(self, client: Any, address: str, pool: Any = None) -> None:
        self.client, self.address, self.pool = client, address, pool
        self.dead: str | None = None  # the sentence, once the server is gone
        self._trouble: asyncio.Future[None] = _future()  # for the requests sent since the last drop
        self._dropped: asyncio.Future[None] | None = (
            None  # those in flight at a drop, until it is back
        )
        self._down_since: float | None = time.monotonic()  # not connected yet
        self._retrying = True  # whether ZMQ retries the connection since it last dropped
        self._waiting = 0  # rollouts waiting on the server
        self._answered = time.monotonic()  # the last health answer, or when rollouts began to wait
        self._workers: set[int] = set()  # the pool's worker processes, as seen running
        self._monitor = _heartbeating(client, address)
        self._tasks = [
            asyncio.ensure_future(self._events()),
            asyncio.ensure_future(self._watching()),
            asyncio.ensure_future(self._asking()),
        ]

    async def run(self, request: Any, limit_s: float) -> Any:
        """``request`` (a coroutine of the client's) answered within ``limit_s``; ``TimeoutError`` past it;
        ``ConnectionError`` where the server dropped it; ``RunFailed`` once the server is gone. Cancelled, the
        request is cancelled (verifiers' client then cancels it on the server)."""
        if self.dead is not None:
            request.close()
            raise RunFailed(self.dead)
        if not self._waiting:
            self._answered = time.monotonic()  # no health asked while nothing waited
        trouble, task = self._trouble, asyncio.ensure_future(request)
        self._waiting += 1
        try:
            done, _ = await asyncio.wait(
                {task, trouble}, timeout=limit_s, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            self._waiting -= 1
            if not task.done():
                task.cancel()
        if task in done and (self.dead is None or task.exception() is None):
            return task.result()
        if self.dead is not None:
            raise RunFailed(self.dead)
        if trouble in done:
            raise ConnectionError(
                f"the env server at {self.address} dropped its connection, and the rollout with it"
            )
        raise TimeoutError

    async def close(self) -> None:
        """Stop watching; the monitor's socket closed (the client's context ends only once every socket of it
        has)."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        with contextlib.suppress(Exception):
            self.client.socket.disable_monitor()
        self._monitor.close(linger=0)

    # -- what is watched ------------------------------------------------------------------------------------

    async def _events(self) -> None:
        import zmq
        from zmq.utils.monitor import parse_monitor_message

        while True:
            event = parse_monitor_message(await self._monitor.recv_multipart())["event"]
            if event == zmq.EVENT_CONNECT_RETRIED:
                self._retrying = True
            elif event == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                self._down_since, self._answered = None, time.monotonic()
                if self._dropped is not None:  # back, without what it held
                    _resolve(self._dropped)
                    self._dropped = None
            elif event == zmq.EVENT_DISCONNECTED and self._down_since is None:
                logger.warning("the connection to the env server at %s dropped", self.address)
                self._down_since, self._retrying = time.monotonic(), False
                self._dropped, self._trouble = self._trouble, _future()

    async def _watching(self) -> None:
        while self.dead is None:
            down_s = time.monotonic() - self._down_since if self._down_since is not None else 0.0
            if (gone := self._pool_gone()) is not None:
                self._die(gone)
            elif self._down_since is not None and not self._retrying and down_s >= CLOSED_AFTER_S:
                self._die(
                    f"the env server at {self.address} sent a message of more than "
                    f"{MAX_ANSWER_BYTES // 1024**2} MB, the most vftui reads of a rollout's answer (or one "
                    "that is not ZMQ's): its connection is closed, and the rollouts it held are lost"
                )
            elif self._down_since is not None and down_s >= GONE_AFTER_S:
                self._die(
                    f"the env server at {self.address} went away: nothing has answered there for "
                    f"{GONE_AFTER_S:g} s (was it stopped?); the rollouts it held are lost"
                )
            await asyncio.sleep(TICK_S)

    async def _asking(self) -> None:
        """The server's health, while rollouts wait on it over a connection that is up."""
        while self.dead is None:
            await asyncio.sleep(HEALTH_EVERY_S)
            if not self._waiting or self._down_since is not None:
                continue
            try:
                answered = await self.client.health(timeout=HEALTH_EVERY_S)
            except RuntimeError:  # answered, with a failure (one refused as too big): not healthy
                answered = False
            if answered:
                self._answered = time.monotonic()
            elif self._waiting and time.monotonic() - self._answered >= UNANSWERED_S:
                self._die(
                    f"the env server at {self.address} has not answered its health check for "
                    f"{UNANSWERED_S:g} s while rollouts waited on it"
                )

    def _pool_gone(self) -> str | None:
        """Why the pool spawned for the run cannot go on (its process or a worker of it ended), or None."""
        pool = self.pool
        if pool is None:
            return None
        if not pool.process.is_alive():
            return (
                f"verifiers' env-server pool spawned for the run ended (exit code {pool.process.exitcode}); "
                f"the rollouts it held are lost (its log: {pool.log})"
            )
        running = workers_of(pool.process.pid)
        self._workers |= running
        if ended := sorted(pid for pid in self._workers - running if not is_running(pid)):
            return (
                f"a worker of verifiers' env-server pool spawned for the run ended (pid {ended[0]}): the pool "
                f"does not replace it and would send it more rollouts (its log: {pool.log})"
            )
        return None

    def _die(self, sentence: str) -> None:
        self.dead = sentence  # the run's failure says it
        logger.debug("%s", sentence)
        for future in (self._trouble, self._dropped):
            if future is not None:
                _resolve(future)


def _heartbeating(client: Any, address: str) -> Any:
    """The client's socket made anew with ZMQ heartbeats and ``MAX_ANSWER_BYTES`` (set before it connects, or
    they do not apply), its own settings kept, and its answers' values counted (``BoundedSocket``); the monitor
    of its connection's events."""
    import zmq

    old = client.socket
    kept = {name: old.getsockopt(getattr(zmq, name)) for name in KEPT_OPTIONS}
    old.close(linger=0)
    socket = client.ctx.socket(zmq.DEALER)
    for name, value in kept.items():
        socket.setsockopt(getattr(zmq, name), value)
    socket.setsockopt(zmq.HEARTBEAT_IVL, HEARTBEAT_IVL_MS)
    socket.setsockopt(zmq.HEARTBEAT_TIMEOUT, HEARTBEAT_TIMEOUT_MS)
    socket.setsockopt(zmq.HEARTBEAT_TTL, HEARTBEAT_TIMEOUT_MS)
    socket.setsockopt(zmq.MAXMSGSIZE, MAX_ANSWER_BYTES)
    events = zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_DISCONNECTED | zmq.EVENT_CONNECT_RETRIED
    monitor = socket.get_monitor_socket(events)
    socket.connect(address)
    client.socket = BoundedSocket(socket, address)
    return monitor


def workers_of(pid: int) -> set[int]:
    """The worker processes multiprocessing spawned from ``pid`` (verifiers' pool's), running; none where /proc
    does not say (not Linux)."""
    found = set()
    for children in Path(f"/proc/{pid}/task").glob("*/children"):
        with contextlib.suppress(OSError, ValueError):
            for child in map(int, children.read_text().split()):
                with contextlib.suppress(OSError):
                    arguments = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
                    if b"--multiprocessing-fork" in arguments and is_running(child):
                        found.add(child)
    return found


def is_running(pid: int) -> bool:
    """Whether ``pid`` is a process that has not ended (a zombie its parent has not reaped has)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")


def _future() -> asyncio.Future[None]:
    return asyncio.get_running_loop().create_future()


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
