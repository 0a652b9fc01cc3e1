"""rl (Atropos ``serve``): token-level groups with logprobs from vLLM/SGLang, sent to the trajectory API.

atroposlib's own serve loop (``env_manager``) drives the env; the run stops it once
``--steps`` groups were sent. Beside it: the trajectory API and the simulated trainer when
the run starts them, and each inference server as atroposlib sees it (``server_watch``).
"""

from __future__ import annotations

import asyncio
import logging
import subprocess
from collections.abc import Callable
from typing import Any

from vftui.collector.envs import loader
from vftui.collector.envs.base import Environment
from vftui.collector.eval.during_rl import LIMIT_TRAIN, EvalsDuringRl
from vftui.collector.modes import Collection, Driver, Endpoint, ModeContext, Sampling, ServeDriver
from vftui.collector.rl import managed, server_check
from vftui.collector.rl.api_process import ApiProcess
from vftui.collector.rl.rollouts import RlRollouts
from vftui.collector.rl.server_watch import watch_servers
from vftui.collector.sft.pool import groups_for
from vftui.config import RunConfig
from vftui.errors import RunFailed
from vftui.events import Event
from vftui.live.process import vftui_command

STEP_LIMIT = (
    1_000_000_000  # atroposlib's own group limit, out of reach: the run stops the loop itself
)
logger = logging.getLogger(__name__)


class RlCollection(Collection):
    def __init__(self, config: RunConfig, emit: Callable[[Event], None]) -> None:
        self.config = config
        self._emit = emit
        self._api: ApiProcess | None = None
        self._trainer: subprocess.Popen | None = None
        self._task: asyncio.Task | None = None
        self._evals: EvalsDuringRl | None = None

    def check(self, environment: Environment) -> None:
        """A tools environment needs a parser that reads the calls out of the generated text."""
        if environment.has_tools:
            managed.check_tool_parser(self.config.env, self.config.tool_parser)

    def groups_total(self, environment: Environment) -> int:
        return self.config.steps

    def start(self, step: Callable[[str], None], endpoint: Endpoint) -> None:
        """Inference servers atroposlib can drive; the trajectory API (with --start-api) and the sim trainer, if
        asked for."""
        cfg = self.config
        server_check.check_servers(endpoint.base_urls, endpoint.api_key, cfg.server_type, step)
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

    def rollouts(self, sampling: Sampling, driver: ServeDriver) -> RlRollouts:
        """Each rollout through a ManagedServer; with --eval-every, the evals on an environment of their own
        (its eval split), through atroposlib's ``evaluate`` hook."""
        driver.use_tool_parser(self.config.tool_parser)  # each rollout's ManagedServer parses calls
        if self.config.eval_every is not None:
            environment = loader.load(self.config.env, self.config.env_args)
            split = environment.use_eval_split()
            self._evals = EvalsDuringRl(self.config, environment, self._emit, sampling, driver)
            driver.evaluate_with(self._evals)
            logger.info(
                "evaluating every %d trainer steps on %d examples of %s",
                self.config.eval_every,
                self._evals.examples,
                split,
            )
        max_concurrent = min(self.config.concurrency, self.config.group_size)
        return RlRollouts(sampling, driver, max_concurrent=max_concurrent)

    async def collect(self, context: ModeContext, driver: Driver) -> None:
        """atroposlib's serve loop, until the groups are sent, a stop, or a group's failure (raised); each eval's
        files beside the run's."""
        if self._evals is not None:
            self._evals.write_to(context.files, driver)
        self._task = asyncio.ensure_future(driver.serve())
        finished = asyncio.ensure_future(context.gate.wait_finished())
        servers = asyncio.ensure_future(watch_servers(driver.servers(), self._emit))
        failure: RunFailed | None = None
        try:
            await asyncio.wait({self._task, finished}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            finished.cancel()
            servers.cancel()
            if not self._task.done():
                self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            except RunFailed as e:
                failure = e
        if self._evals is not None:
            await self._evals.environment.aclose()
        if driver.unsent:
            logger.warning(
                "%d groups were not sent to the trajectory API; they are in %s",
                driver.unsent,
                context.files.jsonl,
            )
        if failure is not None:
            raise failure

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
