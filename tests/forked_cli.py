"""A process that imports vftui and its libraries once, then forks a fresh ``python -m vftui`` per call.

Most CLI tests run a command and read what it printed and wrote; starting Python and importing verifiers,
atroposlib and transformers again for each of them was most of the suite's CPU. Here that import is paid
once per test worker: the server (this file run as a script) imports, then for each request forks a
waiter, which forks the command and reports how it ended. The command's process is a real one (its own
pid, signals, files, exit code, atexit and thread shutdown as the interpreter does them); only the import
is shared. Tests about the process itself (signals, crashes, a terminal) still start ``python -m vftui``.

Protocol, one request per connection on a Unix socket: the client passes the descriptors of the
command's stdout and stderr, then one JSON line (argv, cwd, env); the waiter answers ``{"pid": N}``
once the command runs and ``{"returncode": N}`` when it ends (negative: the signal that ended it, as
subprocess says it).
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from pathlib import Path
from typing import IO, Any

# what a collector on the built-in environments imports (vftui's own quiet settings before the libraries they
# quiet): the dashboard's child, which tests/conftest.py forks from a server that imported it once
COLLECTOR_PRELOAD = (
    "vftui.collector.quiet",
    "vftui.collector.child",
    "vftui.collector.run",
    "vftui.collector.eval.collection",  # each mode's own, imported when a run takes that mode
    "vftui.collector.rl.collection",
    "vftui.collector.rl.slurm",
    "verifiers",
    "atroposlib.envs.base",
    "transformers",
    "vftui.sim.envs.alphabet_sort",
    "vftui.sim.envs.alphabet_tools",
)
# the classic built-ins, only where verifiers has them
PRELOAD_WHERE_INSTALLED = (
    "vftui.sim.envs.alphabet_sort_classic",
    "vftui.sim.envs.alphabet_tools_classic",
)
# what `vftui run` imports besides: its command line and the headless run (importing quiet first sets nothing)
PRELOAD = ("vftui.cli", "vftui.commands.headless", *COLLECTOR_PRELOAD)
# the environment a forked command may differ in from the server's: read by vftui and the libraries when
# called, not when imported (anything else gets a subprocess of its own); proxies and netrc as a client is made
FORKABLE_ENV = ("VFTUI_", "WANDB_", "OPENAI_", "XDG_", "NETRC")
PROXIES = {f"{scheme}_proxy" for scheme in ("http", "https", "all", "no")}


def forkable(env: dict[str, str], base: dict[str, str]) -> bool:
    """Whether a command with ``env`` can be forked from a server started with ``base``: it may add
    folders to PYTHONPATH (a test's own environments), put first as Python would, not drop any."""
    changed = {k for k in env.keys() ^ base.keys()} | {
        k for k in env if k in base and env[k] != base[k]
    }
    base_paths, paths = _paths(base.get("PYTHONPATH")), _paths(env.get("PYTHONPATH"))
    paths_kept = set(base_paths) <= set(paths)
    # Python imports these at start-up, which a fork does not repeat
    customized = any(
        Path(folder, f"{name}.py").exists()
        for folder in set(paths) - set(base_paths)
        for name in ("sitecustomize", "usercustomize")
    )
    return (
        paths_kept
        and not customized
        and all(
            k.startswith(FORKABLE_ENV) or k.lower() in PROXIES or k == "PYTHONPATH" for k in changed
        )
    )


def _paths(pythonpath: str | None) -> list[str]:
    return [p for p in (pythonpath or "").split(os.pathsep) if p]


class ForkedProcess:
    """What tests use of ``subprocess.Popen`` (text pipes for stdout and stderr), for a forked command."""

    def __init__(
        self, args: list[str], connection: socket.socket, stdout: IO[str], stderr: IO[str]
    ):
        self.args, self.stdout, self.stderr = args, stdout, stderr
        self.returncode: int | None = None
        self._connection, self._answers = connection, connection.makefile("r")
        self.pid: int = json.loads(self._answers.readline())["pid"]
        self._read: dict[str, list[str]] = {}
        self._readers: list[threading.Thread] = []

    def poll(self) -> int | None:
        if self.returncode is None and select.select([self._connection], [], [], 0)[0]:
            self.wait()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            if not select.select([self._connection], [], [], timeout)[0]:
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
            self.returncode = json.loads(self._answers.readline())["returncode"]
            self._connection.close()
        return self.returncode

    def send_signal(self, sig: int) -> None:
        """As Popen's: nothing once it ended. The fork server reaps it, so it may be gone between the poll
        and the kill, before its exit code reaches us."""
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        """Both streams read to their end and the exit awaited; a timeout leaves the reading to go on."""
        if not self._readers:
            for name in ("stdout", "stderr"):
                stream, into = getattr(self, name), self._read.setdefault(name, [])
                reader = threading.Thread(target=lambda s=stream, i=into: i.append(s.read()))
                reader.start()
                self._readers.append(reader)
        deadline = None if timeout is None else time.monotonic() + timeout
        for reader in self._readers:
            reader.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
            if reader.is_alive():
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
        self.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
        return "".join(self._read["stdout"]), "".join(self._read["stderr"])


class ForkServer:
    """The client side: one server per test worker, started on first use, gone with the worker."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.socket_path = Path(f"/tmp/vftui-forks-{os.getpid()}-{time.monotonic_ns()}.sock")
        with tempfile.TemporaryFile() as said:  # what its imports print: read if it does not start
            self.process = subprocess.Popen(
                [sys.executable, __file__, str(self.socket_path)],
                env=env,
                stdin=subprocess.PIPE,  # its end: the server exits when this worker does
                stdout=said,
                stderr=said,
            )
            deadline = time.monotonic() + 120
            while not self.socket_path.exists():
                if self.process.poll() is not None or time.monotonic() > deadline:
                    said.seek(0)
                    tail = said.read().decode(errors="replace")[-3000:]
                    raise RuntimeError(f"the CLI fork server did not start:\n{tail}")
                time.sleep(0.05)

    def start(self, argv: list[str], cwd: Path, env: dict[str, str]) -> ForkedProcess:
        """``python -m vftui *argv`` in ``cwd`` with ``env``, its stdout and stderr piped to us."""
        (out_read, out_write), (err_read, err_write) = os.pipe(), os.pipe()
        connection = socket.socket(socket.AF_UNIX)
        try:
            connection.connect(str(self.socket_path))
            socket.send_fds(connection, [b"."], [out_write, err_write])
            request = {"argv": argv, "cwd": str(cwd), "env": env}
            connection.sendall(json.dumps(request).encode() + b"\n")
        finally:
            os.close(out_write)
            os.close(err_write)
        return ForkedProcess(argv, connection, os.fdopen(out_read), os.fdopen(err_read))

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(timeout=30)
        self.socket_path.unlink(missing_ok=True)


def _serve(socket_path: str) -> dict[str, Any]:
    """Answer requests until this server's client is gone; returns only in a command's own process."""
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(socket_path)
    listener.listen(16)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the waiters reap themselves
    watch = os.fdopen(0, "rb", buffering=0, closefd=False)
    while True:
        ready, _, _ = select.select([listener, watch], [], [])
        if watch in ready and not watch.read(1):
            os.unlink(socket_path)
            os._exit(0)
        if listener in ready:
            connection, _ = listener.accept()
            if os.fork() == 0:
                listener.close()
                return _wait_for_command(connection)
            connection.close()


def _wait_for_command(connection: socket.socket) -> dict[str, Any]:
    """In the waiter: fork the command, tell its pid, then how it ended; returns only in the command."""
    _, fds, _, _ = socket.recv_fds(connection, 1, 2)
    request = {**json.loads(connection.makefile("r").readline()), "fds": fds}
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    pid = os.fork()
    if pid == 0:
        connection.close()
        return request
    for fd in fds:
        os.close(fd)
    connection.sendall(json.dumps({"pid": pid}).encode() + b"\n")
    _, status = os.waitpid(pid, 0)
    connection.sendall(
        json.dumps({"returncode": os.waitstatus_to_exitcode(status)}).encode() + b"\n"
    )
    os._exit(0)


def _become(request: dict[str, Any], set_on_import: dict[str, str]) -> None:
    """This process as ``python -m vftui`` started with the request's directory, environment and files.

    sys.stdout and sys.stderr are the server's own, made as Python makes them at start-up (not a
    terminal, PYTHONUNBUFFERED honoured): only the files under their descriptors change."""
    os.chdir(request["cwd"])
    server_paths = _paths(os.environ.get("PYTHONPATH"))
    os.environ.clear()
    os.environ.update(request["env"])
    for name, value in set_on_import.items():  # what vftui's imports set, as they would have
        os.environ.setdefault(name, value)
    # what the imports made to undo at exit (wandb's media folder, a temporary directory with an
    # atexit cleanup too) is the server's, shared by every command: one's exit must not delete it
    for finalizer in list(weakref.finalize._registry):  # type: ignore[attr-defined]
        made = finalizer.peek()
        if made is not None and isinstance(made[0], tempfile.TemporaryDirectory):
            atexit.unregister(made[0].cleanup)
        finalizer.detach()
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    for fd, passed in zip((1, 2), request["fds"], strict=True):
        os.dup2(passed, fd)
        os.close(passed)
    sys.path[0] = os.getcwd()  # what -m puts first, then PYTHONPATH's folders
    added = [p for p in _paths(request["env"].get("PYTHONPATH")) if p not in server_paths]
    sys.path[1:1] = [os.path.abspath(p) for p in added]
    sys.argv = ["vftui", *request["argv"]]
    # as from a terminal, whatever the suite was started under (nohup, a background job's ignored SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def _run_as_main() -> int:
    """Run ``vftui/__main__.py`` and end as the interpreter would, without tearing down the modules.

    Python's own exit frees every module object one by one, over a second for verifiers, atroposlib and
    transformers, where a command that imported only what it needed exits at once; what an exit does that
    a program can see (its non-daemon threads joined, atexit handlers, streams flushed) is done here."""
    try:
        runpy.run_module("vftui", run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exit:
        code = _exit_code(exit.code)
    except KeyboardInterrupt:  # as the interpreter ends on one: the traceback, then dead of SIGINT
        traceback.print_exc()
        _finish()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
        code = 1
    except Exception:  # noqa: BLE001 - printed and exit 1, as the interpreter does
        traceback.print_exc()
        code = 1
    _finish()
    os._exit(code)


def _finish() -> None:
    """What the interpreter's exit does that a program can see."""
    threading._shutdown()  # type: ignore[attr-defined]  # non-daemon threads joined first
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()


def _exit_code(code: object) -> int:
    """SystemExit's code as the interpreter reads it: None 0, an int itself, anything else printed, 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


if __name__ == "__main__":
    import importlib
    import runpy
    import traceback

    started_with = dict(os.environ)
    gc.disable()  # the libraries' millions of objects, scanned for nothing each time they grow
    for name in PRELOAD:
        importlib.import_module(name)
    for name in PRELOAD_WHERE_INSTALLED:
        with contextlib.suppress(ImportError, AttributeError):  # verifiers 0.4: no classic names
            importlib.import_module(name)
    assert threading.active_count() == 1, "a forking server must have no other thread"
    gc.freeze()  # out of every command's collections, and their pages never copied for a count's sake
    gc.enable()
    set_on_import = {k: v for k, v in os.environ.items() if k not in started_with}
    request = _serve(sys.argv[1])
    _become(request, set_on_import)
    _run_as_main()
