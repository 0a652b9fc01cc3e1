"""The Atropos trajectory API (``run-api``) that rl mode sends groups to.

``--start-api`` runs atroposlib's own server as a child process on a loopback port and
stops it when the run ends; ``poll`` and ``watch`` read its status from outside, for
``vftui watch``, with what each live run of ours that sends to it sees (its share, its
queued groups, the workers atroposlib allows it, its off-policy lag).
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable
from urllib.parse import urlparse

import httpx

from vftui import run_index
from vftui.collector.run_socket import ask_status, socket_path
from vftui.errors import UserError
from vftui.events import ApiStatus, EnvShare


def is_up(api_url: str, timeout: float = 2.0) -> bool:
    try:
        return httpx.get(f"{api_url}/status", timeout=timeout).status_code == 200
    except httpx.HTTPError:
        return False


class ApiProcess:
    """atroposlib's ``run-api`` on ``api_url``'s port, started unless one answers there."""

    def __init__(self, api_url: str) -> None:
        self.api_url = api_url.rstrip("/")
        self._process: subprocess.Popen | None = None

    def start(self, wait_s: float = 60.0) -> ApiProcess:
        if is_up(self.api_url):
            return self
        parsed = urlparse(self.api_url)
        if parsed.hostname not in ("127.0.0.1", "localhost") or parsed.port is None:
            raise UserError(f"--start-api needs a loopback --api-url with a port, like http://127.0.0.1:8000 "
                            f"(got {self.api_url})")
        self._process = subprocess.Popen(
            [sys.executable, "-c", "from atroposlib.cli.run_api import main; main()",
             "--host", "127.0.0.1", "--port", str(parsed.port)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )
        deadline = time.monotonic() + wait_s
        while not is_up(self.api_url, timeout=0.5):
            if self._process.poll() is not None:
                detail = (self._process.stderr.read() or "").strip().splitlines()[-1:] if self._process.stderr else []
                raise UserError(f"the trajectory API could not start on port {parsed.port}: {' '.join(detail)}")
            if time.monotonic() > deadline:
                self.stop()
                raise UserError(f"the trajectory API did not answer on {self.api_url} within {wait_s:g} s")
            time.sleep(0.2)
        return self

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
        self._process = None


def poll(client: httpx.Client, api_url: str) -> ApiStatus:
    """What a trainer and the envs see of the API right now, from its read-only endpoints; never raises."""
    api_url = api_url.rstrip("/")
    try:
        status = client.get(f"{api_url}/status").json()
        info = client.get(f"{api_url}/info").json()
    except (httpx.HTTPError, ValueError) as e:
        return ApiStatus(api_url, reachable=False, error=f"{type(e).__name__}: {e}".strip(": "))
    return ApiStatus(
        api_url,
        reachable=True,
        trainer_registered=info.get("batch_size", -1) != -1,
        batch_size=int(info.get("batch_size", -1)),
        current_step=int(status.get("current_step", 0)),
        queue_size=int(status.get("queue_size", 0)),
        envs=our_runs_sending_to(api_url),
    )


def our_runs_sending_to(api_url: str) -> tuple[EnvShare, ...]:
    """Each live run of this user's that sends to ``api_url``, as it sees the API: the API itself
    has no read-only list of its envs (``/status-env`` fails loudly on an id it does not know)."""
    shares = []
    for out in run_index.known_runs():
        path = socket_path(out)
        info = ask_status(path, timeout=1.0) if path.exists() else None
        api = info.api if info is not None else None
        if api is not None and api.api_url.rstrip("/") == api_url:
            shares.append(EnvShare(str(out), api.env_id, api.env_weight or 0.0, api.self_queue_size, api.workers,
                                   api.workers_allowed, api.lag))
    return tuple(shares)


def watch(api_url: str, emit: Callable[[ApiStatus], None], stop: threading.Event, every_s: float = 2.0) -> None:
    """Poll until ``stop`` is set, emitting each snapshot (``vftui watch``)."""
    with httpx.Client(timeout=max(1.0, every_s)) as client:
        while not stop.is_set():
            emit(poll(client, api_url))
            stop.wait(every_s)
