"""The Atropos trajectory API (``run-api``) that rl mode sends groups to, when the run starts it.

``--start-api`` runs atroposlib's own server as a child process on a loopback port and
stops it when the run ends (``vftui watch`` reads a running one from outside).
"""

from __future__ import annotations

import errno
import socket
import subprocess
import sys
import time
from urllib.parse import urlparse

import httpx

from vftui.errors import UserError
from vftui.loopback import unproxied


def is_up(api_url: str, timeout: float = 2.0) -> bool:
    try:
        with httpx.Client(**unproxied(api_url), timeout=timeout) as client:
            return client.get(f"{api_url}/status").status_code == 200
    except httpx.HTTPError:
        return False


def _in_use(port: int) -> bool:
    """Whether something listens on ``port`` of 127.0.0.1, where run-api is to bind (as uvicorn binds: a closed
    connection's TIME_WAIT is no use)."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as e:
            return e.errno == errno.EADDRINUSE
    return False


def _busy(port: int) -> str:
    return (
        f"port {port} is in use (another trajectory API?): free it, or give --api-url another port"
    )


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
            raise UserError(
                f"--start-api needs a loopback --api-url with a port, like http://127.0.0.1:8000 "
                f"(got {self.api_url})"
            )
        if _in_use(parsed.port):
            raise UserError(_busy(parsed.port))
        self._process = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "from atroposlib.cli.run_api import main; main()",
                "--host",
                "127.0.0.1",
                "--port",
                str(parsed.port),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + wait_s
        while not is_up(self.api_url, timeout=0.5):
            if self._process.poll() is not None:
                said = (self._process.stderr.read() or "") if self._process.stderr else ""
                if "address already in use" in said.lower():  # taken since it was looked at
                    raise UserError(_busy(parsed.port))
                detail = said.strip().splitlines()[-1:]
                raise UserError(
                    f"the trajectory API could not start on port {parsed.port}: {' '.join(detail)}"
                )
            if time.monotonic() > deadline:
                self.stop()
                raise UserError(
                    f"the trajectory API did not answer on {self.api_url} within {wait_s:g} s"
                )
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
