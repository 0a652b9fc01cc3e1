"""A v1 taskset's rollouts run by verifiers' env servers (``verifiers.v1.serve``), not in this process.

Why: env work that blocks its loop or burns CPU (a sync judge, a sandbox, an agent harness) scales
across verifiers' own worker processes, here or on another machine, while the run keeps its
endpoint, controls and files. One ``EnvClient.run`` request is one rollout: vftui owns the taskset
and sends each task's data, the server runs verifiers' whole path (harness, interception, tools,
scoring) and answers a ``WireEpisode``, made here into a ``Rollout`` as the in-process runner's are.
The server's workers call the model themselves: they read the API key from their own environment
by the variable's name, and give no token ids or logprobs (so rl cannot use this path). A server that
dies (its process, a worker of a pool spawned for the run, its connection) fails the run in seconds, in
a sentence naming it (``env_server_watch``).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import logging
import multiprocessing
import os
import queue
import re
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vftui import safe_files
from vftui.collector.envs.base import IndependentRollouts, Rollout
from vftui.collector.envs.env_server_watch import ServerWatch
from vftui.collector.envs.loader import V1_BUILTIN_TASKSETS
from vftui.collector.envs.messages import plain_messages
from vftui.errors import UserError

if TYPE_CHECKING:
    from vftui.collector.envs.v1 import V1Environment

SPAWN = "spawn"  # --env-server's value that starts a pool for the run
LOOPBACK_ANY_PORT = "tcp://127.0.0.1:0"
START_WAIT_S = 120.0  # a spawned pool's broker imports verifiers before it listens
ANSWER_WAIT_S = 20.0  # a server at an address answers health at once, or it is not there
STOP_GRACE_S = 30.0  # the broker stops its workers (10 s each at most) on SIGTERM
SETUP_ALLOWANCE_S = 120.0  # a rollout's harness start and scoring, beside its model calls
HARNESS_REGISTRY_DATE = (
    "2026-11-25T00:00:00Z"  # verifiers' harness dependencies as vftui was tested with
)
FRAME = re.compile(r'^  File ".*", line \d+, in (\w+)$', re.MULTILINE)  # a traceback's frame


def serve_module() -> Any:
    """verifiers' env-server package; one sentence where the installed verifiers has none (verifiers is
    imported no sooner: a verifiers without v1 gets the sentence too)."""
    try:
        from verifiers.v1 import serve
    except ImportError as e:
        raise UserError(
            f"--env-server needs verifiers' env servers (verifiers.v1.serve), which verifiers "
            f"{importlib.metadata.version('verifiers')} does not have; run without --env-server"
        ) from e
    return serve


@dataclass(frozen=True)
class ServerEndpoint:
    """The model endpoint as the server's workers reach it: the key by its variable's name, read there."""

    base_url: str
    api_key_var: str
    request_timeout_s: float


def served(
    environment: Any,
    where: str,
    env_args: dict[str, Any],
    workers: int,
    endpoint: ServerEndpoint,
    log: Path,
    closing: contextlib.ExitStack,
    step: Callable[[str], None],
) -> ServedEnvironment:
    """``environment`` (a loaded v1 taskset) with its rollouts run by the env server at ``where``, or by a pool
    spawned for the run (``SPAWN``, stopped by ``closing``, its output into ``log``); each step said with
    ``step``; a server that does not answer is one sentence."""
    serve = serve_module()
    from vftui.collector.envs.v1 import V1Environment

    pool: SpawnedPool | None = None
    if not isinstance(environment, V1Environment):
        raise UserError(
            f"--env-server runs verifiers v1 tasksets; '{environment.env_id}' is a classic "
            "environment: run it without --env-server"
        )
    if where == SPAWN:
        uv_folder = uv_for_the_pool()
        step(f"starting verifiers' env-server pool ({workers} workers)")
        config_data = _server_config(environment, env_args, serve)
        pool = SpawnedPool.start(config_data, workers, log, uv_folder)
        closing.callback(pool.stop)
        address, wait_s = pool.address, START_WAIT_S
        unanswered = f"the env-server pool spawned for the run did not answer in {wait_s:g} s (its log: {log})"
    else:
        step(f"reaching the env server at {where}")
        address, wait_s = where, ANSWER_WAIT_S
        unanswered = (
            f"no env server answered at {where} in {wait_s:g} s: is one running there, reachable "
            f"from here, on verifiers {_minor()} as vftui is?"
        )
    if not asyncio.run(_answers(serve.EnvClient, address, wait_s)):
        raise UserError(unanswered)
    return ServedEnvironment(environment, address, endpoint, serve.EnvClient, pool)


async def _answers(client_type: type, address: str, wait_s: float) -> bool:
    import zmq

    try:
        client = client_type(address)
    except zmq.ZMQError as e:  # a host ZMQ cannot read (``tcp://...:5000``)
        raise UserError(
            f"--env-server {address} is not an address to connect to: {e.strerror}"
        ) from e
    try:
        await client.wait_for_server_startup(timeout=wait_s, interval=0.5)
        return True
    except TimeoutError:
        return False
    finally:
        await client.close()


def uv_for_the_pool() -> str | None:
    """verifiers' harnesses (its plain chat one too) run as uv scripts, so a pool without uv fails every
    rollout: uv is looked for where the pool's shell finds it (PATH, ``~/.local/bin``), then beside this
    Python (a virtual environment's, not activated: where ``pip install uv`` put it), that folder returned
    to be put on the pool's PATH; without it, one sentence before anything starts."""
    if shutil.which("uv") or shutil.which("uv", path=str(Path.home() / ".local" / "bin")):
        return None
    beside = os.path.dirname(sys.executable)
    if beside and shutil.which("uv", path=beside):
        return beside
    raise UserError(
        "--env-server spawn needs the uv tool (verifiers' harnesses run as uv scripts), which is not "
        "on PATH: install it with pip install uv (or see docs.astral.sh/uv), or run without --env-server"
    )


def _minor() -> str:
    return ".".join(importlib.metadata.version("verifiers").split(".")[:2])


def _server_config(environment: V1Environment, env_args: dict[str, Any], serve: Any) -> dict:
    """The taskset's env config as the spawned workers rebuild it: the run's ``--env-args``, with verifiers'
    plain chat harness in a local process unless they name an agent of their own."""
    from verifiers.v1.utils.loaders import resolve_env_config

    from vftui.collector.envs import v1

    raw = v1.env_config(environment.env.config.taskset.id, env_args)
    agent = raw.setdefault("agent", {})
    agent.setdefault("harness", {}).setdefault("id", "null")
    agent.setdefault("runtime", {}).setdefault("type", "subprocess")
    return serve.env_config_data(resolve_env_config(raw))


# -- the rollouts ---------------------------------------------------------------------------


class ServedEnvironment(IndependentRollouts):
    """The local taskset's items, names and weights; its rollouts from the env server at ``address``."""

    def __init__(
        self,
        local: V1Environment,
        address: str,
        endpoint: ServerEndpoint,
        client_type: type,
        pool: SpawnedPool | None = None,
    ) -> None:
        self.local = local
        self.address = address
        self.endpoint = endpoint
        self.env_id = local.env_id
        self.reward_function_names = local.reward_function_names
        self.reward_weights = local.reward_weights
        self.has_tools = local.has_tools
        self.max_turns = local.max_turns
        # each model call may take the run's --timeout; the harness's start and scoring come beside them
        self.rollout_limit_s = (
            endpoint.request_timeout_s * (local.max_turns or 1) + SETUP_ALLOWANCE_S
        )
        self._client_type = client_type
        self._pool = pool
        self._client: Any = None  # made on the run's loop, which its sockets belong to
        # whether the server is still there (``env_server_watch``), made with the client
        self._watch: ServerWatch | None = None

    @property
    def size(self) -> int | None:
        return self.local.size

    def item(self, index: int) -> dict[str, Any]:
        return self.local.item(index)

    def use_eval_split(self) -> str | None:
        return self.local.use_eval_split()

    async def rollout(
        self, item: dict[str, Any], client: Any, model: str, sampling: dict[str, Any]
    ) -> Rollout:
        """One request to the server (``client``, the mode's, is not used: the server calls the endpoint); a
        cancelled one (a second stop) is cancelled on the server too, by verifiers' client. A server that
        dropped it fails the rollout (retried with its group); one that is gone fails the run
        (``RunFailed``, naming it), in seconds, not at the rollout's time limit."""
        from verifiers.v1.clients import EvalClientConfig

        from vftui.collector.envs.v1 import verifiers_sampling

        if self._client is None or self._watch is None:
            self._client = self._client_type(self.address)
            self._watch = ServerWatch(self._client, self.address, self._pool)
        watch = self._watch
        request = self._client.run(
            EvalClientConfig(
                base_url=self.endpoint.base_url, api_key_var=self.endpoint.api_key_var
            ),
            model,
            verifiers_sampling(sampling),
            item["task"].data.model_dump(mode="json"),
        )
        try:
            episode = await watch.run(request, self.rollout_limit_s)
        except ConnectionError as e:
            return _failed(str(e))
        except TimeoutError:
            return _failed(
                f"the env server did not finish the rollout in {self.rollout_limit_s:g} s"
            )
        except RuntimeError as e:  # the server's own failure, or its answer refused
            refused = str(e) == self._client.socket.refusal
            return _failed(str(e) if refused else f"the env server failed the rollout: {e}")
        rollout = rollout_of(episode, self.reward_function_names)
        if rollout.error is None and (
            wrong := not_the_task(episode.traces[0], item["task"], rollout.messages)
        ):
            return _failed(
                f"the env server at {self.address} returned a rollout of another task than it was "
                f"sent ({wrong}): refused, never written"
            )
        return rollout

    async def aclose(self) -> None:
        if self._watch is not None:
            await self._watch.close()
            self._watch = None
        if self._client is not None:
            await self._client.close()
            self._client = None


def _failed(error: str) -> Rollout:
    return Rollout([], 0.0, {}, 0, [], error=error)


def rollout_of(episode: Any, reward_functions: list[str]) -> Rollout:
    """A ``WireEpisode`` as the modes consume a rollout: an error before scoring fails the rollout (retried
    with its group), one while scoring is its reward function's failure (the group is dropped), as
    in-process."""
    from vftui.collector.envs.v1 import STAGES, trace_rollout

    if len(episode.traces) != 1:
        if not episode.traces and episode.errors:
            return _failed(f"{STAGES['env']}: {_said(episode.errors[-1])}")
        return _failed(
            f"the environment ran {len(episode.traces)} agents for one rollout; vftui collects one "
            "model's rollouts"
        )
    trace = episode.traces[0]
    errors = [*episode.errors, *trace.errors]
    error = reward_failure = None
    if errors and trace.timing.scoring.start:
        reward_failure = (_raised_in(errors[-1], reward_functions), _said(errors[-1]))
    elif errors:
        error = _said(errors[-1])
    tools = [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description or "",
                "parameters": tool.parameters,
            },
        }
        for tool in trace.tools
    ]
    return trace_rollout(trace, tools, error, reward_failure)


