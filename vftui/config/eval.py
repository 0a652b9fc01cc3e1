"""Eval mode's settings and rules: a group is an example's rollouts, pass@k its figures, gates on them."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationInfo, field_validator, model_validator

from vftui.bounds import HUGE, LARGE
from vftui.config.fields import DEFAULT_TEMPERATURE, SharedSettings, flag_of, mode_named, setting
from vftui.defaults import PASS_THRESHOLD
from vftui.events import Mode
from vftui.figures.eval_stats import k_values
from vftui.figures.signals import eval_gates

EVAL_DURING_RL_EXAMPLES = 32
SPLIT_IN_ENV_ARGS = ("vftui/alphabet-sort",)  # built-in v1 tasksets whose config takes a split


class EvalSettings(SharedSettings):
    num_examples: int | None = setting(
        None,
        "examples of the eval split to evaluate, from its start (default: all "
        "of it; needed for a taskset without an end)",
        metavar="N",
        group="eval",
        ge=1,
        le=HUGE,
    )
    rollouts_per_example: int | None = setting(
        None,
        "rollouts of each example, the k of pass@k (default 1; in eval mode it is the group size)",
        metavar="K",
        group="eval",
        ge=1,
        le=LARGE,
    )
    pass_threshold: float = setting(
        PASS_THRESHOLD,
        "a rollout passes (for pass@k) when its reward is at least this; "
        f"{PASS_THRESHOLD:g} is vf-eval's default, so figures carry over",
        group="eval",
        metavar="R",
        ge=-HUGE,
        le=HUGE,
    )

    @field_validator("env_args")
    @classmethod
    def _builtin_eval_split(cls, value: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        """Eval mode on a built-in taskset evaluates its eval split unless ``--env-args`` names one (a v1
        taskset picks its split through its config, and would give its training tasks)."""
        builtin = info.data.get("env") in SPLIT_IN_ENV_ARGS
        if info.data.get("mode") is Mode.EVAL and builtin and "split" not in value:
            return {**value, "split": "eval"}
        return value

    @model_validator(mode="before")
    @classmethod
    def _eval_sizes(cls, data: Any) -> Any:
        """In eval mode a group is an example's rollouts: --rollouts-per-example is the group size."""
        if not isinstance(data, dict):
            return data
        mode = mode_named(data.get("mode", ""))
        eval_only = [
            name for name in ("num_examples", "rollouts_per_example") if data.get(name) is not None
        ]
        if mode != Mode.EVAL:
            if eval_only and not (mode == Mode.RL and data.get("eval_every") is not None):
                flag = flag_of(eval_only[0], cls.model_fields[eval_only[0]])
                raise ValueError(
                    f"{flag} is for --mode eval, or rl with --eval-every (sft and "
                    "rl take --steps and --group-size)"
                )
            return data
        k = data.get("rollouts_per_example")
        if (
            k is not None
            and data.get("group_size") is not None
            and str(data["group_size"]) != str(k)
        ):
            raise ValueError(
                "--group-size and --rollouts-per-example differ; in eval mode give "
                "--rollouts-per-example alone"
            )
        return {
            **data,
            "group_size": data.get("group_size") or k or 1,
            "env_args": data.get("env_args", {}),  # given, so _builtin_eval_split sees it
        }

    def eval_gates_are_evals(self) -> None:
        if self.mode is not Mode.EVAL and (gate := next(iter(eval_gates(self.fail_on)), None)):
            raise ValueError(
                f"--fail-on {gate.name}{gate.op}{gate.threshold:g} is a gate over an eval's figures: "
                "use it with --mode eval"
            )

    def pass_at_k_is_reported(self) -> None:
        reported = k_values(self.group_size)
        for gate in eval_gates(self.fail_on):
            if (
                not gate.name.startswith("pass@")
                or int(gate.name.removeprefix("pass@")) in reported
            ):
                continue
            if int(gate.name.removeprefix("pass@")) > self.group_size:
                raise ValueError(
                    f"--fail-on {gate.name}: an eval of {self.group_size} rollout(s) per example has "
                    "pass@k for k up to that; raise --rollouts-per-example"
                )
            raise ValueError(
                f"--fail-on {gate.name}: an eval of {self.group_size} rollouts per example reports "
                f"{', '.join(f'pass@{k}' for k in reported)}; gate one of those"
            )

    @property
    def start_temperature(self) -> float:
        """The first groups' temperature: the flag's, or the mode's default (eval with one rollout: greedy)."""
        if self.temperature is not None:
            return self.temperature
        return 0.0 if self.mode is Mode.EVAL and self.group_size == 1 else DEFAULT_TEMPERATURE

    @property
    def eval_examples(self) -> int:
        """An rl run's evals (``--eval-every``): how many of the eval split's first examples each one runs."""
        return self.num_examples or EVAL_DURING_RL_EXAMPLES

    @property
    def eval_rollouts(self) -> int:
        """Rollouts an example in an eval: the group size in eval mode, else --rollouts-per-example."""
        return self.group_size if self.mode is Mode.EVAL else self.rollouts_per_example or 1

    @property
    def eval_temperature(self) -> float:
        """An eval's temperature: eval mode's own; an rl run's evals are greedy with one rollout an example."""
        if self.mode is Mode.EVAL:
            return self.start_temperature
        return 0.0 if self.eval_rollouts == 1 else DEFAULT_TEMPERATURE

    @property
    def groups_hint(self) -> int:
        """The groups a run will collect, as far as is known before its environment loads (eval: 0, not yet)."""
        if self.mode is Mode.EVAL:
            return self.own_shard.share(self.num_examples or 0)
        return self.own_shard.share(self.steps)
