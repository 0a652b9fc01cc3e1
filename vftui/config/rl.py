"""rl mode's settings and rules: inference servers (several, or a SLURM allocation's), the trajectory API,
the trainer, evals during training; one run feeds one trainer."""

from __future__ import annotations

from typing import Literal

from vftui.bounds import HUGE
from vftui.config.eval import EVAL_DURING_RL_EXAMPLES
from vftui.config.fields import SharedSettings, setting, shared
from vftui.events import Mode


def takes_slurm_shard(mode: Mode | None) -> bool:
    """A SLURM job array's task is a shard of the run, unless the run is rl's (one run, one trainer)."""
    return mode is not Mode.RL


class RlSettings(SharedSettings):
    server_type: Literal["vllm", "sglang"] = setting(
        "vllm", "inference server kind: vllm or sglang", group="rl"
    )
    tool_parser: str | None = setting(
        None,
        "vLLM tool parser that reads tool calls out of the generated text "
        "(e.g. hermes); needed for environments with tools, and vLLM's parsers "
        "installed",
        metavar="NAME",
        group="rl",
    )
    extra_base_urls: list[str] = setting([], "", flag=None)  # the second and later --base-url
    slurm: bool = setting(
        False,
        "find the inference servers in this job's SLURM allocation as atroposlib does: "
        "8 // INFER_TP servers (ports 9000, 9001, ...) on each node after the first "
        "NUM_TRAINING_NODES (instead of --base-url)",
        action="store_true",
        group="rl",
    )
    api_url: str = shared("api_url", group="rl")
    start_api: bool = setting(
        False,
        "start atroposlib's run-api on --api-url's port if none answers there; stopped on exit",
        action="store_true",
        group="rl",
    )
    batch_size: int | None = setting(
        None,
        "sequences per trainer batch (the registered trainer's wins)",
        group="rl",
        ge=1,
        le=HUGE,
    )
    eval_every: int | None = setting(
        None,
        "evaluate every S trainer steps on the eval split's first --num-examples "
        f"examples (default {EVAL_DURING_RL_EXAMPLES}), --rollouts-per-example each "
        "(default 1, greedy); meanwhile training goes on with half its workers "
        "(atroposlib's LIMIT_TRAIN), so its groups keep coming",
        metavar="S",
        group="rl",
        ge=1,
        le=HUGE,
    )
    sim_trainer: bool | None = setting(
        None,
        "start vftui's simulated trainer to pull batches (default: on with the "
        "embedded default and --start-api)",
        action="optional",
        group="rl",
    )

    def eval_every_is_rls(self) -> None:
        if self.eval_every is not None and self.mode is not Mode.RL:
            raise ValueError("--eval-every is for --mode rl; --mode eval evaluates once")

    def slurm_is_rls(self) -> None:
        if self.slurm and self.mode is not Mode.RL:
            raise ValueError(
                f"--slurm finds rl's inference servers in a SLURM allocation; {self.mode} mode takes "
                "one --base-url"
            )

    def slurm_or_base_url(self) -> None:
        if self.slurm and self.base_url is not None:
            raise ValueError(
                "--slurm finds the inference servers in the SLURM allocation, so it takes no --base-url; "
                "give one or the other"
            )

    def no_shard_in_rl(self) -> None:
        if self.mode is Mode.RL and self.shard is not None:
            raise ValueError(
                "--shard splits an sft or eval run's items between runs; rl mode feeds one trainer "
                "from one run (several --base-url balance inference servers)"
            )

    def several_base_urls_are_rls(self) -> None:
        if self.mode is not Mode.RL and self.extra_base_urls:
            raise ValueError(
                f"{self.mode} mode takes one --base-url; several are for balancing inference servers in "
                "rl mode"
            )

    @property
    def simulated(self) -> bool:
        return super().simulated and not self.slurm

    @property
    def endpoint(self) -> str:
        """As the shared settings say it, or the SLURM allocation's servers (listed as the run starts)."""
        return "SLURM allocation" if self.slurm else super().endpoint

    @property
    def runs_sim_trainer(self) -> bool:
        """rl on the embedded default starts the sim trainer with the API it starts, unless told not to."""
        if self.sim_trainer is not None:
            return self.sim_trainer
        return self.mode is Mode.RL and self.simulated and self.start_api
