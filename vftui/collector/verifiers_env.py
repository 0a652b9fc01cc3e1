"""VerifiersEnv: the Atropos BaseEnv that collects groups from a verifiers environment.

It runs inside atroposlib's own machinery: its per-group methods (``collect_trajectories``,
``postprocess_histories``, ``handle_send_to_api``) under vftui's ``group_pool`` for sft
(process) mode, with many groups in flight, and ``env_manager`` for rl (serve) mode, where
each rollout goes through a ManagedServer and groups go to the trajectory API (its retries
and re-registration are ``trajectory_link.TrajectoryApiLink``). Instead of globals it takes
``Hooks``: the run's controls (pause, temperature, stop), an event sink, the item ledger and
where to keep its checkpoint. Without hooks it behaves like atroposlib's own environments
and can be run with atroposlib's CLI: ``python -m vftui.collector.env process --env.vf_env_name ...``."""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from atroposlib.envs.base import APIServerConfig, BaseEnv, BaseEnvConfig, ScoredDataGroup

from vftui import stats, store
from vftui.collector import compat, env_loader, managed
from vftui.collector.backoff import backoff_seconds
from vftui.collector.controls import Controls
from vftui.collector.ledger import ItemLedger
from vftui.collector.tokens import TemplateMismatch, rl_tokens, sft_tokens
from vftui.collector.trajectory_link import TrajectoryApiLink
from vftui.errors import RunFailed
from vftui.events import (
    MASKED,
    META,
    EndpointTrouble,
    Event,
    GroupCollected,
    GroupDropped,
    MetricsWindow,
)

logger = logging.getLogger(__name__)
TURNS = "_vftui_turns"
CLAIMED = "_vftui_claimed"  # the item's group slot was claimed when it was handed out


def _first_non_finite(scores: list[float], metrics: dict[str, list[float]]) -> str | None:
    """Which metric (or the total reward) has a NaN or infinite value, if any."""
    for name, values in metrics.items():
        if not all(map(math.isfinite, values)):
            return f"metric '{name}'"
    return None if all(map(math.isfinite, scores)) else "the rubric's total reward"


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

    controls: Controls | None = None
    emit: Callable[[Event], None] = lambda event: None
    checkpoint_path: Path | None = None
    ledger: ItemLedger = field(default_factory=ItemLedger)
    groups_before: int = 0
    max_retries: int = 5
    max_concurrent: int | None = None
    http_client: Any = None
    """sft: the httpx client every request to the endpoint goes through (``traffic``)."""
    on_tokens: Callable[[int], None] = lambda count: None
    """sft: generated tokens of each written group, for tokens/s."""
    extra_meta: dict[str, Any] = field(default_factory=dict)
    health_metrics: Callable[[], dict[str, float]] = dict
    """The run's health figures for each wandb log (``collector.health``)."""
    fail: Callable[[RunFailed], None] | None = None
    """rl: ends the run with this failure (atroposlib's serve loop logs and drops a group's error)."""


