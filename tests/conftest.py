"""Shared helpers: run the real CLI, start the real simulated endpoint, read real files."""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import gc
import importlib.util
import json
import multiprocessing
import multiprocessing.context
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
from filelock import FileLock

from vftui.collector.child import child_main
from vftui.collector.rl.api_process import ApiProcess
from vftui.events import Event, RequestStats
from vftui.live.process import CollectorProcess
from vftui.sim.server import BackgroundServer, BackgroundSimServer
from vftui.sim.trainer import run_trainer

from .forked_cli import COLLECTOR_PRELOAD, ForkedProcess, ForkServer, forkable

# A suite started in the background (``pytest &`` from a script) has SIGINT ignored, and each vftui it starts
# would keep it so (as vftui keeps a nohup'd run's): the tests stand for runs started from a terminal. (A
# forked command gets SIGHUP's default too, in ``forked_cli``; the runner itself keeps a nohup's.)
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

REPO = Path(__file__).resolve().parent.parent
Server = TypeVar("Server", bound=BackgroundServer)


CLASSIC = (
    importlib.util.find_spec("verifiers.legacy") is not None
)  # verifiers 0.3 runs classic envs; 0.4 does not
IN_CI = bool(
    os.environ.get("CI")
)  # .ci/run sets it: there every tool the suite drives must be present
TOOLS = {  # what ``@pytest.mark.needs(tool)`` looks for, and how to get it
    "tmux": ("tmux", "apt-get install tmux"),
    "sshd": ("sshd", "apt-get install openssh-server openssh-client"),
    "uv": ("uv", "pip install -e '.[test]'"),
    "chromium": ("chromium", "apt-get install chromium"),
}
MODULES = {  # what ``@pytest.mark.needs(name)`` imports, for a tool that is a Python package, and how to get it
    "playwright": ("playwright.sync_api", "pip install -e '.[test]'"),
}


def unavailable(what: str) -> None:
    """A test that cannot run here: skipped outside CI, saying what is missing and how to get it; a failure in
    CI, so a missing tool or a taken port can never leave a green run that tested less than it says."""
    (pytest.fail if IN_CI else pytest.skip)(what)


def tool_path(name: str) -> str | None:
    """``name`` on PATH, in this environment's bin (uv) or in /usr/sbin (sshd is not on a user's PATH)."""
    places = os.pathsep.join(
        [os.path.dirname(sys.executable), os.environ.get("PATH", ""), "/usr/sbin"]
    )
    return shutil.which(name, path=places)


def importable(module: str) -> bool:
    """``module`` can be imported here (its package found, and importing that package does not fail)."""
    try:
        return importlib.util.find_spec(module) is not None
    except ImportError:  # its package is missing, or fails to import
        return False


def need(tool: str) -> None:
    """The test goes on only where ``tool`` (a key of TOOLS or MODULES) is here: ``unavailable`` otherwise."""
    if tool in MODULES:
        module, install = MODULES[tool]
        if not importable(module):
            unavailable(f"{tool} is not installed ({install}; .ci/run installs it)")
        return
    command, install = TOOLS[tool]
    if tool_path(command) is None:
        unavailable(f"{command} is not installed ({install}; .ci/run installs it)")


def pytest_runtest_setup(item: pytest.Item) -> None:
    for marker in item.iter_markers("needs"):
        for tool in marker.args:
            need(tool)


@pytest.fixture(autouse=True, scope="session")
def own_user_folders(tmp_path_factory) -> Iterator[Path]:
    """In-process runs (the Run, main(), apps) keep their run index, runs and config out of the user's own
    folders, as the CLI's subprocesses do (``cli_env``). The cache stays: uv keeps verifiers' harness
    environments there, which the comparisons with verifiers' own eval reuse."""
    root = tmp_path_factory.mktemp("user")
    with pytest.MonkeyPatch.context() as patch:
        for name in ("XDG_CONFIG_HOME", "XDG_DATA_HOME"):
            patch.setenv(name, str(root / name.lower()))
        # what collector_process's forkserver starts with
        _worker_environment.update(_environment())
        yield root


