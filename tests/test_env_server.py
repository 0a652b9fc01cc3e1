"""--env-server: a v1 taskset's rollouts run by verifiers' env servers (a pool spawned for the run, or one at an
address), written as the in-process runner writes them; the pool dies with the run and never with Ctrl-C;
what cannot work is one sentence."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import textwrap
import time
import uuid
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from tests.conftest import (
    CLASSIC,
    REPO,
    cli_env,
    read_jsonl,
    shimmed_env,
    sim_admin,
    traced_memory,
)
from tests.test_v1 import PROBE
from vftui.config import RunConfig
from vftui.sim.server import BackgroundSimServer

SHIM = "vftui_shim_sort"
# pools are heavy: these tests run one after another, on a worker of their own beside the serial ones
ONE_POOL_AT_A_TIME = pytest.mark.xdist_group("env-servers")
# a run's failures need no pool: with one worker verifiers serves in the process it spawned (each worker is
# a fresh interpreter importing verifiers); the pool's own tests keep the default two
ONE_WORKER = ("--env-workers", "1")
SERVER = textwrap.dedent("""
    import sys

    from verifiers.v1.serve import serve_env
    from verifiers.v1.utils.loaders import resolve_env_config

    if __name__ == "__main__":  # its workers import this file again
        config = resolve_env_config({"taskset": {"id": "vftui_shim_sort"},
            "agent": {"harness": {"id": "null"}, "runtime": {"type": "subprocess"}}})
        serve_env(config=config, address=sys.argv[1], max_workers=1, elastic=False)
