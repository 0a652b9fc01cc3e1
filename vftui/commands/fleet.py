"""Runs on other machines, through OpenSSH rather than a server of vftui's own.

``vftui runs --host h1,h2`` asks each host ``vftui runs --json`` over ``ssh`` (all at once, each
within a time limit, its answer within bounds) and merges the answers with the host as a column; a
host that fails, or answers lines that are not runs, is one line and never hides the others.
``vftui attach h1:RUN`` opens that run's dashboard through ``ssh -t``, and ``vftui view h1:PATH`` shows a
file or folder there (a v1 eval, a prime-rl run) as the vftui there reads it; ``vftui compare`` runs there
when every source is on one host, else brings each remote source here as the vftui there reads it
(``source_lines``, read within bounds like a list of runs). ssh's own configuration
(``~/.ssh/config``: names, ports, keys, jump hosts) applies; ``VFTUI_SSH`` replaces the ``ssh``
command itself (e.g. ``ssh -F cluster.conf``), as ``GIT_SSH_COMMAND`` does for git.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import selectors
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from vftui import bounds
from vftui.errors import UserError
from vftui.run_files.bounded_lines import BoundedLines
from vftui.run_files.listing import RunLine
from vftui.run_files.results import Source
from vftui.run_files.source_lines import SourceAnswer
from vftui.text.json_lines import shown
from vftui.text.printable import printable

SSH_COMMAND = "VFTUI_SSH"
REMOTE_VFTUI = (
    "vftui"  # the command that runs vftui on a host, unless --remote-vftui says otherwise
)
ASK_TIMEOUT_S = 30.0
HOSTS_AT_ONCE = (
    128  # ssh processes at a time: some 5 open files each, well within a process's 1,024
)
# A host's answer past either is no vftui's (some 600 bytes a run): reading it stops, so memory stays bounded.
MAX_ANSWER_BYTES, MAX_ANSWER_LINES = 64 * 1024**2, bounds.LARGE
# A line of it past either is no run (a path is at most 4 KB, a run some 60 values): left out unparsed, so what
# one line parses to stays small whatever the host sends (a 60 MB line of ``{}`` held 1.75 GB).
MAX_RUN_LINE_BYTES, MAX_RUN_LINE_VALUES = 64 * 1024, 1_000
RUNS_SAID = "far more than vftui runs --json says of any machine's runs"
# A compare source brought from a host (``source_lines``): a line an item, its rollouts' messages in it; a
# source read there takes its time, as one read here would.
SOURCE_TIMEOUT_S, MAX_SOURCE_BYTES, MAX_SOURCE_LINES = 300.0, 512 * 1024**2, 10**6
SOURCE_SAID = "more than compare brings of one source"
NOT_FOUND, NOT_RUNNABLE = (
    127,
    126,
)  # a shell's exit code for a command it cannot find, or cannot run
STDERR_KEPT = 4096  # the end of a host's stderr, whose last line says why it failed
NOTE = "vftui: note: "  # how vftui runs begins a line of what it noted
HOST = re.compile(r"^(?:[A-Za-z0-9_.+-]+@)?[A-Za-z0-9_.-]+$")  # ssh's destination, never an option


@dataclass
class HostRuns:
    """One host's answer: its runs (each with ``host``), and why there are none, or not all of them."""

    host: str
    runs: list[RunLine] = field(default_factory=list)
    problem: str = ""
    # what its vftui noted (a walk's bounds), as it said
    notes: list[str] = field(default_factory=list)


class Answer(BoundedLines):
    """A host's ``vftui runs --json``, read as the pipe hands it over: a line that is not a run (not JSON, nested
    past ``bounds.MAX_NESTING``, a figure out of range, past ``MAX_RUN_LINE_BYTES`` or ``MAX_RUN_LINE_VALUES``)
    is left out and counted, never a traceback."""

    def __init__(self, host: str) -> None:
        super().__init__(MAX_RUN_LINE_BYTES, MAX_RUN_LINE_VALUES)
        self.host, self.runs = host, list[RunLine]()

    def end(self) -> HostRuns:
        self.close()
        if not self.left_out:
            return HostRuns(self.host, self.runs)
        return HostRuns(self.host, self.runs, self.left_out_said("it"))

    def _line(self, line: bytes) -> None:
        try:
            value = bounds.load_json(line)
        except (json.JSONDecodeError, UnicodeDecodeError):
            return self._leave_out(f"not JSON: {shown(line)}")
        except ValueError as e:
            return self._leave_out(str(e))
        if not isinstance(value, dict):
            return self._leave_out(f"not a run (a JSON object): {shown(line)}")
        try:
            self.runs.append(RunLine.from_dict({**value, "host": self.host}))
        except ValueError as e:
            self._leave_out(str(e))