def not_the_task(trace: Any, task: Any, messages: list[dict[str, Any]]) -> str | None:
    """How a server's trace is not of ``task``, the one it was sent (a field of the task's data as the trace
    records it; its first messages, which must be the task's system prompt and prompt as verifiers' harnesses
    write them, the system prompt apart or folded into a text prompt); None where it is of it. A forged prompt
    would reach the groups, and the training data. Turns the Env writes itself (a user it plays) are its own."""
    sent = task.data.model_dump(mode="json")
    recorded = trace.task.data.model_dump(mode="json")
    if (field := next((k for k in sent if recorded.get(k) != sent[k]), None)) is not None:
        return f"its task's {field} is not the one sent"
    openings = _openings(task.data)
    if any(messages[: len(opening)] == opening for opening in openings):
        return None
    apart = openings[0]
    at = next(n for n, m in enumerate(apart) if n >= len(messages) or messages[n] != m)
    return f"its message {at + 1} is not the task's {apart[at]['role']} prompt"


def _openings(data: Any) -> list[list[dict[str, Any]]]:
    """The first messages of a rollout of a task of ``data``, in each way verifiers' harnesses write them
    (``Harness.resolve_prompt``): its system prompt apart, as vftui's runner and the plain chat one do; or
    folded into a text prompt."""
    from verifiers.v1.dialects.chat import message_to_wire

    system, prompt = data.system_prompt, data.prompt
    head = [{"role": "system", "content": system}] if system else []
    if isinstance(prompt, str):
        body = [{"role": "user", "content": prompt}] if prompt else []
    else:
        body = [message_to_wire(m) for m in prompt or []]
    openings = [plain_messages(head + body)]
    if system is not None and isinstance(prompt, str):
        openings.append(plain_messages([{"role": "user", "content": f"{system}\n\n{prompt}"}]))
    return openings


