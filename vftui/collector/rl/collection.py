"""rl (Atropos ``serve``): token-level groups with logprobs from vLLM/SGLang, sent to the trajectory API.

atroposlib's own serve loop (``env_manager``) drives the env; the run stops it once
``--steps`` groups were sent. Beside it: the trajectory API and the simulated trainer when
the run starts them, and each inference server as atroposlib sees it (``server_watch``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import subprocess
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from vftui.collector.envs import loader
from vftui.collector.envs.base import Environment
from vftui.collector.eval.during_rl import LIMIT_TRAIN, EvalsDuringRl
from vftui.collector.rl import managed, server_check
from vftui.collector.rl.api_process import ApiProcess
from vftui.collector.rl.rollouts import RlRollouts
from vftui.collector.rl.server_watch import watch_servers
from vftui.collector.sft.pool import groups_for
from vftui.config import RunConfig
from vftui.errors import RunFailed
from vftui.events import Event, Mode
from vftui.live.process import vftui_command

if TYPE_CHECKING:
    from vftui.collector.gate import GroupGate
    from vftui.collector.verifiers_env import VerifiersEnv

STEP_LIMIT = (
    1_000_000_000  # atroposlib's own group limit, out of reach: the run stops the loop itself
)
logger = logging.getLogger(__name__)


class RlCollection:
    mode = Mode.RL
    item_range: int | None = None

    def __init__(self, config: RunConfig, emit: Callable[[Event], None]) -> None:
        self.config = config
        self._emit = emit
        self.rollouts = RlRollouts(max_concurrent=min(config.concurrency, config.group_size))
        self._api: ApiProcess | None = None
        self._trainer: subprocess.Popen | None = None
        self._task: asyncio.Task | None = None
        self._failure: RunFailed | None = None
        self._evals: EvalsDuringRl | None = None

    def check(self, environment: Environment) -> None:
        """A tools environment needs a parser that reads the calls out of the generated text."""
        if environment.has_tools:
            managed.check_tool_parser(self.config.env, self.config.tool_parser)

    def groups_total(self, environment: Environment) -> int:
        return self.config.steps

    def observe(self, event: Event) -> None:
        return None  # the run's own totals and health are enough

    def start(self, step: Callable[[str], None], base_urls: tuple[str, ...], api_key: str) -> None:
        """Inference servers atroposlib can drive; the trajectory API (with --start-api) and the sim trainer, if
        asked for."""
        cfg = self.config
        server_check.check_servers(base_urls, api_key, cfg.server_type, step)
        if cfg.start_api:
            step(f"starting the trajectory API at {cfg.api_url}")
            self._api = ApiProcess(cfg.api_url).start()
        if cfg.runs_sim_trainer:
            self._trainer = subprocess.Popen(
                vftui_command(
                    "sim-trainer",
                    "--api-url",
                    cfg.api_url,
                    "--batch-size",
                    str(cfg.batch_size or cfg.group_size),
                ),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )

    def env_settings(self, groups_left: int) -> dict[str, Any]:
        cfg = self.config
        return {
            "total_steps": STEP_LIMIT,
            "rollout_server_url": cfg.api_url,
            "batch_size": cfg.batch_size or -1,
            "max_num_workers": groups_for(
                cfg.concurrency, cfg.group_size
            ),  # --concurrency is in requests
            # the API names the env after it ("desired_name"), so it cannot be empty
            "wandb_name": cfg.wandb_name or f"vftui-{cfg.env.split('/')[-1]}",
            "steps_per_eval": cfg.eval_every or 0,
            **LIMIT_TRAIN,
        }

    def server_settings(self) -> dict[str, Any]:
        return {"server_type": self.config.server_type, "health_check": True}

    def configure(self, env: VerifiersEnv) -> None:
        env.server.tool_parser = (
            self.config.tool_parser
        )  # each rollout's ManagedServer parses calls with it
        if self.config.eval_every is not None:  # an environment of its own, on its eval split
            environment = loader.load(self.config.env, self.config.env_args)
            split = environment.use_eval_split()
            self._evals = EvalsDuringRl(self.config, environment, self._emit)
            env.hooks.evaluate = self._evals
            logger.info(
                "evaluating every %d trainer steps on %d examples of %s",
                self.config.eval_every,
                self._evals.examples,
                split,
            )

    def tokens_written(self, count: int) -> None:
        return None  # the inference servers' own figures stand for the traffic (``server_watch``)

    async def collect(self, env: VerifiersEnv, gate: GroupGate) -> None:
        """atroposlib's serve loop, until the groups are sent, a stop, or a group's failure."""
        self._task = asyncio.ensure_future(env.env_manager())
        finished = asyncio.ensure_future(gate.wait_finished())
        servers = asyncio.ensure_future(watch_servers(env.server.servers, self._emit))
        try:
            await asyncio.wait({self._task, finished}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            finished.cancel()
            servers.cancel()
            if not self._task.done():
                self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._evals is not None:
            await self._evals.environment.aclose()
        if env.unsent:
            logger.warning(
                "%d groups were not sent to the trajectory API; they are in %s",
                env.unsent,
                env.config.data_path_to_save_groups,
            )
        if self._failure is not None:
            raise self._failure

    def fail(self, failure: RunFailed) -> None:
        """A group's failure ends the run (the first one says why)."""
        if self._failure is None:
            self._failure = failure
            self.cancel()

    async def finish(self, env: VerifiersEnv) -> None:
        return None  # its files are the jsonl and the checkpoint, written as it goes

    def cancel(self) -> None:
        if self._task is not None:
            self._task.cancel()

    def close(self) -> None:
        if self._trainer is not None:
            self._trainer.terminate()
            self._trainer.wait(timeout=10)
            self._trainer = None
        if self._api is not None:
            self._api.stop()
            self._api = None
