"""The drivers the modes see (``modes.ProcessDriver``, ``EvalLog``, ``ServeDriver``), on the env.

A mixin placed first in ``VerifiersEnv``'s bases: each driver method is a step of atroposlib's own
(its process manager's, ``evaluate_log``, ``env_manager``) taken on the env, so the modes never
touch atroposlib's objects. It relies on the env's ``hooks``, ``wandb_window`` and
its per-group methods; a group's failure while serving ends the serve loop (``stop_serving``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vftui.collector.rl import managed
from vftui.collector.wandb_window import WandbWindow, start_run
from vftui.errors import RunFailed

# the env's lines keep the logger name they always had: LogRecord events carry it
logger = logging.getLogger("vftui.collector.verifiers_env")

if TYPE_CHECKING:  # what the mixin is placed before: its attributes are the env's (see above)
    from atroposlib.envs.base import BaseEnv as _Env
else:
    _Env = object


class EnvDrivers(_Env):
    wandb_window: WandbWindow
    eval_runner: asyncio.Task | None  # atroposlib's: set by BaseEnv
    _evaluate: Callable[[int], Awaitable[dict[str, float]]] | None = None  # rl: the run's evals
    _serving: asyncio.Task | None = None  # rl: the task of ``serve``, which a group's failure ends
    _failure: RunFailed | None = None

    # -- sft, eval: atroposlib's process manager, a group at a time ------------------------------

    async def begin(self) -> None:
        """As atroposlib's process manager starts (sft, eval): its setup, wandb, the step count."""
        await self.setup()
        if self.config.use_wandb:
            start_run(self.name, self.wandb_project, self.wandb_group, self.config.model_dump())
        self.curr_step = 0

    async def next_item(self) -> dict[str, Any] | None:
        return await self.get_next_item()

    async def process(self, item: dict[str, Any]) -> None:
        """One group through atroposlib's per-group steps, as its process manager takes them."""
        group, _ = await self.collect_trajectories(item)
        if group:
            processed = await self.postprocess_histories(group)
            await self.handle_send_to_api(
                processed, item, do_send_to_api=False, abort_on_any_max_length_exceeded=False
            )
            await self.wandb_log()
            self.curr_step += 1

    def release(self, item: dict[str, Any]) -> None:
        self.release_unstarted(item)

    def end(self) -> None:
        self.jsonl_writer.close()

    async def log_eval(
        self,
        folder: Path,
        metrics: dict[str, Any],
        samples: list[dict[str, Any]],
        model: str,
        span: tuple[float, float],
        temperature: float | None = None,
    ) -> None:
        """atroposlib's own eval files in ``folder`` (its ``evaluate_log`` writes with open()); ``temperature``
        the eval's where it is not the run's (an rl run's evals)."""
        self.config.data_dir_to_save_evals = str(folder)
        await self.evaluate_log(
            metrics,
            task_name=f"{self.config.vf_env_name}_eval",
            model_name=model,
            start_time=span[0],
            end_time=span[1],
            generation_parameters={
                "temperature": self.temperature if temperature is None else temperature
            },
            samples=samples,
            verbose=False,
        )

    # -- rl: atroposlib's serve loop ----------------------------------------------------------

    async def serve(self) -> None:
        """atroposlib's serve loop (rl) until cancelled; a group's failure ends it and is raised (the loop
        itself would log and drop it)."""
        self._serving = asyncio.current_task()
        try:
            await self.env_manager()
        except asyncio.CancelledError:
            if self._failure is None:
                raise
        finally:
            try:
                await self._eval_in_flight()
            finally:  # a second stop cancelled it: the evals done before still get their rows
                self.wandb_window.rows_left(self.curr_step)
        if self._failure is not None:
            raise self._failure

    async def _eval_in_flight(self) -> None:
        """An eval the serve loop started runs as a task of its own, which the loop's end leaves running:
        its figures are measured, so the run waits for them like a group in flight (a second stop, or the
        stop's grace running out, cancels it with the serve loop)."""
        runner = self.eval_runner
        if runner is None or runner.done():
            return
        logger.info("finishing the eval in flight")
        try:
            await runner
        except asyncio.CancelledError:  # a second stop: the eval goes with the serve loop
            runner.cancel()
            if self._failure is None:
                raise  # else the group's failure is what ends the run, raised by serve
        except Exception as e:  # noqa: BLE001 - a failed eval is no reason to lose the run's end
            logger.warning("the eval in flight at the run's end failed: %s", e)

    def stop_serving(self, failure: RunFailed) -> bool:
        """A group's failure ends the serve loop (the first one says why); False when none is serving,
        so the group raises it itself."""
        if (serving := self._serving) is None:
            return False
        if self._failure is None:
            self._failure = failure
            serving.cancel()
        return True

    def servers(self) -> Sequence[Any]:
        return self.server.servers

    def log_row(self, figures: dict[str, float]) -> None:
        """``figures`` in a wandb row of their own, with the env's next row (``wandb_rows``)."""
        self.wandb_window.own_row(figures)

    def recorded_client(self) -> AbstractAsyncContextManager[tuple[Any, Any]]:
        return managed.recorded_client(self.server, self.tokenizer)

    def use_tool_parser(self, name: str | None) -> None:
        self.server.tool_parser = name

    def evaluate_with(self, hook: Callable[[int], Awaitable[dict[str, float]]]) -> None:
        self._evaluate = hook