def _raised_in(error: Any, reward_functions: list[str]) -> str:
    """The reward function whose frame is the deepest in the error's traceback (the wire names no hook)."""
    frames = FRAME.findall(error.traceback or "")
    return next((name for name in reversed(frames) if name in reward_functions), "scoring")


def _said(error: Any) -> str:
    return f"{error.type}: {error.message}" if error.message else error.type


# -- a pool for the run ---------------------------------------------------------------------


@dataclass
class SpawnedPool:
    """verifiers' ``serve_env`` in a process of its own, deaf to the terminal's Ctrl-C (the groups in flight
    would die with it): vftui ends it with SIGTERM, then a kill. Should vftui die first, the pool ends itself
    when its end of ``lifeline`` closes (verifiers' death pipe)."""

    process: Any
    lifeline: Any
    shim: Path | None
    log: Path
    address: str = ""

    @classmethod
    def start(
        cls, config_data: dict, workers: int, log: Path, uv_folder: str | None = None
    ) -> SpawnedPool:
        context = multiprocessing.get_context("spawn")
        addresses = context.Queue()
        lifeline, child_end = context.Pipe()
        shim = _importable_shim(config_data["taskset"]["id"])
        process = context.Process(
            target=serve_apart,
            kwargs={
                "log": str(log),
                "shim": str(shim) if shim else None,
                "uv_folder": uv_folder,
                "max_workers": workers,
                "elastic": False,
                "address": LOOPBACK_ANY_PORT,
                "address_queue": addresses,
                "death_pipe": child_end,
                "config_data": config_data,
            },
            name="vftui-env-server",
        )
        pool = cls(process, lifeline, shim, log)
        try:
            process.start()
            child_end.close()
            pool.address = pool._reported(addresses)
        except BaseException:
            pool.stop()
            raise
        return pool

    def _reported(self, addresses: Any) -> str:
        """The address the pool bound, or the sentence of why it did not."""
        deadline = time.monotonic() + START_WAIT_S
        while time.monotonic() < deadline:
            try:
                return addresses.get(timeout=0.5)
            except queue.Empty:
                if not self.process.is_alive():
                    raise UserError(
                        f"verifiers' env-server pool ended before it listened: {self._last_words()}"
                    ) from None
        raise UserError(
            f"verifiers' env-server pool did not listen in {START_WAIT_S:g} s (its log: {self.log})"
        )

    def _last_words(self) -> str:
        with contextlib.suppress(OSError):
            lines = [line for line in self.log.read_text(errors="replace").splitlines() if line]
            if lines:
                return f"{lines[-1].strip()[:300]} (more in {self.log})"
        return f"exit code {self.process.exitcode}"

    def stop(self) -> None:
        if self.process.pid is not None:
            self.process.terminate()
            self.process.join(STOP_GRACE_S)
            if self.process.is_alive():
                self.process.kill()
                self.process.join()
        self.lifeline.close()
        if self.shim is not None:
            shutil.rmtree(self.shim, ignore_errors=True)