class VerifiersEnv(TrajectoryApiLink, BaseEnv):
    name = "verifiers"
    env_config_cls = VfEnvConfig  # type: ignore[assignment]

    def __init__(
        self,
        config: VfEnvConfig,
        server_configs: list[APIServerConfig],
        slurm: bool = False,
        testing: bool = False,
        *,
        vf_env: Any = None,
        hooks: Hooks | None = None,
    ) -> None:
        super().__init__(config, server_configs, slurm, testing)
        self.hooks = hooks or Hooks()
        self.process_mode = False  # atroposlib's process command (and vftui's sft runner) set it
        if vf_env is None:
            env_loader.expose_builtins()
            vf_env = compat.load_vf_environment(config.vf_env_name, config.get_env_args())
        self.vf_env = vf_env
        self.rubric = vf_env.rubric
        self.system_prompt = vf_env.system_prompt
        self.reward_func_names = compat.reward_function_names(vf_env)
        compat.watch_reward_functions(vf_env)
        self._failures_in_a_row = 0
        self.max_turns = getattr(vf_env, "max_turns", None)
        self.trainer_tokenizer = compat.ChatTemplateTokenizer(self.tokenizer)
        self.window = stats.Accumulator()
        self._score_range: tuple[float, float] | None = None  # of every scored group, for drop reasons
        self.groups_written = self.hooks.groups_before
        self.ledger = self.hooks.ledger
        self._client = None
        logger.info("verifiers env %s, reward functions %s", config.vf_env_name, self.reward_func_names)

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
        self.train = self.vf_env.get_dataset().to_list()

    async def get_next_item(self) -> dict[str, Any] | None:
        controls = self.hooks.controls
        if controls is not None and not await controls.claim_group():
            return None
        index = self.ledger.take()
        return {**self.train[index % len(self.train)], "_item": index, CLAIMED: controls is not None}

    async def evaluate(self, *args, **kwargs) -> dict[str, float]:
        """Evaluation is out of scope for the collector."""
        return {}

    def save_checkpoint(self, step, data=None) -> None:
        data = dict(data or {})
        data["iter"] = self.ledger.next_item
        data.update(self.ledger.to_json())
        if self.hooks.checkpoint_path is None:
            super().save_checkpoint(step, data)
            return
        data.update(step=step, groups=self.groups_written, saved_at=time.time())
        store.write_json_atomic(self.hooks.checkpoint_path, data)

    # -- collecting -------------------------------------------------------------------

    @property
    def temperature(self) -> float:
        controls = self.hooks.controls
        return controls.temperature if controls is not None else 1.0

    def _sft_client(self):
        if self._client is None:
            cfg = self.server.servers[0].config
            self._client = compat.chat_client(cfg.base_url, cfg.api_key or "EMPTY", cfg.timeout, self.hooks.http_client)
        return self._client

    async def collect_trajectories(self, item: dict[str, Any]) -> tuple[ScoredDataGroup | None, list]:
        controls = self.hooks.controls
        if controls is not None and not item.pop(CLAIMED, False) and not controls.begin_group():
            return None, []
        try:
            group = await self._collect_group(item)
        except RunFailed as e:
            self._group_done(written=False)
            if self.hooks.fail is None:
                raise
            self.hooks.fail(e)
            return None, []
        except BaseException:
            self._group_done(written=False)
            raise
        if group is None:
            self._group_done(written=False)
        return group, []

    async def _sft_attempt(self, item: dict[str, Any], temperature: float) -> list[dict]:
        """sft: the group's rollouts from any OpenAI-compatible endpoint, in one generate call."""
        group_size = self.config.group_size
        kwargs = compat.sft_generate_kwargs(
            inputs=[compat.rollout_input(item) for _ in range(group_size)],
            client=self._sft_client(),
            model=self.server.servers[0].config.model_name,
            temperature=temperature,
            max_tokens=self.config.max_token_length,
            max_concurrent=self.hooks.max_concurrent or group_size,
        )
        return (await self.vf_env.generate(**kwargs))["outputs"]

    async def _rl_attempt(self, item: dict[str, Any], temperature: float) -> list[dict]:
        """rl: each rollout through its own ManagedServer, its turns' token ids recorded."""
        sampling = {"temperature": temperature, "max_tokens": self.config.max_token_length}
        model = self.server.servers[0].config.model_name
        limit = asyncio.Semaphore(self.hooks.max_concurrent or self.config.group_size)

        async def one() -> dict:
            async with limit, managed.recorded_client(self.server, self.tokenizer) as (client, recorder):
                output = await self.vf_env.run_rollout(
                    compat.rollout_input(item), client, model, sampling, state_columns=["trajectory"]
                )
            return {**output, TURNS: recorder.turns}

        return list(await asyncio.gather(*(one() for _ in range(self.config.group_size))))

    async def _rollouts_with_retries(self, item: dict[str, Any], temperature: float) -> list[dict] | None:
        """One group's rollouts, retried with backoff; None when a stop cut the retries."""
        group_size = self.config.group_size
        attempt_once = self._sft_attempt if self.process_mode else self._rl_attempt
        time_limit = None if self.process_mode else self._rl_group_time_limit_s()
        attempts = self.hooks.max_retries + 1
        for attempt in range(1, attempts + 1):
            compat.REWARD_FAILURES.set([])  # this attempt's rollouts inherit it
            try:
                outputs = await asyncio.wait_for(attempt_once(item, temperature), time_limit)
                errors = [e for e in map(compat.rollout_error, outputs) if e]
                if not errors and len(outputs) == group_size:
                    return outputs
                problem = errors[0] if errors else f"{len(outputs)} of {group_size} rollouts returned"
            except compat.auth_errors() as e:
                raise RunFailed(f"the endpoint rejected the request ({type(e).__name__}): check the API key") from e
            except TimeoutError:
                problem = f"the group timed out after {time_limit:g} s (is the inference server up?)"
            except Exception as e:  # noqa: BLE001 - any endpoint failure is retried, then reported
                problem = f"{type(e).__name__}: {e}"
            if attempt == attempts:
                raise RunFailed(f"the endpoint failed {attempts} times in a row; last error: {problem}")
            if not await self._back_off(attempt, attempts, problem, "endpoint"):
                return None
        return None

    def _rl_group_time_limit_s(self) -> float:
        """The request timeout for each model call a rollout may make (one when unbounded).

        sft leaves time limits to the client's per-request timeout; in rl atroposlib waits
        forever for an unhealthy server, so a whole group gets a limit.
        """
        calls = self.max_turns if isinstance(self.max_turns, int) and self.max_turns > 0 else 1
        return float(self.server.servers[0].config.timeout) * calls

    async def _back_off(self, attempt: int, attempts: int, problem: str, service: str) -> bool:
        """Report a failed attempt and wait before the next; False when a stop cut the wait."""
        delay = backoff_seconds(attempt)
        self.hooks.emit(EndpointTrouble(attempt, attempts, problem, round(delay, 2), service))
        logger.info("%s attempt %d/%d failed: %s", service, attempt, attempts, problem)  # the event is the warning
        if self.hooks.controls is None:
            await asyncio.sleep(delay)
            return True
        await self.hooks.controls.sleep(delay)
        return not self.hooks.controls.stop_requested

    async def _collect_group(self, item: dict[str, Any]) -> ScoredDataGroup | None:
        started = time.time()
        began_at_step = self.trainer_step()
        temperature = self.temperature
        outputs = await self._rollouts_with_retries(item, temperature)
        if outputs is None:
            return None
        if failures := compat.REWARD_FAILURES.get():
            name, error = failures[0]
            self._group_failed(item, f"reward function '{name}'", error)
            return None
        group: ScoredDataGroup = {"tokens": [], "masks": [], "scores": [], "messages": []}
        if not self.process_mode:
            group["inference_logprobs"] = []
        metrics: dict[str, list[float]] = {}
        finish_reasons, turns, stripped = [], [], []
        for output in outputs:
            messages = compat.plain_messages(list(output.get("prompt") or []) + list(output.get("completion") or []))
            reason = compat.finish_reason(output)
            tools = compat.openai_tools(output.get("tool_defs"))
            if tools:
                group.setdefault("tools", tools)  # the schemas the model was sent, for SFT tools
            tokenizer = self.trainer_tokenizer.with_tools(tools)  # the trained prompt shows them too
            rendered = compat.template_messages(messages)
            if self.process_mode:
                tokenized = sft_tokens(tokenizer, rendered, reason)
                stripped.append(tokenized.stripped_end_of_turn)
            else:
                try:
                    tokenized = rl_tokens(tokenizer, rendered, output[TURNS])
                except TemplateMismatch as e:  # scored, but the trainer would get tokens it was not sent
                    self._group_failed(item, "building the token sequence", str(e),
                                       [float(o.get("reward") or 0.0) for o in outputs],
                                       [compat.num_turns(o) for o in outputs])
                    return None
                group["inference_logprobs"].append(tokenized.logprobs)
                stripped.append(False)
            group["tokens"].append(tokenized.tokens)
            group["masks"].append(tokenized.masks)
            group["scores"].append(float(output.get("reward") or 0.0))
            group["messages"].append(messages)
            finish_reasons.append(reason)
            turns.append(compat.num_turns(output))
            for name, value in (output.get("metrics") or {}).items():
                if isinstance(value, (int, float)):
                    metrics.setdefault(name, []).append(float(value))
        if (bad := _first_non_finite(group["scores"], metrics)) is not None:  # a rubric of its own, unwatched
            self._group_failed(item, bad, "not a finite number")
            return None
        self._failures_in_a_row = 0
        self._score_range = stats.widen(self._score_range, group["scores"])
        group["generation_params"] = {"temperature": temperature, "max_tokens": self.config.max_token_length}
        group[META] = {
            "env": self.config.vf_env_name,
            "item": item["_item"],
            "example_id": item.get("example_id"),
            "metrics": metrics,
            "turns": turns,
            "finish_reasons": finish_reasons,
            "stripped_end_of_turn": stripped,
            "started_at": started,
            "elapsed_s": round(time.time() - started, 4),
            **({} if self.process_mode else {"trainer_step": began_at_step}),
            **self.hooks.extra_meta,
        }
        return group

    async def handle_send_to_api(self, scored_data, item=None, do_send_to_api=True, abort_on_any_max_length_exceeded=True):
        lines_before = getattr(self.jsonl_writer, "lines_written", None)
        written = False
        try:
            await super().handle_send_to_api(scored_data, item, do_send_to_api, abort_on_any_max_length_exceeded)
            lines_after = getattr(self.jsonl_writer, "lines_written", None)
            written = lines_before is None or lines_after != lines_before
            if written and isinstance(scored_data, dict):
                self._record(scored_data)
            elif isinstance(scored_data, dict):
                meta = scored_data[META]
                self._item_done(meta["item"])  # seen and judged: a resume does not collect it again
                dropped = GroupDropped(meta["item"], self._drop_reason(scored_data), list(scored_data["scores"]),
                                       meta["metrics"], meta["turns"])
                self.window.add(dropped)
                self.hooks.emit(dropped)
        finally:
            self._group_done(written)

    def _item_done(self, item: int) -> None:
        """Written, dropped or failed: done in the ledger and in the checkpoint."""
        self.ledger.mark_done(item)
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
        self.hooks.on_tokens(sum(sum(1 for m in mask if m != MASKED) for mask in group["masks"]))
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

    def _group_failed(self, item: dict[str, Any], what: str, error: str, scores: list[float] | None = None,
                      turns: list[int] | None = None) -> None:
        """A group that cannot be training data (a reward function raised, which verifiers scores 0;
        a reward that is not finite; tokens that do not match the generation): report and drop it.
        The same failure in more than --retries groups in a row fails the run: it is systematic."""
        self._failures_in_a_row += 1
        if self._failures_in_a_row > self.hooks.max_retries:
            raise RunFailed(f"{what} failed in {self._failures_in_a_row} groups in a row; last error: {error}")
        self._item_done(item["_item"])
        self.hooks.emit(GroupDropped(item["_item"], f"{what} failed: {error}", scores or [], {}, turns or []))

    def release_unstarted(self, item: dict[str, Any]) -> None:
        """Give back the slot of a claimed item whose group never started (cancelled first)."""
        if item.pop(CLAIMED, False):
            self._group_done(written=False)

    def _group_done(self, written: bool) -> None:
        if self.hooks.controls is not None:
            self.hooks.controls.group_finished(written)

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


if __name__ == "__main__":
    VerifiersEnv.cli()