def hosts(text: str) -> list[str]:
    """``h1,h2`` as a list, each once; a name ssh could read as an option is refused."""
    names = list(dict.fromkeys(h.strip() for h in text.split(",") if h.strip()))
    bad = next((h for h in names if not HOST.match(h) or h.startswith("-")), None)
    if not names or bad is not None:
        raise UserError(
            f"--host {printable(text)}: name hosts as ssh does, comma-separated (user@host or a name "
            "from ~/.ssh/config)"
        )
    return names


def remote_run(text: str) -> tuple[str, str] | None:
    """``HOST:RUN`` as (host, run), or None for a local one: a path that exists, one written as a path
    (``./``, ``../``, ``/``, ``~``), or no host part."""
    host, sep, run = text.partition(":")
    local = Path(text).exists() or text.startswith((".", "/", "~"))
    if not sep or not run or local or not HOST.match(host) or host.startswith("-"):
        return None
    return host, run


def ssh() -> list[str]:
    """The ssh command: ``VFTUI_SSH``'s words, or ``ssh`` when it has none (unset, blank)."""
    text = os.environ.get(SSH_COMMAND, "")
    words = _words(text, SSH_COMMAND) or ["ssh"]
    if not words[0]:
        raise UserError(f"{SSH_COMMAND} names no program to run: {printable(text)}")
    return words


def remote_command(remote: str, *args: str) -> str:
    """``--remote-vftui`` and ``args`` as the host's shell is to read them: each word quoted, but a leading
    ``~/`` left for that shell to expand to the home there (as the help's ``~/venv/bin/vftui`` and a path
    ``view h1:~/outputs`` name)."""
    words = _words(remote, "--remote-vftui")
    if not words:
        raise UserError(
            "--remote-vftui is empty: give the command that runs vftui on the hosts (default vftui)"
        )
    return " ".join(map(_there, [*words, *args]))


def _there(word: str) -> str:
    return "~/" + shlex.quote(word[2:]) if word.startswith("~/") else shlex.quote(word)


def list_runs(names: list[str], remote: str, folder: str | None = None) -> list[HostRuns]:
    """The hosts asked at once (``HOSTS_AT_ONCE`` at most), for their runs or those under ``folder`` there (one
    word, after ``--``: a folder that starts with ``-`` stays one); in the order given."""
    command = [*ssh(), "-o", "BatchMode=yes", "-o", "ConnectTimeout=10"]
    asked = remote_command(
        remote, "runs", "--json", *(["--", folder] if folder is not None else [])
    )
    with ThreadPoolExecutor(max_workers=min(len(names), HOSTS_AT_ONCE)) as pool, asking_hosts():
        return list(pool.map(lambda host: _ask(host, [*command, host, asked], remote), names))


def screen_command(
    host: str, remote: str, command: str, targets: list[str], flags: list[str]
) -> list[str]:
    """``ssh -t`` to ``host``, there ``vftui COMMAND FLAGS -- TARGETS`` (attach, view, compare): its screen
    draws in this terminal. ``--`` keeps a target that starts with ``-`` a target there, never an option."""
    return [*ssh(), "-t", host, remote_command(remote, command, *flags, "--", *targets)]