def _importable_shim(taskset_id: str) -> Path | None:
    """A folder whose module of the taskset's id imports the taskset, for one vftui knows by an alias (its
    built-ins, ``loader._v1_id``): spawned workers take their path from the pool, not vftui's aliases."""
    module = sys.modules.get(f"{V1_BUILTIN_TASKSETS}.{taskset_id}")
    if module is None or module.__name__ == f"{V1_BUILTIN_TASKSETS}.{taskset_id}":
        return None
    folder = Path(tempfile.mkdtemp(prefix="vftui-taskset-"))
    (folder / f"{taskset_id}.py").write_text(
        f"import importlib, sys\nsys.modules[__name__] = importlib.import_module({module.__name__!r})\n"
    )
    return folder


def serve_apart(
    log: str, shim: str | None, uv_folder: str | None = None, **serve_kwargs: Any
) -> None:
    """The pool's process (its workers inherit all of this): SIGINT and SIGHUP ignored, its output and logs
    into the run's log, the taskset importable by its id, uv on PATH; then verifiers' ``serve_env``."""
    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    fd = safe_files.open_append(Path(log))
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    if shim is not None:
        sys.path.insert(0, shim)
    if uv_folder is not None:
        os.environ["PATH"] = os.pathsep.join(filter(None, [uv_folder, os.environ.get("PATH")]))
    _harness_resolved_as_tested()
    from verifiers.v1.serve import serve_env

    serve_env(log_setup=_log_to_stderr, **serve_kwargs)


def _harness_resolved_as_tested() -> None:
    """verifiers' harness is a script whose dependencies (openai, mcp, ...) uv resolves afresh, unpinned: the
    registry's newest set made the plain chat harness exit 1 inside openai's client (2026-12), every rollout
    a failure. Unless the user holds uv to a date of their own, it resolves as the registry was on
    ``HARNESS_REGISTRY_DATE`` (what vftui was tested with), in a uv cache of that date's own: uv keys a
    script's environment by its dependencies as written, so one resolved otherwise would be reused."""
    if "UV_EXCLUDE_NEWER" not in os.environ:
        os.environ.update(harness_pins(os.environ))


def harness_pins(env: Mapping[str, str]) -> dict[str, str]:
    """uv's settings that hold a resolution to ``HARNESS_REGISTRY_DATE``, in a cache beside ``env``'s own."""
    cache = Path(env.get("UV_CACHE_DIR") or Path.home() / ".cache" / "uv")
    return {
        "UV_EXCLUDE_NEWER": HARNESS_REGISTRY_DATE,
        "UV_CACHE_DIR": str(cache.with_name(f"{cache.name}-registry-{HARNESS_REGISTRY_DATE[:10]}")),
    }


def _log_to_stderr() -> None:
    """Each pool process's log records into its stderr, the run's log (without it they are dropped)."""
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(processName)s %(name)s %(levelname)s: %(message)s",
        stream=sys.stderr,
    )
