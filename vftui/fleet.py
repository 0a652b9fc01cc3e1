"""Runs on other machines, through OpenSSH rather than a server of vftui's own.

``vftui runs --host h1,h2`` asks each host ``vftui runs --json`` over ``ssh`` (all at once, each
within a time limit) and merges the answers with the host as a column; a host that fails is one
line and never hides the others. ``vftui attach h1:RUN`` opens that run's dashboard through
``ssh -t``. ssh's own configuration (``~/.ssh/config``: names, ports, keys, jump hosts) applies;
``VFTUI_SSH`` replaces the ``ssh`` command itself (e.g. ``ssh -F cluster.conf``), as
``GIT_SSH_COMMAND`` does for git.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vftui.errors import UserError
from vftui.printable import printable

SSH_COMMAND = "VFTUI_SSH"
REMOTE_VFTUI = "vftui"  # the command that runs vftui on a host, unless --remote-vftui says otherwise
ASK_TIMEOUT_S = 30.0
HOST = re.compile(r"^(?:[A-Za-z0-9_.+-]+@)?[A-Za-z0-9_.-]+$")  # ssh's destination, never an option


@dataclass
class HostRuns:
    """One host's answer: its runs (each with ``host``), or why there are none."""

    host: str
    runs: list[dict[str, Any]] = field(default_factory=list)
    problem: str = ""


def hosts(text: str) -> list[str]:
    """``h1,h2`` as a list; a name ssh could read as an option is refused."""
    names = [h.strip() for h in text.split(",") if h.strip()]
    bad = next((h for h in names if not HOST.match(h) or h.startswith("-")), None)
    if not names or bad is not None:
        raise UserError(f"--host {printable(text)}: name hosts as ssh does, comma-separated (user@host or a name "
                        "from ~/.ssh/config)")
    return names


def remote_run(text: str) -> tuple[str, str] | None:
    """``HOST:RUN`` as (host, run), or None for a local run (a path that exists, or no host part)."""
    host, sep, run = text.partition(":")
    if not sep or not run or Path(text).exists() or not HOST.match(host) or host.startswith("-"):
        return None
    return host, run


def ssh() -> list[str]:
    return shlex.split(os.environ.get(SSH_COMMAND) or "ssh")


def list_runs(names: list[str], remote: str) -> list[HostRuns]:
    """Every host asked at once; in the order given."""
    with ThreadPoolExecutor(max_workers=len(names)) as pool:
        return list(pool.map(lambda host: _ask(host, remote), names))


def attach_command(host: str, run: str, remote: str, theme: str | None) -> list[str]:
    """``ssh -t`` to ``host``, there ``vftui attach RUN``: the dashboard draws in this terminal."""
    there = [*shlex.split(remote), "attach", run, *(["--theme", theme] if theme else [])]
    return [*ssh(), "-t", host, shlex.join(there)]


def _ask(host: str, remote: str) -> HostRuns:
    command = [*ssh(), "-o", "BatchMode=yes", "-o", "ConnectTimeout=10", host,
               shlex.join([*shlex.split(remote), "runs", "--json"])]
    try:
        done = subprocess.run(command, capture_output=True, text=True, errors="replace", timeout=ASK_TIMEOUT_S,
                              stdin=subprocess.DEVNULL, check=False)
    except subprocess.TimeoutExpired:
        return HostRuns(host, problem=f"no answer within {ASK_TIMEOUT_S:g} s")
    except OSError as e:
        return HostRuns(host, problem=f"cannot run {command[0]}: {e.strerror}")
    if done.returncode != 0:
        said = [line for line in done.stderr.splitlines() if line.strip()]
        return HostRuns(host, problem=said[-1] if said else f"ssh ended with exit code {done.returncode}")
    runs = []
    for line in done.stdout.splitlines():
        try:
            run = json.loads(line)
        except ValueError:
            return HostRuns(host, problem=f"answered something other than vftui runs --json: {line[:80]!r}")
        if isinstance(run, dict):
            runs.append({**run, "host": host})
    return HostRuns(host, runs)
