"""Evals during rl (``--eval-every S``): atroposlib's own ``evaluate`` hook, every S trainer steps.

atroposlib's serve loop calls the env's ``evaluate`` when the trainer's step passes a multiple
of ``steps_per_eval``; with ``eval_handling`` LIMIT_TRAIN it keeps ``eval_limit_ratio`` (half)
of its training workers running meanwhile, so a trainer waiting on batches is never starved.
Each eval runs the same examples (the eval split's first N) through the endpoint's OpenAI API,
reports an ``EvalReport`` with the trainer's step, and logs ``eval/...`` to wandb in a row of its own.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable

from openai import AsyncOpenAI

from vftui.collector.envs.base import Environment, Rollout, metrics_of, unscorable
from vftui.collector.modes import Sampling, ServeDriver
from vftui.config import RunConfig
from vftui.events import EvalReport, Event
from vftui.figures.eval_stats import EvalTally

logger = logging.getLogger(__name__)
EVAL_WORKERS = 16  # examples evaluated at once (atroposlib's ``max_eval_workers``)
LIMIT_TRAIN = {
    "eval_handling": "LIMIT_TRAIN",
    "eval_limit_ratio": 0.5,
    "max_eval_workers": EVAL_WORKERS,
}  # atroposlib's settings for the share


class EvalsDuringRl:
    def __init__(
        self,
        config: RunConfig,
        environment: Environment,
        emit: Callable[[Event], None],
        sampling: Sampling,
        driver: ServeDriver,
    ) -> None:
        self.config, self.environment, self._emit = config, environment, emit
        self._sampling, self._driver = sampling, driver
        self._client: AsyncOpenAI | None = None
        size = environment.size
        self.examples = (
            min(config.eval_examples, size) if size is not None else config.eval_examples
        )

    async def __call__(self, step: int) -> dict[str, float]:
        """One eval of the fixed examples at the trainer's step ``step``; its figures for wandb."""
        cfg, k = self.config, self.config.eval_rollouts
        endpoint = self._sampling.endpoint
        if self._client is None:
            self._client = AsyncOpenAI(
                base_url=endpoint.base_urls[0],
                api_key=endpoint.api_key or "EMPTY",
                timeout=endpoint.timeout,
                max_retries=cfg.retries,
            )
        sampling = {
            "temperature": cfg.eval_temperature,
            "max_completion_tokens": self._sampling.max_tokens,
        }
        tally = EvalTally(k, cfg.pass_threshold)
        limit = asyncio.Semaphore(EVAL_WORKERS)

        async def one(index: int) -> None:
            async with limit:
                rollouts = await self.environment.group(
                    self.environment.item(index), k, self._client, endpoint.model, sampling, k
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
        return self._log(report)

    def _log(self, report: EvalReport) -> dict[str, float]:
        """``eval/<figure>`` and the trainer's step it was taken at, in a wandb row of its own with the
        training metrics of the env's next step."""
        metrics = {
            f"eval/{name}": f["mean"]
            for name, f in {**report.figures, **report.functions}.items()
            if f["mean"] is not None
        }
        self._driver.log_row({**metrics, "eval/trainer_step": report.step or 0})
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
