"""Evals during rl (``--eval-every S``): atroposlib's own ``evaluate`` hook, every S trainer steps.

atroposlib's serve loop calls the env's ``evaluate`` when the trainer's step passes a multiple
of ``steps_per_eval``; with ``eval_handling`` LIMIT_TRAIN it keeps ``eval_limit_ratio`` (half)
of its training workers running meanwhile, so a trainer waiting on batches is never starved.
Each eval runs the same examples (the eval split's first N) through the endpoint's OpenAI API,
reports an ``EvalReport`` with the trainer's step, and logs ``eval/...`` to wandb at that step.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from openai import AsyncOpenAI

from vftui.collector.envs.base import Environment, Rollout, metrics_of, unscorable
from vftui.config import RunConfig
from vftui.events import EvalReport, Event
from vftui.figures.eval_stats import EvalTally

if TYPE_CHECKING:
    from vftui.collector.verifiers_env import VerifiersEnv

logger = logging.getLogger(__name__)
LIMIT_TRAIN = {
    "eval_handling": "LIMIT_TRAIN",
    "eval_limit_ratio": 0.5,
}  # atroposlib's settings for the share


class EvalsDuringRl:
    def __init__(
        self, config: RunConfig, environment: Environment, emit: Callable[[Event], None]
    ) -> None:
        self.config, self.environment, self._emit = config, environment, emit
        self._client: AsyncOpenAI | None = None
        size = environment.size
        self.examples = (
            min(config.eval_examples, size) if size is not None else config.eval_examples
        )

    async def __call__(self, env: VerifiersEnv) -> dict[str, float]:
        """One eval of the fixed examples at the trainer's current step; its figures for wandb."""
        step = int(env.status_dict.get("current_step", env.curr_step))
        cfg, k = self.config, self.config.eval_rollouts
        server = env.server.servers[0].config
        if self._client is None:
            self._client = AsyncOpenAI(
                base_url=server.base_url,
                api_key=server.api_key or "EMPTY",
                timeout=server.timeout,
                max_retries=cfg.retries,
            )
        sampling = {
            "temperature": cfg.eval_temperature,
            "max_completion_tokens": env.config.max_token_length,
        }
        tally = EvalTally(k, cfg.pass_threshold)
        limit = asyncio.Semaphore(max(1, env.config.max_eval_workers))

        async def one(index: int) -> None:
            async with limit:
                rollouts = await self.environment.group(
                    self.environment.item(index), k, self._client, server.model_name, sampling, k
                )
            if (failure := _failure(rollouts)) is not None:
                tally.fail(index, failure)
            else:
                tally.add(index, [float(r.reward) for r in rollouts], metrics_of(rollouts))

        await asyncio.gather(*(one(i) for i in range(self.examples)))
        if tally.errors:  # an endpoint or reward error: not a score, counted beside the figures
            logger.warning(
                "eval at trainer step %d: %d of %d examples failed and are left out of its figures",
                step,
                len(tally.errors),
                self.examples,
            )
        report = dataclasses.replace(tally.report(self.examples, final=True), step=step)
        self._emit(report)
        return self._log(env, report)

    def _log(self, env: VerifiersEnv, report: EvalReport) -> dict[str, float]:
        """``eval/<figure>`` at the trainer's step, where the training metrics are."""
        metrics = {
            f"eval/{name}": f["mean"]
            for name, f in {**report.figures, **report.functions}.items()
            if f["mean"] is not None
        }
        if env.config.use_wandb:
            import wandb

            if wandb.run is not None:
                wandb.log(metrics, step=max(report.step or 0, env.curr_step))
        return metrics


def _failure(rollouts: list[Rollout]) -> str | None:
    """Why an example's rollouts are no score (an endpoint error, a reward function that raised, a value that is no
    finite number), or None."""
    for rollout in rollouts:
        if rollout.error or rollout.reward_failure:
            return rollout.error or "reward function '{}' failed: {}".format(
                *rollout.reward_failure
            )
    bad = unscorable([r.reward for r in rollouts], metrics_of(rollouts))
    return None if bad is None else "{} failed: {}".format(*bad)