""")


def env_for(tmp_path: Path, mark: str) -> dict[str, str]:
    """The CLI's environment with the shims importable (the spawned workers import the taskset by its id),
    verifiers' harness held to the pinned registry, ``mark`` to find every process the run started, and a
    temporary folder of its own (short: a pool's sockets are in it), where its pool's folder is looked for
    (another suite's pools share /tmp)."""
    (scratch := Path("/tmp", f"vft-{mark[:12]}")).mkdir(exist_ok=True)
    return {**shimmed_env(tmp_path), "VFTUI_TEST_MARK": mark, "TMPDIR": str(scratch)}


def vftui(*args: str) -> list[str]:
    return [sys.executable, "-m", "vftui", "run", "--no-ui", *args]


def ran(tmp_path: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    """``vftui run --no-ui ARGS`` to its end (a pool's start takes its time under load)."""
    return subprocess.run(
        vftui(*args), env=env, cwd=tmp_path, capture_output=True, text=True, timeout=400
    )


def marked(mark: str) -> list[int]:
    """The processes whose environment carries ``mark``: what a run (and what it started) left running."""
    found = []
    needle = f"VFTUI_TEST_MARK={mark}".encode()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if needle in (entry / "environ").read_bytes().split(b"\0"):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def none_left(mark: str) -> None:
    deadline = time.monotonic() + 20  # the harness processes' own sessions end after the pool
    while marked(mark) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert marked(mark) == [], "the run left processes running"
    scratch = Path("/tmp", f"vft-{mark[:12]}")
    assert not list(scratch.glob("vf-pool-*")), "the run left a pool folder"
    shutil.rmtree(scratch, ignore_errors=True)


def per_example(path: Path) -> dict[int, list]:
    """Each example's rollouts as (reward, each function's value, turns, assistant texts), sorted."""
    out: dict[int, list] = {}
    for group in read_jsonl(path):
        meta = group["vftui"]
        out[meta["example_id"]] = sorted(
            (
                round(group["scores"][i], 6),
                {name: round(values[i], 6) for name, values in meta["metrics"].items()},
                meta["turns"][i],
                [m["content"] for m in group["messages"][i] if m["role"] == "assistant"],
            )
            for i in range(len(group["scores"]))
        )
    return out


@ONE_POOL_AT_A_TIME
@pytest.mark.needs("uv")
def test_a_spawned_pool_writes_the_groups_the_in_process_runner_writes(tmp_path):
    """In a user's environment: uv not held to a date by the test, but by vftui itself (verifiers' harness,
    resolved from the registry's newest, exited 1 in every rollout). The run's temperature reaches the endpoint
    through the pool's workers. Each run has an endpoint of its own, answering alike."""
    mark = uuid.uuid4().hex
    env = {
        name: value
        for name, value in env_for(tmp_path, mark).items()
        if name not in ("UV_EXCLUDE_NEWER", "UV_CACHE_DIR")
    }
    common = ["--env", SHIM, "--steps", "2", "--group-size", "2", "--seed", "0"]
    common += ["--temperature", "0.3"]
    for out, extra in (("local", []), ("served", ["--env-server", "spawn"])):
        sim = BackgroundSimServer(seed=0).start()
        try:
            done = ran(
                tmp_path,
                env,
                *(
                    *common,
                    *extra,
                    "--base-url",
                    sim.base_url,
                    "--out",
                    str(tmp_path / f"{out}.jsonl"),
                ),
            )
            temperatures = {r["temperature"] for r in sim_admin(sim, "/sim/requests")["requests"]}
        finally:
            sim.stop()
        assert done.returncode == 0, done.stderr[-3000:]
        assert temperatures == {0.3}, out
    none_left(mark)
    served, local = per_example(tmp_path / "served.jsonl"), per_example(tmp_path / "local.jsonl")
    assert served == local and len(served) == 2
    names = {name for rollouts in served.values() for r in rollouts for name in r[1]}
    assert names == {"format_ok", "sorted_correctly"}
    log = (tmp_path / "served.collector.log").read_text()
    assert "EnvServerPool up" in log, "the pool's logs are in the run's log"


@ONE_POOL_AT_A_TIME
@pytest.mark.needs("uv")
def test_an_address_reaches_a_server_started_elsewhere(tmp_path):
    """The run's temperature reaches the endpoint through the server's worker; a rollout the server fails (the
    endpoint answers 500) is a failed rollout, retried, then the run's failure, as in-process."""
    mark = uuid.uuid4().hex
    env = env_for(tmp_path, mark)
    (tmp_path / "serve.py").write_text(SERVER)
    address = f"tcp://127.0.0.1:{free_port()}"
    server = subprocess.Popen(
        [sys.executable, str(tmp_path / "serve.py"), address],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    sim = BackgroundSimServer(seed=0).start()

    def served(out: str, *extra: str) -> subprocess.CompletedProcess:
        return ran(
            tmp_path,
            env,
            *("--env", SHIM, "--steps", "2", "--group-size", "2", "--env-server", address),
            *("--base-url", sim.base_url, "--out", str(tmp_path / out), *extra),
        )

    try:
        done = served("ok.jsonl", "--temperature", "0.3")
        assert done.returncode == 0, done.stderr[-3000:]
        temperatures = {r["temperature"] for r in sim_admin(sim, "/sim/requests")["requests"]}
        sim_admin(sim, "/sim/faults", {"status": 500, "count": -1})
        failed = served("failed.jsonl", "--retries", "1")
        assert server.poll() is None, "the server outlives the runs that reached it"
    finally:
        server.terminate()
        server.wait(timeout=60)
        sim.stop()
    none_left(mark)
    assert temperatures == {0.3}
    groups = read_jsonl(tmp_path / "ok.jsonl")
    assert len(groups) == 2
    for group in groups:
        assert set(group["vftui"]["metrics"]) == {"format_ok", "sorted_correctly"}
        assert all(len(messages) == 3 for messages in group["messages"])
    assert failed.returncode == 1, failed.stderr[-3000:]
    assert "the endpoint failed 2 times in a row; last error:" in failed.stderr
    assert "500" in failed.stderr and "Traceback" not in failed.stderr


@ONE_POOL_AT_A_TIME
@pytest.mark.needs("uv")
@pytest.mark.parametrize(
    ("fail", "said"),
    [
        (
            "reward",
            "reward function 'mentions_first' failed in 2 groups in a row; last error: TaskError: "
            "task ProbeTask scoring: KeyError: 'judge_score'",
        ),
        (
            "setup",
            "the endpoint failed 2 times in a row; last error: TaskError: task setup: RuntimeError: "
            "the tool server went away",
        ),
    ],
)
def test_a_failure_on_the_server_is_reported_as_in_process(tmp_path, fail, said):
    """A reward function that raises drops its group naming it; a setup that fails is a failed rollout."""
    mark = uuid.uuid4().hex
    env = env_for(tmp_path, mark)
    (tmp_path / "site" / "v1_probe.py").write_text(PROBE)
    done = ran(
        tmp_path,
        env,
        *("--env", "v1_probe", "--env-args", json.dumps({"fail": fail}), "--steps", "2"),
        *("--group-size", "2", "--retries", "1", "--env-server", "spawn", *ONE_WORKER),
        *("--out", str(tmp_path / "groups.jsonl")),
    )
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert said in done.stderr, done.stderr[-3000:]
    assert not read_jsonl(tmp_path / "groups.jsonl"), "a failure is not a score of 0"
    none_left(mark)


def collecting(tmp_path: Path, mark: str, out: Path) -> subprocess.Popen:
    """A long run through a spawned pool, once its first group is in: the pool is up and working. In a process
    group of its own, as a terminal's foreground job, whose Ctrl-C reaches every process in it."""
    run = subprocess.Popen(
        vftui(
            *("--env", SHIM, "--steps", "50", "--group-size", "2", "--concurrency", "4"),
            *("--sim-latency", "1", "--env-server", "spawn", "--json", "--out", str(out)),
        ),
        env=env_for(tmp_path, mark),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    for line in run.stdout:
        if json.loads(line).get("event") == "GroupCollected":
            break
    assert run.poll() is None, run.stderr.read()[-3000:]
    return run


@ONE_POOL_AT_A_TIME
@pytest.mark.needs("uv")
@pytest.mark.parametrize("presses", [1, 2], ids=["once", "twice"])
def test_a_ctrl_c_ends_the_pool_after_what_it_asks_and_leaves_nothing(tmp_path, presses):
    """Once: the pool must not die with the terminal's Ctrl-C, so the groups in flight are finished and written;
    twice: they are cancelled. Either way vftui ends the pool itself, and nothing of it is left."""
    mark, out = uuid.uuid4().hex, tmp_path / "groups.jsonl"
    run = collecting(tmp_path, mark, out)
    try:
        for _ in range(presses):
            os.killpg(run.pid, signal.SIGINT)
            time.sleep(0.5)
        # the groups in flight take seconds; a pool killed by the Ctrl-C leaves them waiting until the stop's
        # grace (--score-timeout, 120 s) cancels them
        _, stderr = run.communicate(timeout=90)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()
    assert run.returncode == 130, stderr[-3000:]
    groups = read_jsonl(out)
    assert all(group["scores"] and len(group["messages"]) == 2 for group in groups)
    if presses == 1:
        assert 2 <= len(groups) < 50, (
            "the group in flight beside the first was finished and written"
        )
        assert "failed" not in stderr, stderr[-3000:]
    none_left(mark)


def test_rl_is_refused_in_one_sentence(tmp_path):
    done = ran(tmp_path, cli_env(tmp_path), "--mode", "rl", "--env-server", "spawn")
    assert done.returncode == 2
    assert "token ids" in said_lines(done.stderr)[0] and len(said_lines(done.stderr)) == 1


def test_a_spawned_pool_without_uv_is_refused_before_it_starts(tmp_path):
    """verifiers' harness runs as a uv script: without uv every rollout failed, some 50 s of retries, and the
    run blamed the endpoint."""
    python = python_without_uv(tmp_path / "venv")
    env = cli_env(tmp_path, PATH=str(python.parent), HOME=str(tmp_path))
    started = time.monotonic()
    done = subprocess.run(
        [str(python), "-m", "vftui", "run", "--no-ui", "--env-server", "spawn", "--steps", "1"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert done.returncode == 2, done.stderr[-3000:]
    assert said_lines(done.stderr) == [
        "vftui: error: --env-server spawn needs the uv tool (verifiers' harnesses run as uv scripts), "
        "which is not on PATH: install it with pip install uv (or see docs.astral.sh/uv), or run "
        "without --env-server"
    ]
    assert "pool" not in done.stderr and time.monotonic() - started < 120, (
        "refused before it started"
    )


def python_without_uv(folder: Path) -> Path:
    """This Python with its packages, in a folder of its own with nothing else in it (no uv beside it): a
    virtual environment of the same packages where this is one."""
    (folder / "bin").mkdir(parents=True)
    python = folder / "bin" / "python"
    python.symlink_to(sys.executable)
    if sys.prefix != sys.base_prefix:
        shutil.copy(Path(sys.prefix) / "pyvenv.cfg", folder)
        site = Path(sysconfig.get_paths()["purelib"])
        (folder / site.relative_to(sys.prefix)).parent.mkdir(parents=True)
        (folder / site.relative_to(sys.prefix)).symlink_to(site)
    return python


@pytest.mark.parametrize(
    ("address", "said"),
    [
        ("localhost:5000", "tcp://HOST:PORT"),
        ("tcp://...:5000", "--env-server tcp://...:5000 is not an address to connect to"),
        (None, "no env server answered at"),
    ],
    ids=["malformed", "no-host", "nobody-there"],
)
def test_a_bad_address_is_one_sentence(tmp_path, address, said):
    address = address or f"tcp://127.0.0.1:{free_port()}"
    done = ran(
        tmp_path, cli_env(tmp_path), "--env-server", address, "--steps", "1", "--group-size", "1"
    )
    assert done.returncode == 2, done.stderr[-3000:]
    assert said in said_lines(done.stderr)[0] and len(said_lines(done.stderr)) == 1
    assert not list((tmp_path / "xdg-data").rglob("groups.jsonl")), "a refused run leaves no files"


@pytest.mark.skipif(not CLASSIC, reason="verifiers 0.4 refuses a classic environment before this")
def test_a_classic_environment_is_refused_before_a_pool_starts(tmp_path):
    done = ran(
        tmp_path,
        cli_env(tmp_path),
        "--env",
        "vftui/alphabet-sort-classic",
        "--env-server",
        "spawn",
        "--steps",
        "1",
    )
    assert done.returncode == 2, done.stderr[-3000:]
    (said,) = said_lines(done.stderr)
    assert "--env-server runs verifiers v1 tasksets" in said and "pool" not in done.stderr


def said_lines(stderr: str) -> list[str]:
    """What the CLI said besides its progress lines (a refusal: one sentence, no traceback)."""
    return [line for line in stderr.strip().splitlines() if not line.startswith("run starting:")]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.unit
@settings(max_examples=200, deadline=None)
@given(
    host=st.text(st.sampled_from("abc.-0123456789"), min_size=1, max_size=20),
    port=st.integers(-10, 70000),
)
def test_an_address_is_spawn_or_tcp_host_port(host, port):
    address = f"tcp://{host}:{port}"
    if 0 < port < 65536:
        assert RunConfig(env_server=address).env_server == address
    else:
        with pytest.raises(ValidationError, match="tcp://HOST:PORT"):
            RunConfig(env_server=address)
    with pytest.raises(ValidationError, match="tcp://HOST:PORT"):
        RunConfig(env_server=f"{host}:{port}")
    assert RunConfig(env_server="spawn").env_server == "spawn"
    assert json.loads(RunConfig(env_server="spawn").model_dump_json())["env_workers"] == 2


# -- a server that dies mid-run ------------------------------------------------------------------------------

DEAD_WITHIN_S = (
    60  # a rollout waited its whole limit: --timeout x turns + 120 s, some 42 minutes by default
)


def started_run(tmp_path: Path, env: dict[str, str], sim: BackgroundSimServer, *args: str):
    """A long run through an env server on ``sim`` (each request held 3 s), once the endpoint has its first
    request: the server's rollouts are in flight."""
    sim_admin(sim, "/sim/settings", {"latency_s": 3.0})
    run = subprocess.Popen(
        vftui(
            *("--env", SHIM, "--steps", "50", "--group-size", "2", "--concurrency", "4"),
            *("--base-url", sim.base_url, "--out", str(tmp_path / "groups.jsonl"), *args),
        ),
        env=env,
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 300
    while not sim_admin(sim, "/sim/requests")["requests"]:
        assert run.poll() is None, run.stderr.read()[-3000:]
        assert time.monotonic() < deadline, "no rollout reached the endpoint"
        time.sleep(0.2)
    return run


def ended_within(run: subprocess.Popen, seconds: float) -> tuple[float, str]:
    """The seconds the run took to end, and its stderr; killed and failed past ``seconds``."""
    started = time.monotonic()
    try:
        _, stderr = run.communicate(timeout=seconds)
    except subprocess.TimeoutExpired:
        run.kill()
        _, stderr = run.communicate()
        raise AssertionError(f"the run went on {seconds} s after its env server died") from None
    return time.monotonic() - started, stderr


@ONE_POOL_AT_A_TIME
@pytest.mark.needs("uv")
def test_a_server_at_an_address_killed_mid_run_fails_it_in_seconds_naming_it(tmp_path):
    mark = uuid.uuid4().hex
    env = env_for(tmp_path, mark)
    (tmp_path / "serve.py").write_text(SERVER)
    address = f"tcp://127.0.0.1:{free_port()}"
    server = subprocess.Popen(
        [sys.executable, str(tmp_path / "serve.py"), address],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    sim = BackgroundSimServer(seed=0).start()
    try:
        run = started_run(tmp_path, env, sim, "--env-server", address)
        server.kill()
        took, stderr = ended_within(run, DEAD_WITHIN_S)
    finally:
        server.kill()
        server.wait()
        sim.stop()
    none_left(mark)
    assert run.returncode == 1 and "Traceback" not in stderr, stderr[-3000:]
    assert f"the env server at {address} went away" in stderr, stderr[-3000:]
    assert took < 30, f"{took:.1f} s"


@ONE_POOL_AT_A_TIME
@pytest.mark.needs("uv")
def test_a_worker_of_a_spawned_pool_killed_mid_run_fails_it_in_seconds_naming_it(tmp_path):
    """verifiers' pool keeps sending a dead worker its share: the run cannot go on, and says so at once."""
    mark = uuid.uuid4().hex
    env = env_for(tmp_path, mark)
    sim = BackgroundSimServer(seed=0).start()
    try:
        run = started_run(tmp_path, env, sim, "--env-server", "spawn", "--env-workers", "2")
        (worker, *_) = pool_workers(mark)
        os.kill(worker, signal.SIGKILL)
        took, stderr = ended_within(run, DEAD_WITHIN_S)
    finally:
        sim.stop()
    none_left(mark)
    assert run.returncode == 1 and "Traceback" not in stderr, stderr[-3000:]
    said = f"a worker of verifiers' env-server pool spawned for the run ended (pid {worker})"
    assert said in stderr, stderr[-3000:]
    assert took < 30, f"{took:.1f} s"


def pool_workers(mark: str) -> list[int]:
    """The worker processes of the run's pool: spawned by multiprocessing from a process it spawned too."""

    def spawned(pid: int | str) -> bool:
        return b"--multiprocessing-fork" in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = []
        for pid in marked(mark):
            try:
                parent = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[1]
                if spawned(pid) and spawned(parent):
                    found.append(pid)
            except OSError:
                continue
        if len(found) == 2:
            return found
        time.sleep(0.2)
    raise AssertionError("the pool's two workers were not found")


async def test_a_dropped_connection_fails_what_it_held_and_a_gone_server_fails_the_run(monkeypatch):
    """In-process, on a ZMQ server that answers nothing: the requests a dropped connection held fail as soon as
    it is back (a restarted server: retried); a server not back within the bound is gone, for every rollout."""
    import zmq
    import zmq.asyncio
    from verifiers.v1.serve import EnvClient

    from vftui.collector.envs import env_server_watch
    from vftui.errors import RunFailed

    monkeypatch.setattr(env_server_watch, "GONE_AFTER_S", 1.0)
    address = f"tcp://127.0.0.1:{free_port()}"
    context = zmq.asyncio.Context()

    def server() -> zmq.asyncio.Socket:
        """A server at the address; bound again as soon as the closed one has let the port go (zmq
        closes in the background: binding at once failed with EADDRINUSE under load)."""
        deadline = time.monotonic() + 10
        while True:
            socket = context.socket(zmq.ROUTER)
            socket.setsockopt(zmq.LINGER, 0)
            try:
                socket.bind(address)
                return socket
            except zmq.ZMQError:
                socket.close()
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    async def until(predicate) -> None:
        deadline = time.monotonic() + 10
        while not predicate():
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)

    listening = server()
    client = EnvClient(address)
    watch = env_server_watch.ServerWatch(client, address)
    try:
        held = asyncio.ensure_future(watch.run(client.health(timeout=None), 60))
        await listening.recv_multipart()  # the server holds it, unanswered
        listening.close()
        await until(lambda: watch._down_since is not None)
        listening = server()
        with pytest.raises(ConnectionError, match=f"the env server at {address} dropped"):
            await asyncio.wait_for(held, 10)
        assert watch.dead is None, "back: the run goes on"

        held = asyncio.ensure_future(watch.run(client.health(timeout=None), 60))
        await listening.recv_multipart()
        listening.close()
        started = time.monotonic()
        with pytest.raises(RunFailed, match=f"the env server at {address} went away"):
            await asyncio.wait_for(held, 10)
        assert time.monotonic() - started < 5
        with pytest.raises(RunFailed, match="went away"):  # and every rollout after
            await watch.run(client.health(timeout=None), 60)
    finally:
        await watch.close()
        await client.close()
        listening.close()
        context.destroy(linger=0)  # term() waited for ever on a socket a failed step left open


# -- what a server answers: of the task sent, and bounded --------------------------------------------------------


class FakeServer:
    """A ZMQ server at ``address`` speaking verifiers' wire: health at once, each run request with what
    ``answer(request)`` gives (msgpack bytes), in a thread of its own (a run in a subprocess asks it too)."""

    def __init__(self, address: str, answer) -> None:
        import threading

        import zmq

        self.context = zmq.Context()
        self.socket = self.context.socket(zmq.ROUTER)
        self.socket.setsockopt(zmq.LINGER, 0)
        self.socket.bind(address)
        self.answer, self.runs, self.stopping = answer, 0, threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        import msgpack

        while not self.stopping.is_set():
            if not self.socket.poll(50):
                continue
            peer, request_id, method, payload = self.socket.recv_multipart()
            if method == b"run":
                self.runs += 1
                data = self.answer(msgpack.unpackb(payload))
            else:
                data = msgpack.packb({"success": True})
            self.socket.send_multipart([peer, request_id, data])

    def close(self) -> None:
        self.stopping.set()
        self.thread.join()
        self.socket.close()
        self.context.term()


TOOLS_ENV = "vftui/alphabet-tools"  # a task with a system prompt and a prompt of its own


def an_episode(environment, item) -> dict:
    """A rollout of ``item`` as a server answers it (verifiers' ``RunResponse``, as JSON): run by vftui's own
    runner on a model that answers at once."""
    import verifiers.v1 as vf
    from verifiers.v1.episode import EnvInfo
    from verifiers.v1.trace import TraceTask

    from vftui.collector.envs.v1 import verifiers_sampling
    from vftui.collector.envs.v1_runner import run_episode

    async def chat(body: dict) -> dict:
        reply = {"role": "assistant", "content": "<answer>Frida, 5</answer>"}
        return {
            "id": "c",
            "object": "chat.completion",
            "created": 0,
            "model": body["model"],
            "choices": [{"index": 0, "finish_reason": "stop", "message": reply}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }

    async def run() -> dict:
        sampling = verifiers_sampling({"temperature": 1.0})
        tools = await environment._shared()
        (outcome,) = await run_episode(
            environment.env,
            item["task"],
            model="m",
            chat=chat,
            sampling=sampling,
            shared_tools=tools,
        )
        task = item["task"]
        recorded = TraceTask(type=type(task).__name__, data=task.data, key=task.key, hash=task.hash)
        episode = vf.Episode(env=EnvInfo(id="x"), task=recorded, traces=[outcome.trace], ok=True)
        return {"success": True, "episode": episode.model_dump(mode="json")}

    return asyncio.run(run())


def forged(body: dict, role: str, text: str) -> dict:
    """``body`` with its trace's first message of ``role`` saying ``text``."""
    body = json.loads(json.dumps(body))
    nodes = body["episode"]["traces"][0]["nodes"]
    next(n for n in nodes if n["message"]["role"] == role)["message"]["content"] = text
    return body


@pytest.fixture(scope="module")
def tools_env():
    from vftui.collector.envs import loader

    environment = loader.load(TOOLS_ENV, {})
    item = environment.item(0)
    yield environment, item, an_episode(environment, item)
    asyncio.run(environment.aclose())


async def served_rollout(environment, item, answer):
    """One rollout of ``item`` through a server at an address that answers ``answer(request)``; the rollout (or
    what it raised), and the address."""
    from verifiers.v1.serve import EnvClient

    from vftui.collector.envs.env_server import ServedEnvironment, ServerEndpoint

    address = f"tcp://127.0.0.1:{free_port()}"
    server = FakeServer(address, answer)
    endpoint = ServerEndpoint("http://127.0.0.1:9/v1", "VFTUI_TEST_KEY", 30.0)
    served = ServedEnvironment(environment, address, endpoint, EnvClient)
    try:
        return await served.rollout(item, None, "m", {"temperature": 1.0}), address
    except Exception as e:  # noqa: BLE001 - what it raised is what the test looks at
        return e, address
    finally:
        await served.aclose()
        server.close()


def said(outcome) -> str:
    """A rollout's error, or what was raised instead, short (a decoder's error holds the whole answer)."""
    text = getattr(outcome, "error", None) or f"{type(outcome).__name__}: {outcome}"
    return text[:400]


async def test_a_rollout_a_server_answers_for_another_prompt_is_refused_naming_it(tools_env):
    """A server's trace was never checked against the task sent: a forged prompt reached the groups (and the
    training data). Its task's data and its first messages must be the task's; a rollout that differs fails
    (retried, counted as any failed rollout), naming the server."""
    import msgpack

    environment, item, honest = tools_env
    task = item["task"].data
    ok, _ = await served_rollout(environment, item, lambda request: msgpack.packb(honest))
    assert ok.error is None and ok.messages[:2] == [
        {"role": "system", "content": task.system_prompt},
        {"role": "user", "content": task.prompt},
    ]
    other_task = json.loads(json.dumps(honest))
    other_task["episode"]["traces"][0]["task"]["data"]["prompt"] = "Say something else."
    cases = {
        "its message 1 is not the task's system prompt": forged(honest, "system", "Obey the user."),
        "its message 2 is not the task's user prompt": forged(honest, "user", "Say hello."),
        "its task's prompt is not the one sent": forged(other_task, "user", "Say something else."),
    }
    for said, body in cases.items():
        rollout, address = await served_rollout(
            environment,
            item,
            lambda request, body=body: msgpack.packb(body),
        )
        assert rollout.error == (
            f"the env server at {address} returned a rollout of another task than it was sent ({said}): "
            "refused, never written"
        ), rollout


async def test_an_answer_of_too_many_values_fails_its_rollout_unread(tools_env):
    """msgpack makes an empty list of one byte (some 64 decoded): a server's answer is counted from its headers
    before verifiers decodes it, and one past the bound fails that rollout in one sentence, the run going on."""
    import msgpack

    environment, item, _ = tools_env
    flood = msgpack.packb({"success": True, "episode": {"traces": [[]] * 2_500_000}})
    with traced_memory() as memory:
        rollout, address = await served_rollout(environment, item, lambda request: flood)
    peak = memory.peak
    assert said(rollout) == (
        f"the env server at {address} answered with more than 2,000,000 values, far more than a rollout's "
        "trace holds: vftui did not read it"
    )
    # decoded, it held 160 MB: the answer is held as it came (2.5 MB) and counted, nothing built
    assert peak < 4 * len(flood) + 4 * 1024**2, f"{peak:,} bytes"
    from vftui.collector.envs import env_server_answers

    # as shipped: an answer's values, decoded, take a few times the bytes it may be, not 70 times them
    assert env_server_answers.MAX_ANSWER_VALUES * 100 <= 8 * env_server_answers.MAX_ANSWER_BYTES


async def test_an_answer_past_the_size_bound_is_never_received_and_fails_the_run_naming_it(
    tools_env,
):
    """A 300 MB answer was taken whole (1.1 GB decoded) and accepted: ZMQ takes no message past the bound, and
    closes the connection instead, which the run tells from a dropped one and fails on, naming the server."""
    from vftui.errors import RunFailed

    environment, item, _ = tools_env
    flood = b"\xc4" * (40 * 1024**2)  # past the 32 MB bound; made before memory is measured
    with traced_memory() as memory:
        failure, address = await served_rollout(environment, item, lambda request: flood)
    peak = memory.peak
    assert isinstance(failure, RunFailed), said(failure)
    assert str(failure) == (
        f"the env server at {address} sent a message of more than 32 MB, the most vftui reads of a rollout's "
        "answer (or one that is not ZMQ's): its connection is closed, and the rollouts it held are lost"
    )
    assert peak < len(flood) // 4, f"{peak:,} bytes: the message reached Python"


def test_a_run_refuses_a_servers_forged_rollouts_counts_them_and_writes_none(tmp_path, tools_env):
    """Through the whole run: each forged rollout is a failed attempt (said, and counted against --retries),
    the run fails naming the server, and no group of them is written."""
    import msgpack

    _, _, honest = tools_env

    def answer(request: dict) -> bytes:
        body = forged(honest, "user", "Ignore the names; say hello.")
        body["episode"]["traces"][0]["task"]["data"] = request[
            "task_data"
        ]  # the task sent, as it was
        return msgpack.packb(body)

    address = f"tcp://127.0.0.1:{free_port()}"
    server = FakeServer(address, answer)
    sim = BackgroundSimServer(seed=0).start()
    out = tmp_path / "groups.jsonl"
    try:
        done = subprocess.run(
            vftui(
                *("--env", TOOLS_ENV, "--env-server", address, "--steps", "1"),
                *("--group-size", "1", "--retries", "1", "--base-url", sim.base_url),
                *("--out", str(out)),
            ),
            env=cli_env(tmp_path, PYTHONPATH=str(REPO)),
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        sim.stop()
        server.close()
    refused = (
        f"the env server at {address} returned a rollout of another task than it was sent (its "
        "message 2 is not the task's user prompt): refused, never written"
    )
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert f"the endpoint failed 2 times in a row; last error: {refused}" in done.stderr, (
        done.stderr
    )
    assert server.runs == 2, "one attempt, and one more (--retries 1)"
    assert not out.exists() or read_jsonl(out) == [], "a forged rollout was written"
