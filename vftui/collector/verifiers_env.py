"""VerifiersEnv: the Atropos BaseEnv that collects groups from a verifiers environment.

It runs inside atroposlib's own machinery: its per-group methods (``collect_trajectories``,
``postprocess_histories``, ``handle_send_to_api``) under vftui's sft pool, with many groups
in flight, and ``env_manager`` for rl, where groups go to the trajectory API (its retries
and re-registration are ``rl.trajectory_link.TrajectoryApiLink``). What differs by mode,
how a group's rollouts are got and tokenized, is its ``rollouts`` (``modes.Rollouts``); the
environment is driven through ``envs.base.Environment``, whatever its kind. It is the one place
that knows atroposlib's objects: the modes drive it through the ``modes`` drivers it implements
(``ProcessDriver``, ``EvalLog``, ``ServeDriver``: the ``env_drivers`` mixin). What it carries
for each group it holds as objects of their own: ``group_retries`` (rollouts tried again with
back-off), ``group_assembly`` (the ScoredDataGroup, or the drop and its reason) and
``wandb_window`` (what its wandb rows add). Instead of globals it takes ``Hooks``: the run's group
gate (pause, stop), its temperature, an event sink, the item ledger and where to keep its
checkpoint. Without them it behaves like
atroposlib's own environments and runs under atroposlib's CLI:
``python -m vftui.collector.verifiers_env process --env.vf_env_name alphabet-sort ...``.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from atroposlib.envs.base import APIServerConfig, BaseEnv, BaseEnvConfig, ScoredDataGroup

from vftui.collector.env_drivers import EnvDrivers
from vftui.collector.envs import loader
from vftui.collector.gate import GroupGate
from vftui.collector.group_assembly import GroupAssembly, collected
from vftui.collector.group_retries import GroupRetries
from vftui.collector.modes import Endpoint, Rollouts, Sampling, ServeDriver
from vftui.collector.rl.rollouts import RlRollouts
from vftui.collector.rl.trajectory_link import TrajectoryApiLink
from vftui.collector.sft.rollouts import SftRollouts
from vftui.collector.tokens import ChatTemplateTokenizer
from vftui.collector.wandb_window import WandbWindow
from vftui.errors import RunFailed
from vftui.events import Event
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


class VerifiersEnv(EnvDrivers, TrajectoryApiLink, BaseEnv):
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
        self.hooks = hooks = hooks or Hooks()
        self.process_mode = False  # atroposlib's process command sets it; see ``rollouts``
        self._sampling = sampling
        if sampling is None:  # atroposlib's own CLI: loaded from the config
            environment = loader.load(config.vf_env_name, config.get_env_args())
        else:
            environment = sampling.environment
        self.environment = environment
        self.reward_func_names = environment.reward_function_names
        self.max_turns = environment.max_turns
        self.retries = GroupRetries(hooks.max_retries, hooks.emit, hooks.gate)
        self.groups = GroupAssembly(
            config,
            config.vf_env_name,
            ChatTemplateTokenizer(self.tokenizer),
            emit=hooks.emit,
            max_retries=hooks.max_retries,
            extra_meta=hooks.extra_meta,
        )
        self.wandb_window = WandbWindow(hooks.emit, hooks.health_metrics)
        self.groups_written = hooks.groups_before
        self.ledger = hooks.ledger
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
            if not self.stop_serving(e):
                raise
            return None, []
        except BaseException:
            self._group_done(done=False)
            raise
        if group is None:
            self._group_done(done=self.hooks.drops_are_done and item.get(JUDGED, False))
        return group, []

    async def _collect_group(self, item: dict[str, Any]) -> ScoredDataGroup | None:
        """One group as atroposlib's ``ScoredDataGroup``, or None when it cannot be training data.

        Its rollouts are retried as a whole on endpoint errors (``retries``); a reward function that
        failed, a reward that is not finite or tokens that do not match the generation drop it
        instead (``groups``), with the reason: that item is judged, done.
        """
        started = time.time(), time.monotonic()
        temperature = self.temperature
        began = self.rollouts.group_meta()
        rollouts = await self.retries.rollouts(
            self.rollouts, item, temperature, self.config.group_size
        )
        if rollouts is None:
            return None
        group = self.groups.scored(item, rollouts, self.rollouts, temperature, started, began)
        if group is None:
            self._item_done(item["_item"])
            item[JUDGED] = True
        return group

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
                dropped = self.groups.dropped(scored_data, self.max_token_len)
                self.wandb_window.add(dropped)
                self.hooks.emit(
                    dropped
                )  # into the drop log first: the checkpoint never claims more than it holds
                self._item_done(dropped.item)  # seen and judged: a resume does not collect it again
                done = self.hooks.drops_are_done
        finally:
            self._group_done(done or written)

    def _item_done(self, item: int) -> None:
        """Written, dropped or failed: done in the ledger and in the checkpoint."""
        self.ledger.mark_done(self.hooks.shard.position(item))
        if self.hooks.checkpoint_path is not None:
            self.save_checkpoint(self.curr_step)

    def _record(self, group: ScoredDataGroup) -> None:
        """A group is on disk: checkpoint it, count it in the window, announce it."""
        self.groups_written += 1
        self._item_done(group[META]["item"])
        self.hooks.on_tokens(sum(map(trained_tokens, group["masks"])))
        event = collected(group, self.groups_written)
        self.wandb_window.add(event)
        self.hooks.emit(event)

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
        wandb_metrics.update(self.wandb_window.metrics(self.curr_step))
        await super().wandb_log(wandb_metrics)
        self.wandb_window.after_row(self.curr_step)


if __name__ == "__main__":
    VerifiersEnv.cli()
