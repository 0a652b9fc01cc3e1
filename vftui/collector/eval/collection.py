"""eval (Atropos ``evaluate``): the eval split's examples, k rollouts each, scored as an evaluation.

It collects as sft does (every request through one adaptive limit, as many examples in flight
as it keeps busy, the run's crash-safe jsonl, resumable), from the environment's eval split,
and keeps the figures of ``eval_stats`` over the examples done: an ``EvalReport`` once a second
and at the end, when the results are also written in verifiers' eval format and through
atroposlib's ``evaluate_log`` (``eval.files``). An example whose group fails to score is an
error: done, counted beside the figures, never replaced by another example.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from vftui.collector.envs.base import Environment
from vftui.collector.eval import files
from vftui.collector.modes import Driver, ModeContext, ProcessDriver
from vftui.collector.sft.in_flight import STATS_EVERY_S, InFlight
from vftui.config import RunConfig
from vftui.errors import RunFailed, UserError
from vftui.events import EvalReport, Event, GroupCollected, GroupDropped
from vftui.figures.eval_stats import EvalTally
from vftui.run_files.shards import share_of

logger = logging.getLogger(__name__)


class EvalCollection(InFlight):
    """sft's groups in flight on the eval split, with its own items, tally and end."""

    def __init__(
        self,
        config: RunConfig,
        emit: Callable[[Event], None],
        on_rate_limit: Callable[[int, float], None],
    ):
        super().__init__(config, emit, on_rate_limit)
        self.tally = EvalTally(config.group_size, config.pass_threshold)
        self._examples = 0
        self._started = (
            time.time(),
            time.monotonic(),
        )  # a wall stamp, and a clock the wall's jumps cannot move

    def check(self, environment: Environment) -> None:
        """Take the eval split; an endless one needs a number of examples."""
        split = environment.use_eval_split()
        if split is None and "split" in self.config.env_args:  # a v1 taskset's split, by its config
            split = f"the split {self.config.env_args['split']!r} its --env-args name"
        elif split is None:
            logger.warning(
                "%s has no eval split of its own: evaluating its tasks as its config selects them "
                "(--env-args sets a v1 taskset's split)",
                environment.env_id,
            )
            split = "its tasks as configured"
        size = environment.size
        if size is None and self.config.num_examples is None:
            raise UserError(
                f"environment '{environment.env_id}' has no end; evaluate it with --num-examples N"
            )
        examples = min(n for n in (self.config.num_examples, size) if n is not None)
        if (
            size is not None
            and self.config.num_examples is not None
            and size < self.config.num_examples
        ):
            logger.warning(
                "--num-examples %d: %s holds %d examples, so the eval covers those %d",
                self.config.num_examples,
                environment.env_id,
                size,
                size,
            )
        shard = self.config.own_shard  # --num-examples counts over all the shards
        self._examples = share_of(shard, examples, "examples")
        held = max(
            (shard.position(item) + 1 for item in [*self.tally.items, *self.tally.errors]),
            default=0,
        )
        if held > self._examples:  # a resume never leaves out of the figures what its file holds
            logger.warning(
                "this eval holds %d examples, more than the %d asked for: its figures and files cover "
                "all %d",
                held,
                self._examples,
                held,
            )
            self._examples = held
        logger.info(
            "evaluating %d examples of %s from %s%s",
            self._examples,
            environment.env_id,
            split,
            f" (shard {shard} of the first {examples})" if self.config.shard is not None else "",
        )

    def groups_total(self, environment: Environment) -> int:
        return self._examples

    @property
    def item_range(self) -> int:
        """The examples it evaluates, each once: one whose group fails to score is an error, never replaced."""
        return self._examples

    def env_settings(self, groups_left: int) -> dict[str, Any]:
        return {**super().env_settings(groups_left), "steps_per_eval": 0}

    def observe(self, event: Event) -> None:
        if isinstance(event, GroupCollected):
            self.tally.add(event.item, event.scores, event.metrics)
        elif isinstance(event, GroupDropped):  # its example's result is an error
            self.tally.fail(event.item, event.reason)

    def report(self, final: bool = False) -> EvalReport:
        """The figures over the examples done, each a mean with its 95% interval."""
        return self.tally.report(self._examples, final)

    async def collect(self, context: ModeContext, driver: ProcessDriver) -> None:
        """Groups in flight as sft collects them, with the report once a second; an eval that scored none of
        its examples measured nothing, so it fails (its files still say why, example by example)."""
        ticker = asyncio.ensure_future(self._report_every_second())
        try:
            await super().collect(context, driver)
        finally:
            ticker.cancel()
        if self.tally.errors and not self.tally.items:
            raise RunFailed(
                f"no example was scored: all {len(self.tally.errors)} failed to score (each one's error "
                "is in the eval's metadata.json)"
            )

    async def finish(self, context: ModeContext, driver: Driver) -> None:
        """The final figures and the results files, from everything the jsonl holds: after a stop, a failure,
        or a resume that found every example done (its gates are checked on these figures)."""
        final = self.report(final=True)
        self._emit(final)
        await self._write(context, driver, final)

    async def _write(self, context: ModeContext, driver: Driver, report: EvalReport) -> None:
        run_files = context.files
        model = context.sampling.endpoint.model
        wall, clock = self._started
        span = (
            wall,
            wall + time.monotonic() - clock,
        )  # the eval's duration, whatever the wall clock did meanwhile
        await files.write(
            driver, report, self.tally.errors, self._run_description(model), model, span, run_files
        )
        logger.info("eval results written to %s", run_files.eval_dir)

    def _run_description(self, model: str) -> dict[str, object]:
        cfg = self.config
        return {
            "env_id": cfg.env,
            "env_args": cfg.env_args,
            "model": model,
            "base_url": cfg.endpoint,
            "sampling_args": {"temperature": cfg.start_temperature, "max_tokens": cfg.max_tokens},
        }

    async def _report_every_second(self) -> None:
        while True:
            await asyncio.sleep(STATS_EVERY_S)
            self._emit(self.report())