@pytest.fixture(autouse=True)
def environment_as_it_was() -> Iterator[None]:
    """What a test's in-process code sets in ``os.environ`` (the collector's quiet switches, a run's WANDB_DIR)
    ends with the test: the next one starts in the worker's own environment, and collector_process keeps
    forking from its forkserver rather than spawning (4 CPU-s a dashboard) in every later test of the worker."""
    before = _environment()
    yield
    after = _environment()  # without pytest's own PYTEST_CURRENT_TEST, which it sets phase by phase
    for name in after.keys() - before.keys():
        del os.environ[name]
    # one name at a time: a thread the test left running never sees the environment empty
    for name, value in before.items():
        if after.get(name) != value:
            os.environ[name] = value


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_finish(session: pytest.Session) -> None:
    """What collecting imported (vftui, Textual, verifiers, atroposlib) lives as long as the worker: frozen out
    of the cyclic collections each test's garbage starts, which scanned it all again and again."""
    gc.freeze()


# before xdist's own, which reads the groups as it collects: after it, none of these applied
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test not marked unit is e2e; serial tests share one xdist group, so they run one at a time; a long
    test starts first, on a worker of its own, so it does not end the suite alone; a classic test is skipped
    where verifiers runs no classic environments (0.4)."""
    items.sort(
        key=lambda item: item.get_closest_marker("long") is None
    )  # stable: the rest keep their order
    for item in items:
        if item.get_closest_marker("long") is not None:
            item.add_marker(pytest.mark.xdist_group(item.nodeid))
        if "three_runs" in getattr(
            item, "fixturenames", ()
        ):  # one fixed runs folder, rebuilt by each
            item.add_marker(pytest.mark.xdist_group("three-runs"))
        if item.get_closest_marker("unit") is None:
            item.add_marker(pytest.mark.e2e)
        if item.get_closest_marker("serial") is not None:
            item.add_marker(pytest.mark.xdist_group("serial"))
        if item.get_closest_marker("classic") is not None and not CLASSIC:
            item.add_marker(pytest.mark.skip(reason="verifiers 0.4 runs no classic environments"))


def cli_env(tmp_path: Path, **extra: str | None) -> dict[str, str]:
    """A clean environment: platformdirs and wandb point into tmp_path, no real key (``NAME=None`` unsets one)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VFTUI_", "WANDB_", "OPENAI_"))}
    env.update(
        XDG_CONFIG_HOME=str(tmp_path / "xdg-config"),
        XDG_DATA_HOME=str(tmp_path / "xdg-data"),
        HF_HUB_OFFLINE="1",
        WANDB_MODE="disabled",
        PYTHONUNBUFFERED="1",
    )
    env.update(extra)
    return {k: v for k, v in env.items() if v is not None}


def tmux_cli_command(tmp_path: Path, args: str, **extra: str) -> str:
    """A shell command for a tmux pane: ``vftui <args>`` under ``cli_env`` and ``extra`` (tmux does not
    pass our env on; an ``export`` before it would be overridden by the PYTHONPATH given here)."""
    env = cli_env(tmp_path, **extra)
    exports = " ".join(
        f"{k}={shlex.quote(v)}"
        for k, v in env.items()
        if k.startswith(("XDG_", "HF_", "WANDB_", "PATH", "PYTHONPATH")) or k in extra
    )
    # tmux puts COLUMNS/LINES of a terminal-less client (80x24) in a pane's environment, and Textual takes
    # them over the pane's real size
    return f"env -u COLUMNS -u LINES {exports} {shlex.quote(sys.executable)} -m vftui {args}"


_fork_server: ForkServer | None = None


def _forked(args: list[str], tmp_path: Path, env: dict[str, str | None]) -> ForkedProcess | None:
    """``python -m vftui *args`` forked from this worker's server of imported modules (``forked_cli``),
    or None where its environment differs in what is read on import: the command is what is tested,
    not Python's start, and the import was most of the suite's CPU."""
    global _fork_server
    command_env, base = cli_env(tmp_path, **env), cli_env(tmp_path)
    if not forkable(command_env, base):
        return None
    if _fork_server is None:
        _fork_server = ForkServer(base)
        atexit.register(_fork_server.close)
    return _fork_server.start(args, tmp_path, command_env)