def _words(text: str, what: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError as e:
        raise UserError(
            f"{what} is not a command a shell can read ({e}): {printable(text)}"
        ) from None


@dataclass(frozen=True)
class Bounds:
    """How long a host may take to answer, and how much it may say (``said``: what more than that is)."""

    seconds: float = ASK_TIMEOUT_S
    size: int = MAX_ANSWER_BYTES
    lines: int = MAX_ANSWER_LINES
    said: str = RUNS_SAID


def _ask(host: str, command: list[str], remote: str = REMOTE_VFTUI) -> HostRuns:
    """``command`` (ssh to ``host``, there ``remote``) run within ``ASK_TIMEOUT_S``, its answer read up to
    ``MAX_ANSWER_BYTES``."""
    answer = Answer(host)
    problem, notes = _answered(command, answer, Bounds(), remote)
    if problem:
        return HostRuns(host, problem=problem)
    runs = answer.end()
    runs.notes = notes
    return runs


def fetch_source(host: str, remote: str, path: str) -> Source:
    """The compare source at ``path`` on ``host``, as the vftui there reads it (``source_lines``), its path
    ``HOST:PATH``; a ``UserError`` naming the host when it cannot be had."""
    command = [*ssh(), "-o", "BatchMode=yes", "-o", "ConnectTimeout=10", host]
    command.append(remote_command(remote, "compare", "--export-source", "--", path))
    answer = SourceAnswer(host, path)
    bounded = Bounds(SOURCE_TIMEOUT_S, MAX_SOURCE_BYTES, MAX_SOURCE_LINES, SOURCE_SAID)
    if problem := _answered(command, answer, bounded, remote)[0]:
        raise UserError(f"{host}: {problem}")
    return answer.end()


_asking: set[subprocess.Popen[bytes]] = set()  # the ssh processes asking hosts now
_asking_lock = threading.Lock()
_stopped = False  # hosts asked no more (Ctrl-C, SIGTERM): an ssh started after it ends at once


@contextlib.contextmanager
def asking_hosts() -> Iterator[None]:
    """While hosts are asked: Ctrl-C or SIGTERM ends every ssh at once. A Ctrl-C waited for each host to
    answer or time out (up to 300 s), and a SIGTERM left the ssh processes running."""
    global _stopped
    in_main = threading.current_thread() is threading.main_thread()
    previous = signal.getsignal(signal.SIGTERM) if in_main else None
    with _asking_lock:  # the threads of an earlier ask have ended: their pool waited for them
        _stopped = False

    def interrupted(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    if in_main:
        signal.signal(signal.SIGTERM, interrupted)
    try:
        yield
    except BaseException:
        with _asking_lock:  # a thread between its ssh's start and registering it ends it itself
            _stopped = True
            for process in _asking:
                process.kill()
        raise
    finally:
        if in_main:
            signal.signal(signal.SIGTERM, previous)


def _answered(
    command: list[str], answer: BoundedLines, bounded: Bounds, remote: str = REMOTE_VFTUI
) -> tuple[str, list[str]]:
    """``command`` (ssh to a host, there ``remote``) run, its answer fed to ``answer`` within ``bounded``; what
    went wrong (``remote`` not there, the last line the host or ssh said, a limit passed), or ``""``, and the
    notes its vftui said on the way."""
    try:
        process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
    except OSError as e:
        return f"cannot run {command[0]}: {e.strerror}", []
    with _asking_lock:
        _asking.add(process)
        if _stopped:
            process.kill()
    try:
        with process:
            stderr, problem = _read(process, answer, bounded)
            process.kill()  # done with it: a host past the time or size limit is not waited for
    finally:
        with _asking_lock:
            _asking.discard(process)
    said = [line for line in stderr.decode(errors="replace").splitlines() if line.strip()]
    if problem:
        return problem, []
    if process.returncode in (NOT_FOUND, NOT_RUNNABLE):  # the host's shell, not ssh (255) nor vftui
        return _not_run(process.returncode, remote), []
    if process.returncode != 0:
        return said[-1] if said else f"ssh ended with exit code {process.returncode}", []
    return "", [line.removeprefix(NOTE) for line in said if line.startswith(NOTE)]


def _not_run(code: int, remote: str) -> str:
    """Why the host's shell could not run ``remote`` (its exit code ``code``), and the flag that names it."""
    name = "name it with --remote-vftui /path/to/vftui"
    if code == NOT_RUNNABLE:
        return f"{remote} cannot be run there (exit {code}: not executable); {name}"
    if remote == REMOTE_VFTUI:
        return f"vftui is not on the PATH there (exit {code}); {name}"
    return f"{remote} is not there (exit {code}: command not found); {name}"


def _read(
    process: subprocess.Popen[bytes], answer: BoundedLines, bounded: Bounds
) -> tuple[bytes, str]:
    """The process's stdout fed to ``answer`` and the end of its stderr, as they come; a problem when it does
    not end in time, or says more than ``bounded`` (or ``answer``'s budget of values) lets it."""
    deadline, size, stderr = time.monotonic() + bounded.seconds, 0, b""
    with selectors.DefaultSelector() as waiting:
        waiting.register(process.stdout, selectors.EVENT_READ)  # type: ignore[arg-type]
        waiting.register(process.stderr, selectors.EVENT_READ)  # type: ignore[arg-type]
        while waiting.get_map():
            ready = waiting.select(left) if (left := deadline - time.monotonic()) > 0 else []
            if not ready:
                return stderr, f"no answer within {bounded.seconds:g} s"
            for key, _ in ready:
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    waiting.unregister(key.fileobj)
                elif key.fileobj is process.stderr:
                    stderr = (stderr + chunk)[-STDERR_KEPT:]
                elif (
                    (size := size + len(chunk)) > bounded.size
                    or answer.feed(chunk) > bounded.lines
                    or answer.spent
                ):
                    return (
                        stderr,
                        f"answered more than {_limits(bounded, answer)}, {bounded.said}: stopped reading it",
                    )
    try:
        process.wait(max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        return stderr, f"no answer within {bounded.seconds:g} s"
    return stderr, ""


def _limits(bounded: Bounds, answer: BoundedLines) -> str:
    """What an answer may be: ``64 MB or 100,000 lines``, and its values where it has a budget of them."""
    size, lines = f"{bounded.size // 1024**2} MB", f"{bounded.lines:,} lines"
    if answer.budget is None:
        return f"{size} or {lines}"
    return f"{size}, {lines} or {answer.budget:,} values"
