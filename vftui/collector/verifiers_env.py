"""VerifiersEnv: the Atropos BaseEnv that collects groups from a verifiers environment.

It runs inside atroposlib's own machinery: its per-group methods (``collect_trajectories``,
``postprocess_histories``, ``handle_send_to_api``) under vftui's sft pool, with many groups
in flight, and ``env_manager`` for rl, where groups go to the trajectory API (its retries
and re-registration are ``rl.trajectory_link.TrajectoryApiLink``). What differs by mode,
how a group's rollouts are got and tokenized, is its ``rollouts`` (``modes.Rollouts``); the
environment is driven through ``envs.base.Environment``, whatever its kind. It is the one place
that knows atroposlib's objects: the modes drive it through the ``modes`` drivers it implements
(``ProcessDriver``, ``EvalLog``, ``ServeDriver``). Instead of
globals it takes ``Hooks``: the run's group gate (pause, stop), its temperature, an event sink,
the item ledger and where to keep its checkpoint. Without them it behaves like
atroposlib's own environments and runs under atroposlib's CLI:
``python -m vftui.collector.verifiers_env process --env.vf_env_name alphabet-sort ...``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import string
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from atroposlib.envs.base import APIServerConfig, BaseEnv, BaseEnvConfig, ScoredDataGroup

from vftui import stats
from vftui.collector.backoff import backoff_seconds
from vftui.collector.endpoint import auth_errors
from vftui.collector.envs import loader
from vftui.collector.envs.base import Rollout, metrics_of, unscorable
from vftui.collector.envs.messages import template_messages
from vftui.collector.gate import GroupGate
from vftui.collector.modes import Endpoint, Rollouts, Sampling, ServeDriver
from vftui.collector.rl import managed
from vftui.collector.rl.rollouts import RlRollouts
from vftui.collector.rl.trajectory_link import TrajectoryApiLink
from vftui.collector.sft.rollouts import SftRollouts
from vftui.collector.tokens import ChatTemplateTokenizer, TemplateMismatch
from vftui.collector.wandb_rows import OwnRows
from vftui.errors import RunFailed
from vftui.events import EndpointTrouble, Event, GroupCollected, GroupDropped, MetricsWindow
from vftui.group_format import META, trained_tokens
from vftui.run_files import store
from vftui.run_files.ledger import ItemLedger
from vftui.run_files.shards import WHOLE, Shard

logger = logging.getLogger(__name__)
CLAIMED = "_vftui_claimed"  # the item's group slot was claimed when it was handed out
JUDGED = "_vftui_judged"  # its group failed to score: dropped, with the reason


class VfEnvConfig(BaseEnvConfig):
    vf_env_name: str = ""
    env_args: str | dict[str, Any] = "{}"

    def get_env_args(self) -> dict[str, Any]:
        """env_args as a dict (it may be given as a JSON object string or a dict)."""
        if isinstance(self.env_args, dict):
            return self.env_args
        return json.loads(self.env_args)


@dataclass
class Hooks:
    """What a vftui run plugs into the env; every field has a harmless default."""

    gate: GroupGate | None = None
    temperature: Callable[[], float] = lambda: 1.0
    """What a group started now is sampled at (the run's controls set it)."""
    emit: Callable[[Event], None] = lambda event: None
    checkpoint_path: Path | None = None
    ledger: ItemLedger = field(default_factory=ItemLedger)
    groups_before: int = 0
    shard: Shard = WHOLE
    """The items the run collects; the ledger counts positions in it."""
    max_retries: int = 5
    on_tokens: Callable[[int], None] = lambda count: None
    """sft: generated tokens of each written group, for tokens/s."""
    extra_meta: dict[str, Any] = field(default_factory=dict)
    health_metrics: Callable[[], dict[str, float]] = dict
    """The run's health figures for each wandb log (``collector.health``)."""
    drops_are_done: bool = False
    """eval: a dropped group is its example's result (an error), done: its place is never taken by another item."""
    elapsed_before: float = 0.0
    """A resumed run's seconds in its earlier sessions: each checkpoint counts them with this one's."""


class VerifiersEnv(TrajectoryApiLink, BaseEnv):
    name = "verifiers"
    env_config_cls = VfEnvConfig

    def __init__(
        self,
        config: VfEnvConfig,
        server_configs: list[APIServerConfig],
        slurm: bool = False,
        testing: bool = False,
        *,
        sampling: Sampling | None = None,
        rollouts: Callable[[Sampling, ServeDriver], Rollouts] | None = None,
        hooks: Hooks | None = None,
    ) -> None:
        super().__init__(config, server_configs, slurm, testing)
        self.hooks = hooks or Hooks()
        self.process_mode = False  # atroposlib's process command sets it; see ``rollouts``
        self._sampling = sampling
        self._evaluate: Callable[[int], Awaitable[dict[str, float]]] | None = None
        self._eval_rows = OwnRows()  # rl: each eval's figures, a wandb row of its own
        self._serving: asyncio.Task | None = (
            None  # rl: the task of ``serve``, which a group's failure ends
        )
        self._failure: RunFailed | None = None
        if sampling is None:  # atroposlib's own CLI: loaded from the config
            environment = loader.load(config.vf_env_name, config.get_env_args())
        else:
            environment = sampling.environment
        self.environment = environment
        self.reward_func_names = environment.reward_function_names
        self.max_turns = environment.max_turns
        self._failures_in_a_row = 0
        self.trainer_tokenizer = ChatTemplateTokenizer(self.tokenizer)
        self.window = stats.Accumulator()
        self._score_range: tuple[float, float] | None = (
            None  # of every scored group, for drop reasons
        )
        self.groups_written = self.hooks.groups_before
        self.ledger = self.hooks.ledger
        self._started = time.monotonic()
        logger.info(
            "verifiers env %s, reward functions %s", config.vf_env_name, self.reward_func_names
        )
        # a vftui run's mode makes them now (rl: its tool parser, its evals); atroposlib's CLI on first use
        self._rollouts = rollouts(self.sampling, self) if rollouts is not None else None

    @property
    def sampling(self) -> Sampling:
        """What groups are sampled with: a vftui run hands it in; under atroposlib's own CLI, from its configs."""
        if self._sampling is None:
            first = self.server.servers[0].config
            endpoint = Endpoint(
                tuple(server.config.base_url for server in self.server.servers),
                first.model_name,
                first.api_key,
                first.timeout,
            )
            self._sampling = Sampling(
                endpoint, self.environment, self.config.group_size, self.config.max_token_length
            )
        return self._sampling

    @property
    def rollouts(self) -> Rollouts:
        """The mode's: a vftui run's mode made them; under atroposlib's own CLI, ``process_mode`` says which."""
        if self._rollouts is None:
            sampling = self.sampling
            self._rollouts = (
                SftRollouts(sampling) if self.process_mode else RlRollouts(sampling, self)
            )
        return self._rollouts

    @classmethod
    def config_init(cls) -> tuple[VfEnvConfig, list[APIServerConfig]]:
        env_config = VfEnvConfig(
            tokenizer_name="Qwen/Qwen2.5-1.5B-Instruct",
            group_size=8,
            use_wandb=True,
            rollout_server_url="http://localhost:8000",
            total_steps=1000,
            batch_size=4,
            steps_per_eval=100,
            max_token_length=2048,
            wandb_name="verifiers",
        )
        server_configs = [
            APIServerConfig(
                model_name="Qwen/Qwen2.5-1.5B-Instruct",
                base_url="http://localhost:9001/v1",
                api_key="x",
                server_type="openai",
                health_check=False,
            )
        ]
        return env_config, server_configs

    # -- dataset ----------------------------------------------------------------------

    async def setup(self) -> None:
        return None  # the environment hands its items out one by one (some never end)

    async def get_next_item(self) -> dict[str, Any] | None:
        gate = self.hooks.gate
        if gate is not None and not await gate.claim_group():
            return None
        position = self.ledger.take()
        if position is None:  # an eval's range is done or in flight
            self._group_done(done=False)
            return None
        index = self.hooks.shard.item(position)
        return {**self.environment.item(index), "_item": index, CLAIMED: gate is not None}

    async def evaluate(self, *args, **kwargs) -> dict[str, float]:
        """atroposlib calls it every ``steps_per_eval`` trainer steps: the run's evals, if it asked for them."""
        if self._evaluate is None:
            return {}
        return await self._evaluate(int(self.status_dict.get("current_step", self.curr_step)))

    def save_checkpoint(self, step, data=None) -> None:
        data = dict(data or {})
        data["iter"] = self.ledger.next_item
        data.update(self.ledger.to_json())
        if self.hooks.checkpoint_path is None:
            super().save_checkpoint(step, data)
            return
        data.update(step=step, groups=self.groups_written, saved_at=time.time())
        # every session's seconds: a run killed after its resume keeps its earlier ones (the end says its own)
        data.setdefault(
            "elapsed_s", round(self.hooks.elapsed_before + time.monotonic() - self._started, 3)
        )
        store.write_json_atomic(self.hooks.checkpoint_path, data)

    # -- collecting -------------------------------------------------------------------

    @property
    def temperature(self) -> float:
        return self.hooks.temperature()

    async def collect_trajectories(
        self, item: dict[str, Any]
    ) -> tuple[ScoredDataGroup | None, list]:
        gate = self.hooks.gate
        if gate is not None and not item.pop(CLAIMED, False) and not gate.begin_group():
            return None, []
        try:
            group = await self._collect_group(item)
        except RunFailed as e:
            self._group_done(done=False)
            if (serving := self._serving) is None:
                raise
            self._fail(e, serving)
            return None, []
        except BaseException:
            self._group_done(done=False)
            raise
        if group is None:
            self._group_done(done=self.hooks.drops_are_done and item.get(JUDGED, False))
        return group, []

    async def _rollouts_with_retries(
        self, item: dict[str, Any], temperature: float
    ) -> list[Rollout] | None:
        """One group's rollouts, retried with backoff; None when a stop cut the retries."""
        group_size = self.config.group_size
        time_limit = self.rollouts.time_limit_s()
        attempts = self.hooks.max_retries + 1
        for attempt in range(1, attempts + 1):
            try:
                rollouts = await asyncio.wait_for(
                    self.rollouts.attempt(item, temperature), time_limit
                )
                errors = [r.error for r in rollouts if r.error]
                if not errors and len(rollouts) == group_size:
                    return rollouts
                problem = (
                    errors[0] if errors else f"{len(rollouts)} of {group_size} rollouts returned"
                )
            except auth_errors() as e:
                raise RunFailed(
                    f"the endpoint rejected the request ({type(e).__name__}): check the API key"
                ) from e
            except RunFailed:  # what the rollouts ran on is gone (an env server): no retry helps
                raise
            except TimeoutError:
                problem = (
                    f"the group timed out after {time_limit:g} s (is the inference server up?)"
                )
            except Exception as e:  # noqa: BLE001 - any endpoint failure is retried, then reported
                problem = f"{type(e).__name__}: {e}"
            if attempt == attempts:
                raise RunFailed(
                    f"the endpoint failed {attempts} times in a row; last error: {problem}"
                )
            if not await self._back_off(attempt, attempts, problem, "endpoint"):
                return None
        return None

    async def _back_off(self, attempt: int, attempts: int, problem: str, service: str) -> bool:
        """Report a failed attempt and wait before the next; False when a stop cut the wait."""
        delay = backoff_seconds(attempt)
        self.hooks.emit(EndpointTrouble(attempt, attempts, problem, round(delay, 2), service))
        logger.info(
            "%s attempt %d/%d failed: %s", service, attempt, attempts, problem
        )  # the event is the warning
        if self.hooks.gate is None:
            await asyncio.sleep(delay)
            return True
        await self.hooks.gate.sleep(delay)
        return not self.hooks.gate.stopping

    async def _collect_group(self, item: dict[str, Any]) -> ScoredDataGroup | None:
        """One group as atroposlib's ``ScoredDataGroup``, or None when it cannot be training data.

        Its rollouts are retried as a whole on endpoint errors; a reward function that failed,
        a reward that is not finite or tokens that do not match the generation drop it instead
        (``_group_failed``), with the reason.
        """
        started, clock = time.time(), time.monotonic()
        temperature = self.temperature
        began = self.rollouts.group_meta()
        rollouts = await self._rollouts_with_retries(item, temperature)
        if rollouts is None:
            return None
        if failure := next((r.reward_failure for r in rollouts if r.reward_failure), None):
            self._group_failed(item, f"reward function '{failure[0]}'", failure[1])
            return None
        try:
            group, tokens_meta = self._tokenized(rollouts)
        except TemplateMismatch as e:  # scored, but the trainer would get tokens it was not sent
            self._group_failed(
                item,
                "building the token sequence",
                str(e),
                [r.reward for r in rollouts],
                [r.turns for r in rollouts],
            )
            return None
        metrics = metrics_of(rollouts)
        if (
            bad := unscorable(group["scores"], metrics)
        ) is not None:  # a rubric of its own, unwatched
            self._group_failed(item, *bad)
            return None
        group["scores"] = [
            float(s) for s in group["scores"]
        ]  # a numpy float is a score, and JSON as a float
        metrics = {name: [float(v) for v in values] for name, values in metrics.items()}
        self._failures_in_a_row = 0
        self._score_range = stats.widen(self._score_range, group["scores"])
        group["generation_params"] = {
            "temperature": temperature,
            "max_tokens": self.config.max_token_length,
        }
        group[META] = {
            "env": self.config.vf_env_name,
            "item": item["_item"],
            "example_id": item.get("example_id"),
            "metrics": metrics,
            "turns": [r.turns for r in rollouts],
            "finish_reasons": [r.finish_reason for r in rollouts],
            **tokens_meta,
            "started_at": started,
            "elapsed_s": round(time.monotonic() - clock, 4),
            **began,
            **self.hooks.extra_meta,
        }
        return group

    def _tokenized(self, rollouts: list[Rollout]) -> tuple[ScoredDataGroup, dict[str, Any]]:
        """The group's tokens, masks (and logprobs), scores and messages, with the tools the model was sent."""
        group: ScoredDataGroup = {"tokens": [], "masks": [], "scores": [], "messages": []}
        logprobs, stripped = [], []
        for rollout in rollouts:
            if rollout.tools:
                group.setdefault(
                    "tools", rollout.tools
                )  # the schemas the model was sent, for SFT tools
            tokenizer = self.trainer_tokenizer.with_tools(
                rollout.tools
            )  # the trained prompt shows them too
            tokenized = self.rollouts.tokenize(
                tokenizer, template_messages(rollout.messages), rollout
            )
            group["tokens"].append(tokenized.tokens)
            group["masks"].append(tokenized.masks)
            group["scores"].append(rollout.reward)
            group["messages"].append(rollout.messages)
            logprobs.append(tokenized.logprobs)
            stripped.append(tokenized.stripped_end_of_turn)
        if self.rollouts.logprobs:
            group["inference_logprobs"] = logprobs
        return group, {"stripped_end_of_turn": stripped}

    async def handle_send_to_api(
        self, scored_data, item=None, do_send_to_api=True, abort_on_any_max_length_exceeded=True
    ):
        lines_before = getattr(self.jsonl_writer, "lines_written", None)
        written = done = False
        try:
            await super().handle_send_to_api(
                scored_data, item, do_send_to_api, abort_on_any_max_length_exceeded
            )
            lines_after = getattr(self.jsonl_writer, "lines_written", None)
            written = lines_before is None or lines_after != lines_before
            if written and isinstance(scored_data, dict):
                self._record(scored_data)
            elif isinstance(scored_data, dict):
                meta = scored_data[META]
                dropped = GroupDropped(
                    meta["item"],
                    self._drop_reason(scored_data),
                    list(scored_data["scores"]),
                    meta["metrics"],
                    meta["turns"],
                )
                self.window.add(dropped)
                self.hooks.emit(
                    dropped
                )  # into the drop log first: the checkpoint never claims more than it holds
                self._item_done(meta["item"])  # seen and judged: a resume does not collect it again
                done = self.hooks.drops_are_done
        finally:
            self._group_done(done or written)

    def _item_done(self, item: int) -> None:
        """Written, dropped or failed: done in the ledger and in the checkpoint."""
        self.ledger.mark_done(self.hooks.shard.position(item))
        if self.hooks.checkpoint_path is not None:
            self.save_checkpoint(self.curr_step)

    def _drop_reason(self, group: ScoredDataGroup) -> str:
        if self.config.ensure_scores_are_not_same and len(set(group["scores"])) == 1:
            return stats.identical_kind(group["scores"][0], self._score_range)
        if self.max_token_len > 0 and any(len(t) >= self.max_token_len for t in group["tokens"]):
            return f"a sequence reached the trainer's max_token_len ({self.max_token_len})"
        return "malformed group"

    def _record(self, group: ScoredDataGroup) -> None:
        """A group is on disk: checkpoint it, count it in the window, announce it."""
        self.groups_written += 1
        meta = group[META]
        self._item_done(meta["item"])
        self.hooks.on_tokens(sum(map(trained_tokens, group["masks"])))
        event = GroupCollected(
            index=self.groups_written,
            item=meta["item"],
            example_id=meta["example_id"],
            scores=list(group["scores"]),
            metrics=meta["metrics"],
            turns=meta["turns"],
            tokens=group["tokens"],
            masks=group["masks"],
            messages=group["messages"],
            finish_reasons=meta["finish_reasons"],
            temperature=group["generation_params"]["temperature"],
            started_at=meta["started_at"],
            elapsed_s=meta["elapsed_s"],
            logprobs=group.get("inference_logprobs"),
        )
        self.window.add(event)
        self.hooks.emit(event)

    def _group_failed(
        self,
        item: dict[str, Any],
        what: str,
        error: str,
        scores: list[float] | None = None,
        turns: list[int] | None = None,
    ) -> None:
        """A group that cannot be training data (a reward function raised, which verifiers scores 0;
        a reward that is not finite; tokens that do not match the generation): report and drop it.
        The same failure in more than --retries groups in a row fails the run: it is systematic."""
        self._failures_in_a_row += 1
        if self._failures_in_a_row > self.hooks.max_retries:
            raise RunFailed(
                f"{what} failed in {self._failures_in_a_row} groups in a row; last error: {error}"
            )
        self.hooks.emit(
            GroupDropped(item["_item"], f"{what} failed: {error}", scores or [], {}, turns or [])
        )
        self._item_done(item["_item"])
        item[JUDGED] = True

    def release_unstarted(self, item: dict[str, Any]) -> None:
        """Give back the slot of a claimed item whose group never started (cancelled first)."""
        if item.pop(CLAIMED, False):
            self._group_done(done=False)

    def _group_done(self, done: bool) -> None:
        """The group left the flight: written (or, in an eval, judged an error), or to be collected again."""
        if self.hooks.gate is not None:
            self.hooks.gate.group_finished(done)

    # -- metrics ------------------------------------------------------------------------

    async def wandb_log(self, wandb_metrics: dict | None = None) -> None:
        """The reference's verifiers metrics for this window, then atroposlib's own."""
        wandb_metrics = dict(wandb_metrics or {})
        window = self.window.metrics()
        self.window = stats.Accumulator()
        if window:
            wandb_metrics.update(window)
            self.hooks.emit(MetricsWindow(self.curr_step, window))
        wandb_metrics.update(self.hooks.health_metrics())
        await super().wandb_log(wandb_metrics)
        if (row := self._eval_rows.take(self.curr_step)) is not None:
            self._log_row(row, self.curr_step)

    def log_row(self, figures: dict[str, float]) -> None:
        """``figures`` in a wandb row of their own, with the env's next row (``wandb_rows``)."""
        self._eval_rows.add(figures)

    def _log_row(self, figures: dict[str, float], step: int) -> None:
        import wandb

        if wandb.run is not None:  # under the names given, not atroposlib's prefixed ones
            wandb.log(figures, step=step)

    # -- the drivers the modes see (``modes``) ------------------------------------------

    async def begin(self) -> None:
        """As atroposlib's process manager starts (sft, eval): its setup, wandb, the step count."""
        await self.setup()
        if self.config.use_wandb:
            self._start_wandb()
        self.curr_step = 0

    def _start_wandb(self) -> None:
        """wandb as atroposlib's process manager starts it: one run named after the env and the date."""
        import wandb

        suffix = "".join(random.choices(string.ascii_lowercase, k=6))
        wandb.init(
            project=self.wandb_project,
            name=f"{self.name}-{datetime.now():%Y-%m-%d}-{suffix}",
            group=self.wandb_group,
            config=self.config.model_dump(),
        )

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
                for step, row in self._eval_rows.rest(self.curr_step):
                    self._log_row(row, step)
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

    def _fail(self, failure: RunFailed, serving: asyncio.Task) -> None:
        """A group's failure ends the serve loop, ``serving`` (the first one says why)."""
        if self._failure is None:
            self._failure = failure
            serving.cancel()

    def servers(self) -> Sequence[Any]:
        return self.server.servers

    def recorded_client(self) -> AbstractAsyncContextManager[tuple[Any, Any]]:
        return managed.recorded_client(self.server, self.tokenizer)

    def use_tool_parser(self, name: str | None) -> None:
        self.server.tool_parser = name

    def evaluate_with(self, hook: Callable[[int], Awaitable[dict[str, float]]]) -> None:
        self._evaluate = hook


if __name__ == "__main__":
    VerifiersEnv.cli()