def as_from_a_terminal() -> None:
    """In a command's child before it runs: SIGHUP's default, as a forked command gets it (``forked_cli``),
    so a suite started under nohup (which ignores it, and vftui keeps a nohup's) still tests a hang-up."""
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def run_cli(
    args: list[str], tmp_path: Path, timeout: float = 240, **env: str | None
) -> subprocess.CompletedProcess:
    process = _forked(args, tmp_path, env) or subprocess.Popen(
        [sys.executable, "-m", "vftui", *args],
        cwd=tmp_path,
        env=cli_env(tmp_path, **env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=as_from_a_terminal,
    )
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        raise
    return subprocess.CompletedProcess(args, process.wait(), out, err)


def start_cli(args: list[str], tmp_path: Path, **env: str) -> subprocess.Popen | ForkedProcess:
    return _forked(args, tmp_path, env) or subprocess.Popen(
        [sys.executable, "-m", "vftui", *args],
        cwd=tmp_path,
        env=cli_env(tmp_path, **env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=as_from_a_terminal,
    )


_collectors: multiprocessing.context.BaseContext | None = None
_worker_environment: dict[str, str] = {}


def _environment() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}


def collector_process(config: Any, emit: Callable[[Event], None]) -> CollectorProcess:
    """A dashboard's collector process (unstarted), as the dashboard makes it but for how its interpreter starts:
    forked from this worker's forkserver, which imported the collector once, where a dashboard spawns a fresh
    one (4 CPU-s of imports a test). Spawned as the dashboard's is where the test changed the worker's
    environment: the forkserver's children have the environment it started with. Tests of the process's own
    start and death (tests/test_collector_process.py, tmux) start it as the dashboard does."""
    global _collectors
    if _environment() != _worker_environment:
        return CollectorProcess(config, emit, target=child_main)
    if _collectors is None:
        _collectors = multiprocessing.get_context("forkserver")
        _collectors.set_forkserver_preload(list(COLLECTOR_PRELOAD))
    return CollectorProcess(config, emit, target=child_main, context=_collectors)


def wait_until(
    predicate: Callable[[], Any], what: str, timeout: float = 60, every: float = 0.05
) -> Any:
    """Poll ``predicate`` until it returns something true (returned), or fail after ``timeout`` s saying ``what``."""
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        assert time.monotonic() < deadline, f"{what} (not within {timeout:g} s)"
        time.sleep(every)
    return value


def read_until(stream, text: str, what: str, timeout: float = 120) -> str:
    """Lines of ``stream`` (a process's stderr) up to one with ``text``; fails if the stream ends first."""
    deadline = time.monotonic() + timeout
    while text not in (line := stream.readline()):
        assert line and time.monotonic() < deadline, what
    return line


def wait_for_lines(path: Path, count: int, proc: subprocess.Popen, timeout: float = 90) -> None:
    """Until ``path`` has ``count`` lines; fails at once if ``proc`` exits first."""

    def enough() -> bool:
        assert proc.poll() is None, proc.communicate()
        return path.exists() and path.read_bytes().count(b"\n") >= count

    wait_until(enough, f"fewer than {count} lines in {path}", timeout)


NOBODY = "nobody"


def unprivileged(cwd: Path) -> list[str] | None:
    """A prefix that runs a command without root's right to read any file, for a test of what vftui does with a
    file or folder it may not read (mode 000 means nothing to root, and CI runs as root): none where this is not
    root; else the command as ``nobody`` (setpriv, or runuser), whose files it reads must then be readable by
    all (``cwd`` too); else, where ``nobody`` cannot start this interpreter (a venv under /root), root without
    the capabilities that override a file's mode. None where neither is possible (``unavailable``)."""
    if os.geteuid() != 0:
        return []
    candidates = []
    setpriv, runuser = shutil.which("setpriv"), shutil.which("runuser")
    if setpriv or runuser:
        import pwd

        nobody = pwd.getpwnam(NOBODY)
        if setpriv:
            ids = [f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}", "--clear-groups"]
            candidates.append([setpriv, *ids])
        if runuser:
            candidates.append([runuser, "-u", NOBODY, "--"])
    if setpriv:
        candidates.append([setpriv, "--bounding-set=-dac_override,-dac_read_search"])
    for prefix in candidates:
        probe = [*prefix, sys.executable, "-c", "import vftui"]
        if subprocess.run(probe, cwd=cwd, capture_output=True, timeout=60).returncode == 0:
            return prefix
    return None


TMUX_SOCKET = f"vftui-tests-{os.getpid()}"
"""This worker's own tmux server (``tmux -L``): the suite's sessions never meet the user's or another worker's,
and what a test reads of the server (its paste buffers) is the suite's alone. It stays up while the worker
runs (``exit-empty off``): a server that exits with its last session fails a ``new-session`` started in that
moment ("server exited unexpectedly", seen in CI when a test's pane ended as the next test began). At the
worker's end it is told to exit once empty (``pytest_unconfigure``): nothing here kills a server."""
_tmux_kept = False


def tmux(*args: str, check: bool = True) -> str:
    """``tmux *args`` on this worker's server: what it printed (``check``: a failure raises)."""
    global _tmux_kept
    if not _tmux_kept and shutil.which("tmux"):
        keep = ["start-server", ";", "set-option", "-s", "exit-empty", "off"]
        subprocess.run(["tmux", "-L", TMUX_SOCKET, *keep], capture_output=True, check=False)
        _tmux_kept = True
    command = ["tmux", "-L", TMUX_SOCKET, *args]
    return subprocess.run(command, capture_output=True, text=True, check=check).stdout


def pytest_unconfigure() -> None:
    """The worker's tmux server exits once its sessions are gone, as it would have without the keep."""
    if _tmux_kept:
        release = ["tmux", "-L", TMUX_SOCKET, "set-option", "-s", "exit-empty", "on"]
        subprocess.run(release, capture_output=True, check=False)


@dataclass
class TracedMemory:
    held: int = 0  # bytes Python held at the end beyond what it held before
    peak: int = 0  # the most it held at once, beyond the same


@contextlib.contextmanager
def traced_memory() -> Iterator[TracedMemory]:
    """What the block held of Python's memory, as tracemalloc counts it, once the block ends."""
    memory = TracedMemory()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        yield memory
        memory.held, memory.peak = (m - before for m in tracemalloc.get_traced_memory())
    finally:
        tracemalloc.stop()


def wait_for_screen(session: str, text: str, timeout: float = 90) -> str:
    """The pane's text once ``text`` is on it."""
    screens: list[str] = []

    def shown() -> str | None:
        screens.append(tmux("capture-pane", "-p", "-t", session))
        return screens[-1] if text in screens[-1] else None

    try:
        return wait_until(shown, f"{text!r} never appeared", timeout, every=0.2)
    except AssertionError as e:
        raise AssertionError(f"{e}; the screen was:\n{screens[-1]}") from None


def screen_lines(app) -> list[str]:
    """What an app under ``run_test`` shows, a line a row, as a terminal would."""
    return [
        "".join(segment.text for segment in strip)
        for strip in app.screen._compositor.render_strips()
    ]


def inside_lines(app, widget) -> list[str]:
    """What a widget shows inside its border, a line a row, its children's drawing included (a
    chart's canvases are widgets of their own: its ``render()`` is blank)."""
    region = widget.content_region
    return [line[region.x : region.right] for line in screen_lines(app)[region.y : region.bottom]]


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def json_events(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


@contextlib.contextmanager
def running(server: Server) -> Iterator[Server]:
    """``server`` started on a free loopback port in this process, and stopped whatever happened."""
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def sim() -> Iterator[BackgroundSimServer]:
    """The simulated endpoint."""
    with running(BackgroundSimServer(seed=0)) as server:
        yield server


@pytest.fixture
def slow_sim() -> Iterator[BackgroundSimServer]:
    """The simulated endpoint taking 50 ms per request, so a run lasts long enough to steer."""
    with running(BackgroundSimServer(seed=0, latency_s=0.05)) as server:
        yield server


@pytest.fixture
def paced_sim() -> Iterator[BackgroundSimServer]:
    """The simulated endpoint taking 250 ms per request: a dashboard's run makes a few groups a second, enough
    to steer, where at full speed it ran out its steps before a slow test's last key and its collector's CPU
    crowded the app under test (with the endpoint's, in the test's own process)."""
    with running(BackgroundSimServer(seed=0, latency_s=0.25)) as server:
        yield server


@contextlib.contextmanager
def serve_app(app) -> Iterator[str]:
    """An aiohttp app (an endpoint that misbehaves on purpose) on a loopback port; yields its /v1 URL."""
    with running(BackgroundServer(app)) as server:
        yield server.base_url


def sim_admin(server: BackgroundSimServer, path: str, body: dict | None = None) -> dict:
    url = server.base_url.removesuffix("/v1") + path
    response = (
        httpx.post(url, json=body, timeout=10) if body is not None else httpx.get(url, timeout=10)
    )
    response.raise_for_status()
    return response.json()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Trainer:
    """The simulated trainer in a thread, keeping every batch it pulls (``batches`` and it stops pulling)."""

    def __init__(
        self, api_url: str, batches: int, groups_per_batch: int = 2, group_size: int = 4
    ) -> None:
        self.batches: list[list[dict]] = []
        self.thread = threading.Thread(
            target=run_trainer,
            args=(api_url, groups_per_batch * group_size, batches),
            kwargs={"say": lambda line: None, "on_batch": self.batches.append},
            daemon=True,
        )
        self.thread.start()

    @property
    def groups(self) -> list[dict]:
        return [group for batch in self.batches for group in batch]


@pytest.fixture
def api() -> Iterator[ApiProcess]:
    """atroposlib's real trajectory API (run-api) on a free loopback port."""
    process = ApiProcess(f"http://127.0.0.1:{free_port()}").start()
    try:
        yield process
    finally:
        process.stop()


async def until(predicate, timeout: float = 120.0, pilot=None) -> None:
    """``wait_until`` for async tests: the app (with ``pilot``) or the loop runs meanwhile."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        await (pilot.pause(0.05) if pilot is not None else asyncio.sleep(0.02))


def ended_run(
    folder: Path, env: str, mode: str, done: int, steps: int, reward: float, created: float
) -> Path:
    """A run that ended, as its files say: its settings, and a checkpoint of how far it got."""
    folder.mkdir(parents=True)
    (folder / "groups.jsonl").write_text("")
    (folder / "groups.run.json").write_text(
        json.dumps(
            {
                "config": {"env": env, "mode": mode, "steps": steps},
                "model": "vftui-sim",
                "created": created,
            }
        )
    )
    (folder / "groups.checkpoint.json").write_text(
        json.dumps(
            {
                "groups": done,
                "elapsed_s": 60.0 * (1 + created % 10),
                "state": "finished",
                "mean_reward": reward,
            }
        )
    )
    return folder / "groups.jsonl"


SIDE_SUFFIXES = (
    ".run.json",
    ".checkpoint.json",
    ".lock",
    ".collector.log",
    ".sock",
    ".dropped.jsonl",
    ".html",
)
"""A run's side files, spelled out here on purpose (not read from RunFiles): a renamed one fails the tests."""


RATE_LIMITED_TRAFFIC = RequestStats(
    in_flight=12,
    limit=16,
    ceiling=32,
    groups_in_flight=3,
    requests_per_s=20.4,
    tokens_per_s=417,
    latency_p50_s=0.52,
    latency_p95_s=0.57,
    rate_limited=True,
    requests_total=90,
    rate_limited_total=7,
    failed_total=0,
)
"""A busy endpoint's figures as the status line shows them (rate-limited to 16 of 32)."""


@contextlib.contextmanager
def tmux_session(command: str, width: int = 100, height: int = 30) -> Iterator[str]:
    """A detached tmux session of ``width`` x ``height`` running ``command`` on this worker's server: its name.
    It is killed on the way out, whatever happened (a test that kills it itself on purpose, ``hang_up``,
    leaves nothing to kill)."""
    session = f"vftui-{os.urandom(4).hex()}"
    tmux("new-session", "-d", "-s", session, "-x", str(width), "-y", str(height), command)
    try:
        yield session
    finally:
        tmux("kill-session", "-t", session, check=False)


@contextlib.contextmanager
def recorded_pane(tmp_path: Path, command: str) -> Iterator[tuple[str, Path]]:
    """A tmux session running ``command`` that accepts clipboard writes, with its output bytes recorded: its
    name and the file the bytes go to."""
    with tmux_session("sleep 600") as session:
        raw = tmp_path / f"{session}.bytes"
        tmux("set-option", "-t", session, "set-clipboard", "on")
        tmux("pipe-pane", "-t", session, f"cat >> {shlex.quote(str(raw))}")
        tmux("respawn-pane", "-k", "-t", session, command)
        yield session, raw


def hang_up(session: str) -> None:
    """The session's terminal goes, as a dropped SSH connection's does: its pane's processes get SIGHUP."""
    tmux("kill-session", "-t", session)


def pane_pid(session: str) -> int:
    """The pid of what the session's pane runs (its shell, or the command it ``exec``'d)."""
    return int(tmux("display-message", "-p", "-t", session, "#{pane_pid}").strip())


def pane_child(session: str, pattern: str) -> int:
    """The process the session's pane started whose command line has ``pattern`` (``vftui run``): the command
    its shell runs, not the shell."""
    found = subprocess.run(
        ["pgrep", "-P", str(pane_pid(session)), "-f", pattern],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(found.stdout.split()[0])


def dashboard_pid(out: Path) -> int:
    """The dashboard writing ``out``: its process, not the shell or forwarder around it, nor its collector child."""
    found = subprocess.run(
        ["pgrep", "-f", f"^{sys.executable} -m vftui run .*{out}"],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(found.stdout.split()[0])


@pytest.fixture(scope="session")
def paired_evals(tmp_path_factory, worker_id) -> dict[str, Path]:
    """Shard 0 of 24 examples at temperature 0 (always right) and at 2 (often wrong): the same 12 items;
    and shard 1 at 2: none of them. Made once a suite, by the first worker that asks, for compare's and
    report's tests (read only)."""
    if worker_id == "master":
        return _paired_evals(tmp_path_factory.mktemp("evals"))
    shared = tmp_path_factory.getbasetemp().parent  # this run's, above each worker's own
    with FileLock(shared / "evals.lock"):
        return _paired_evals(shared / "evals")


def _paired_evals(folder: Path) -> dict[str, Path]:
    """The three evals in ``folder``, made unless a worker made them already."""
    made = {name: folder / f"{name}.jsonl" for name in ("cold", "hot", "other")}
    if (folder / "made").exists():
        return made
    folder.mkdir(exist_ok=True)
    for name, temperature, shard in (
        ("cold", "0", "0/2"),
        ("hot", "2", "0/2"),
        ("other", "2", "1/2"),
    ):
        out = folder / f"{name}.jsonl"
        result = run_cli(
            [
                "run",
                "--mode",
                "eval",
                "--no-ui",
                "--num-examples",
                "24",
                "--shard",
                shard,
                "--rollouts-per-example",
                "4",
                "--temperature",
                temperature,
                "--out",
                str(out),
            ],
            folder,
        )
        assert result.returncode == 0, result.stderr
    (folder / "made").touch()
    return made


@pytest.fixture(scope="session")
def verifiers_own_eval(tmp_path_factory) -> Callable[[str, dict], Path]:
    """verifiers' own v1 eval of a shimmed built-in taskset (``verifiers_reference.SHIMS``) with its args:
    2 tasks x 2 rollouts on a fresh simulated model of seed 0, its output folder. Made once per worker for
    each taskset and args, as the tests that read it read it unchanged: each run is ~25 CPU-s of verifiers'
    harness processes."""
    from .verifiers_reference import eval_command

    made: dict[str, Path] = {}

    def run(taskset: str, taskset_args: dict) -> Path:
        key = json.dumps([taskset, taskset_args], sort_keys=True)
        if key in made:
            return made[key]
        folder = tmp_path_factory.mktemp("verifiers-eval")
        env, out = shimmed_env(folder), folder / "out"
        sim = BackgroundSimServer(seed=0).start()
        try:
            command = eval_command(
                taskset, sim.base_url, "vftui-sim", "VFTUI_TEST_KEY", out, 2, 2, 4, taskset_args
            )
            done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=500)
            assert done.returncode == 0, done.stderr[-3000:]
        finally:
            sim.stop()
        made[key] = out
        return out

    return run


def shimmed_env(folder: Path) -> dict[str, str]:
    """The environment of a run of ``verifiers_reference.SHIMS``' tasksets from ``folder``, by vftui or by
    verifiers' own eval: the shims importable (``folder/site``), the key ``VFTUI_TEST_KEY``, uv held to the
    registry's date."""
    from .verifiers_reference import SHIMS, pinned

    site = folder / "site"
    site.mkdir(exist_ok=True)
    for name, text in SHIMS.items():
        (site / f"{name}.py").write_text(text)
    return pinned(
        {
            **cli_env(folder),
            "VFTUI_TEST_KEY": "dummy",
            "HF_DATASETS_OFFLINE": "1",
            "PYTHONPATH": os.pathsep.join([str(site), str(REPO)]),
        }
    )
