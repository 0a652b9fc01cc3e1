"""Evals during rl (``--eval-every S``): atroposlib's own ``evaluate`` hook, every S trainer steps.

atroposlib's serve loop calls the env's ``evaluate`` when the trainer's step passes a multiple
of ``steps_per_eval``; with ``eval_handling`` LIMIT_TRAIN it keeps ``eval_limit_ratio`` (half)
of its training workers running meanwhile, so a trainer waiting on batches is never starved.
Each eval runs the same examples (the eval split's first N) through the endpoint's OpenAI API,
reports an ``EvalReport`` with the trainer's step, logs ``eval/...`` to wandb in a row of its own, and
writes its files as ``--mode eval`` does (``eval.files``) in a folder of its own in the run's eval folder
(``RunFiles.eval_at_step``: ``NAME.eval/step_000040/``), so report, compare, view and runs read each one
as any eval. A folder is never written over: a resumed run's eval at a step an earlier one took is
``step_000040_1``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from openai import AsyncOpenAI, DefaultAsyncHttpxClient

from vftui import safe_files
from vftui.collector.envs.base import Environment, Rollout, metrics_of, unscorable
from vftui.collector.eval import files
from vftui.collector.modes import EvalLog, Sampling, ServeDriver
from vftui.config import RunConfig
from vftui.events import EvalReport, Event
from vftui.figures.eval_stats import EvalTally
from vftui.group_format import META
from vftui.loopback import unproxied
from vftui.run_files import store
from vftui.run_files.files import RunFiles

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
        self._files: tuple[RunFiles, EvalLog] | None = (
            None  # where each eval's files go (``write_to``)
        )
        size = environment.size
        self.examples = (
            min(config.eval_examples, size) if size is not None else config.eval_examples
        )

    def write_to(self, run_files: RunFiles, log: EvalLog) -> None:
        """Write each eval's files in ``run_files``' eval folder, atroposlib's through ``log``."""
        self._files = (run_files, log)

    async def __call__(self, step: int) -> dict[str, float]:
        """One eval of the fixed examples at the trainer's step ``step``, its files written; its figures for
        wandb."""
        cfg, k = self.config, self.config.eval_rollouts
        wall, clock = time.time(), time.monotonic()
        endpoint = self._sampling.endpoint
        if self._client is None:
            self._client = AsyncOpenAI(
                base_url=endpoint.base_urls[0],
                api_key=endpoint.api_key or "EMPTY",
                timeout=endpoint.timeout,
                max_retries=cfg.retries,
                # loopback never through a proxy
                http_client=DefaultAsyncHttpxClient(**unproxied(endpoint.base_urls[0])),
            )
        sampling = {
            "temperature": cfg.eval_temperature,
            "max_completion_tokens": self._sampling.max_tokens,
        }
        tally = EvalTally(k, cfg.pass_threshold)
        limit = asyncio.Semaphore(EVAL_WORKERS)

        groups: dict[int, dict[str, Any]] = {}  # each example scored, in the groups form

        async def one(index: int) -> None:
            item = self.environment.item(index)
            async with limit:
                began = time.time(), time.monotonic()
                rollouts = await self.environment.group(
                    item, k, self._client, endpoint.model, sampling, k
                )
            if (failure := _failure(rollouts)) is not None:
                tally.fail(index, failure)
            else:
                tally.add(index, [float(r.reward) for r in rollouts], metrics_of(rollouts))
                groups[index] = _group(index, item, rollouts, cfg.eval_temperature, began)

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
        span = (wall, wall + time.monotonic() - clock)
        await self._write(report, tally.errors, [groups[i] for i in sorted(groups)], span)
        return self._log(report)

    async def _write(
        self,
        report: EvalReport,
        errors: dict[int, str],
        groups: list[dict[str, Any]],
        span: tuple[float, float],
    ) -> None:
        """The eval's files, as ``--mode eval`` writes them, in a new folder of the run's eval folder; one that
        cannot be written is a warning (the run and its other evals go on)."""
        if self._files is None:
            return
        run_files, log = self._files
        step, cfg = report.step or 0, self.config
        model = self._sampling.endpoint.model
        run = {
            "env_id": cfg.env,
            "env_args": cfg.env_args,
            "model": model,
            "base_url": cfg.endpoint,
            "sampling_args": {
                "temperature": cfg.eval_temperature,
                "max_tokens": self._sampling.max_tokens,
            },
            "trainer_step": step,
        }
        try:
            folder = new_folder(run_files.eval_at_step(step))
            await files.write_groups(
                log, report, errors, run, model, span, groups, folder, cfg.eval_temperature
            )
        except OSError as e:
            logger.warning("the eval at trainer step %d was not written: %s", step, e)
            return
        logger.info("eval at trainer step %d written to %s", step, folder)

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


def new_folder(path: Path) -> Path:
    """``path`` made here as a new folder, in its parent (the run's eval folder, made if missing); where anything
    is at the name (an earlier session's eval at that step), ``path_1``, ``path_2``...: nothing is written over."""
    safe_files.own_folder(path.parent)
    for candidate in store.numbered(path):
        try:
            candidate.mkdir()
        except FileExistsError:
            continue
        return candidate
    raise AssertionError("unreachable: store.numbered never ends")


def _group(
    index: int,
    item: dict[str, Any],
    rollouts: list[Rollout],
    temperature: float,
    began: tuple[float, float],
) -> dict[str, Any]:
    """An example's rollouts in the groups form the eval files are made from (no tokens: the OpenAI API's
    messages)."""
    return {
        "scores": [float(r.reward) for r in rollouts],
        "messages": [r.messages for r in rollouts],
        "tools": next((r.tools for r in rollouts if r.tools), None),
        "generation_params": {"temperature": temperature},
        META: {
            "item": index,
            "example_id": item.get("example_id", index),
            "metrics": {
                name: [float(v) for v in values] for name, values in metrics_of(rollouts).items()
            },
            "turns": [r.turns for r in rollouts],
            "finish_reasons": [r.finish_reason for r in rollouts],
            "started_at": began[0],
            "elapsed_s": round(time.monotonic() - began[1], 4),
        },
    }


def _failure(rollouts: list[Rollout]) -> str | None:
    """Why an example's rollouts are no score (an endpoint error, a reward function that raised, a value that is no
    finite number), or None."""
    for rollout in rollouts:
        if rollout.error:
            return rollout.error
        if rollout.reward_failure:
            return "reward function '{}' failed: {}".format(*rollout.reward_failure)
    bad = unscorable([r.reward for r in rollouts], metrics_of(rollouts))
    return None if bad is None else "{} failed: {}".format(*bad)
