"""``vftui serve [TARGET ...]``: a dashboard in a browser tab, through textual-serve (``vftui.web``).

Each tab runs its own vftui command, chosen as it connects: no target, the runs screen; a running
run, ``attach`` (its keys steer the run; closing the tab leaves it running); a run that ended, a
file or a folder, ``view``; a prime-rl run with metrics, logs or token exports, ``watch``; several,
``compare``. A run the runs screen opens gets a tab of its own.
"""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import os
import shlex
import socket
from pathlib import Path

from vftui.errors import UserError
from vftui.live.process import vftui_command
from vftui.loopback import is_loopback_host
from vftui.run_files.files import RunFiles
from vftui.run_files.index import resolve_id
from vftui.run_files.listing import describe
from vftui.training.layout import is_training
from vftui.ui import themes
from vftui.web.server import VftuiServer

KEY_VARIABLES = ("_API_KEY", "_TOKEN")  # the endpoints' secrets (OPENAI_API_KEY, HF_TOKEN, ...)


def run_serve(
    targets: list[Path], host: str, port: int, allow_remote: bool, theme: str | None
) -> int:
    host = host.strip("[]")
    if not host:
        raise UserError("--host is empty: give an address of this machine (default 127.0.0.1)")
    host = _literal(host)
    if not (is_loopback_host(host) or allow_remote):
        raise UserError(
            f"--host {host} serves the dashboard beyond this machine: say so with --allow-remote "
            "(the token it prints guards it)"
        )
    for target in targets:
        _servable(target)
    if theme:
        themes.resolve(theme)  # an unknown one: its sentence here, not a blank page in every tab
    _free(host, port)
    targets = [t.resolve() for t in targets]
    themed = ["--theme", theme] if theme else []
    for name in [k for k in os.environ if k.endswith(KEY_VARIABLES)]:
        del os.environ[name]  # a tab's session shows and steers runs: it never calls an endpoint

    def command() -> str:
        return _session(*_what_to_run(targets), *themed)

    def opener(how: str, run_id: str) -> str | None:
        path = resolve_id(run_id)
        if path is None:
            return None
        running = how == "attach" and _running(path)
        return _session("attach" if running else "view", str(path), *themed)

    VftuiServer(command, opener, _described(targets), host, port).serve()
    return 0


def _session(*args: str) -> str:
    """The shell command of a tab's session: ``exec``, so the session is serve's own child and ends with it
    (``ui.terminal.end_with_parent``), not a shell's left behind."""
    return "exec " + shlex.join(vftui_command(*args))


def _servable(target: Path) -> None:
    """A file, a folder or a run id (one that names a FIFO or a device would leave every tab blank)."""
    if not target.exists():
        raise UserError(f"vftui serve {target}: no such file, folder or run id")
    if not (target.is_file() or target.is_dir()):
        raise UserError(f"vftui serve {target}: not a regular file or a folder")


def _what_to_run(targets: list[Path]) -> list[str]:
    if not targets:
        return ["runs"]
    if len(targets) > 1:
        return ["compare", *map(str, targets)]
    if is_training(targets[0]):
        return ["watch", str(targets[0])]
    return ["attach" if _running(targets[0]) else "view", str(targets[0])]


def _described(targets: list[Path]) -> str:
    if not targets:
        return "the runs screen"
    return " and ".join(map(str, targets))


def _running(target: Path) -> bool:
    try:
        line = describe(RunFiles.find(target, "vftui serve").jsonl)
    except UserError:  # a file or folder, not a run: viewed
        return False
    return line.answering


def _literal(host: str) -> str:
    """One address, bound and printed: a name such as localhost resolves to several, and a browser given
    the name tries [::1] first, where any local user may listen and show a sign-in page of their own."""
    with contextlib.suppress(ValueError):
        return str(ipaddress.ip_address(host))
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
        found = [info[4][0] for info in infos if isinstance(info[4][0], str)]  # IPv4 and IPv6's
    except (socket.gaierror, UnicodeError) as e:
        raise UserError(
            f"cannot serve on {host}: the name does not resolve (is --host this machine's?)"
        ) from e
    return next((address for address in found if ":" not in address), found[0])


def _free(host: str, port: int) -> None:
    """A taken port is one sentence here, not aiohttp's traceback once it binds."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as e:
            hint = "--port another" if e.errno == errno.EADDRINUSE else "is --host this machine's?"
            raise UserError(f"cannot serve on {host}:{port}: {e.strerror or e} ({hint})") from e
