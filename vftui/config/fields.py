"""The settings every mode takes (sft takes these alone), and ``setting``, how each one is declared."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator
from pydantic.fields import FieldInfo

from vftui import paths
from vftui.bounds import HUGE, LARGE, check_nesting, load_json
from vftui.defaults import DEFAULT_ENV, SHARED_FLAGS
from vftui.events import Mode
from vftui.figures.signals import EVAL_FIGURES, SIGNALS, read_gates
from vftui.run_controls import MAX_TEMPERATURE, MIN_TEMPERATURE
from vftui.run_files.shards import WHOLE, Shard, parse
from vftui.text.redact import scrub

MODE_ALIASES = {
    "process": Mode.SFT,
    "serve": Mode.RL,
    "evaluate": Mode.EVAL,
}  # Atropos's names for them
DEFAULT_TEMPERATURE = 1.0


def shared(name: str, **flag: Any) -> Any:
    """A setting that other commands take as a flag too (``defaults.SHARED_FLAGS``)."""
    spec = SHARED_FLAGS[name]
    return setting(
        spec.default, spec.help, **({"metavar": spec.metavar} if spec.metavar else {}), **flag
    )


def setting(default: Any = None, description: str = "", **flag: Any) -> Any:
    """A field with its ``--help`` words; ``flag`` holds argparse details (metavar, group, action, flag name)."""
    bounds = {k: flag.pop(k) for k in ("ge", "gt", "le") if k in flag}
    return Field(default=default, description=description, json_schema_extra=flag or None, **bounds)


def details(field: FieldInfo) -> dict[str, Any]:
    """The argparse details ``setting`` gave the field (a dict, never pydantic's callable form)."""
    extra = field.json_schema_extra
    return extra if isinstance(extra, dict) else {}


def flag_of(name: str, field: FieldInfo) -> str | None:
    """The setting's flag: ``--`` and its name, unless ``setting(flag=...)`` says otherwise (None: none)."""
    extra = details(field)
    return extra["flag"] if "flag" in extra else "--" + name.replace("_", "-")


def mode_named(value: Any) -> str:
    """The mode a setting's value names, Atropos's names included (not yet checked to be one)."""
    name = str(value).lower()
    return MODE_ALIASES.get(name, name)


class SharedSettings(BaseModel):
    """One run's settings, each with its default and its ``--help`` text (the CLI is built from them).

    ``base_url=None`` means the embedded simulation.
    """

    model_config = ConfigDict(
        extra="forbid", frozen=True, allow_inf_nan=False
    )  # nan passes ge and le

    mode: Mode = setting(
        Mode.SFT,
        "sft (alias process: any OpenAI-compatible API, groups saved as jsonl), rl "
        "(alias serve: token logprobs to the Atropos trajectory API) or eval (alias evaluate: the "
        "environment's eval split, pass@k with 95%% intervals, results as vf-eval writes them)",
    )
    env: str = setting(
        DEFAULT_ENV,
        "verifiers environment id, e.g. owner/name (the built-in ones: alphabet-sort, "
        "alphabet-tools)",
    )
    env_args: dict[str, Any] = setting(
        {},
        "JSON object of arguments for the environment's load_environment, "
        "e.g. '{\"max_turns\": 3}'",
    )
    base_url: str | None = setting(
        None,
        "OpenAI-compatible endpoint (sft) or vLLM/SGLang server (rl), e.g. "
        "http://127.0.0.1:9001/v1; repeat in rl mode to balance several servers; "
        "default: the embedded simulation",
        action="append",
    )
    model: str | None = setting(
        None, "model name sent to the endpoint; default the only model it lists"
    )
    api_key_env: str = setting(
        "OPENAI_API_KEY",
        "environment variable holding the API key (optional for loopback endpoints)",
        metavar="VAR",
    )
    tokenizer: str | None = setting(
        None,
        "Hugging Face tokenizer name or folder, or a model's .gguf file, for tokens/masks; default the "
        "shipped one for the simulation, otherwise the served model's own (the path or Hub name the "
        "endpoint reports for it, or the model's id), refused where it names none",
    )
    group_size: int = setting(8, "rollouts per group", ge=1, le=LARGE)
    steps: int = setting(1000, "groups to collect", ge=1, le=HUGE)
    max_tokens: int = setting(2048, "max completion tokens per turn", ge=1, le=HUGE)
    temperature: float | None = setting(
        None,
        f"sampling temperature in [{MIN_TEMPERATURE:g}, {MAX_TEMPERATURE:g}] "
        f"(default {DEFAULT_TEMPERATURE:g}; in eval mode 0, greedy, with one rollout "
        f"per example, and {DEFAULT_TEMPERATURE:g} with more, so pass@k means "
        "something)",
        ge=MIN_TEMPERATURE,
        le=MAX_TEMPERATURE,
    )
    concurrency: int = setting(
        32,
        "requests in flight to the endpoint across all groups: about N / group size "
        "groups are collected at once, fewer while the endpoint rate-limits (429/503 with "
        "Retry-After); in rl mode atroposlib's worker limit becomes N / group size groups",
        metavar="N",
        ge=1,
        le=LARGE,
    )
    seed: int = setting(0, "seed of the simulated endpoint", ge=-HUGE, le=HUGE)
    sim_latency: float = setting(
        0.0,
        "seconds the embedded simulated endpoint takes per request, so a run on it "
        "lasts long enough to try the keys (no --base-url only)",
        metavar="S",
        ge=0.0,
        le=60.0,
    )
    out: Path | None = setting(
        None,
        f"jsonl file for the groups; default a new run folder under {paths.runs_dir()}; "
        "an existing file is never overwritten (a _1 suffix is added)",
    )
    resume: Path | None = setting(
        None,
        "continue a stopped run (its folder or .jsonl): collects again the items "
        "that were in flight when it stopped, then carries on; only appends",
        metavar="RUN_DIR",
    )
    wandb: bool = setting(
        False,
        "log metrics to Weights & Biases (honours WANDB_MODE=offline); default off",
        action="optional",
    )
    wandb_project: str = setting("vftui", "wandb project")
    wandb_name: str | None = setting(
        None, "wandb run name prefix (atroposlib adds the date and an id)"
    )
    no_ui: bool = setting(False, "no dashboard: progress on stderr (CI)", action="store_true")
    json_events: bool = setting(
        False,
        "with --no-ui, print every event as one JSON object per line on stdout",
        action="store_true",
        flag="--json",
    )
    timeout: int = setting(
        300,
        "seconds before one request (connect to last byte) is abandoned and retried",
        ge=1,
        le=HUGE,
    )
    max_response_mb: int = setting(
        64,
        "largest answer body accepted from an sft endpoint; a bigger one is a "
        "failed attempt, retried",
        metavar="MB",
        ge=1,
        le=LARGE,
    )
    retries: int = setting(
        5,
        "failed attempts in a row before the run gives up; a rate-limited request (429) "
        "waits as long as the endpoint asks, up to 2 minutes, without using them",
        ge=0,
        le=LARGE,
    )
    score_timeout: float = setting(
        120,
        "seconds a group's reward functions may take; one that does not return "
        "by then (awaiting, or blocking the run) fails its group, naming it; also how "
        "long a stop waits for the groups in flight",
        metavar="S",
        gt=0,
        le=HUGE,
    )
    window: int = setting(256, "recent groups kept in memory for views and dumps", ge=1, le=LARGE)
    theme: str | None = shared("theme")
    identical_alert: float = shared("identical_alert", ge=0.0, le=1.0)
    fail_on: str | None = setting(
        None,
        "CI gates over the recent window, comma-separated NAME>VALUE (e.g. "
        "'identical>0.8,truncated>0.3,stall>300'): a gate passed stops the run gracefully "
        "and exits 3. Names: "
        + "; ".join(f"{name}: {s.meaning}" for name, s in SIGNALS.items())
        + f". In eval mode, at its end, NAME<VALUE or NAME>VALUE over {EVAL_FIGURES} "
        "(e.g. 'pass@1<0.6')",
        metavar="GATES",
    )
    stall_timeout: float | None = setting(
        None,
        "fail the run (gracefully, exit 4) after this many seconds without "
        "a new group while running (rl: or without a trainer step while groups "
        "wait)",
        metavar="S",
        gt=0,
        le=HUGE,
    )
    env_server: str | None = setting(
        None,
        "run each rollout in verifiers' env servers instead of in-process (sft and eval, v1 "
        "tasksets): 'spawn' starts a pool of --env-workers processes for the run on loopback; "
        "tcp://HOST:PORT reaches one started elsewhere, which must import the taskset, run the "
        "same verifiers minor version and read the API key from its own environment "
        "(--api-key-env names the variable); it has no authentication",
        metavar="spawn|tcp://HOST:PORT",
    )
    env_workers: int = setting(
        2, "worker processes of a spawned env-server pool", metavar="N", ge=1, le=256
    )
    shard: tuple[int, int] | None = setting(
        None,
        "collect only shard I of N (sft and eval): the items whose index "
        "modulo N is I, numbered from 0 (0 <= I < N), so N runs with 0/N ... "
        "N-1/N collect together, each item once, what one run would. --steps "
        "and --num-examples count over all the shards: each run collects its "
        "share. Default in a SLURM job array: the task's place in it, "
        "(SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN) / SLURM_ARRAY_TASK_STEP "
        "of SLURM_ARRAY_TASK_COUNT, so an --array=1-4 task 1 is 0/4. A resume "
        "keeps its shard; vftui view and compare read a folder of a run's "
        "shards as one run",
        metavar="I/N",
    )

    @field_validator("*", mode="before")
    @classmethod
    def _yes_or_no_only_where_asked(cls, value: Any, info: ValidationInfo) -> Any:
        """A config file's true or false is a yes or no, never 1 or 0 (``steps = true`` ran one step)."""
        name = info.field_name  # a field's validator: always named
        yes_or_no = (bool, bool | None)
        if isinstance(value, bool) and name and cls.model_fields[name].annotation not in yes_or_no:
            raise ValueError("true or false is not a value of this setting")
        return value

    @field_validator("mode", mode="before")
    @classmethod
    def _mode_alias(cls, value: Any) -> Any:
        return mode_named(value)

    @field_validator("shard", mode="before")
    @classmethod
    def _shard(cls, value: Any) -> Any:
        return None if value is None else tuple(parse(value).as_json())

    @field_validator("env_server")
    @classmethod
    def _env_server(cls, value: str | None) -> str | None:
        if value is None or value == "spawn":
            return value
        host, _, port = value.removeprefix("tcp://").rpartition(":")
        if (
            not value.startswith("tcp://")
            or not host
            or not port.isdigit()
            or not 0 < int(port) < 65536
        ):
            raise ValueError("it must be spawn or an address tcp://HOST:PORT")
        return value

    @field_validator("fail_on")
    @classmethod
    def _gates(cls, value: str | None) -> str | None:
        read_gates(value)  # a ValueError says what cannot be read
        return value

    @field_validator("env_args", mode="before")
    @classmethod
    def _env_args_json(cls, value: Any) -> Any:
        if isinstance(value, str):
            try:
                value = load_json(value)
            except json.JSONDecodeError as e:
                raise ValueError(f"it is not valid JSON ({e.msg} at column {e.colno})") from e
        if not isinstance(value, dict):
            raise ValueError("it must be a JSON object, like '{\"max_turns\": 3}'")
        return check_nesting(value)

    def env_server_is_not_rls(self) -> None:
        if self.env_server and self.mode is Mode.RL:
            raise ValueError(
                "--env-server cannot collect rl groups: rl needs each model call's token ids and "
                "logprobs, which rollouts run in verifiers' env servers do not give; use --mode sft "
                "or eval with it"
            )

    def sim_latency_is_the_simulations(self) -> None:
        if self.sim_latency and not self.simulated:
            raise ValueError(
                "--sim-latency slows the embedded simulation; it does nothing to --base-url's endpoint "
                "or --slurm's servers"
            )

    @property
    def own_shard(self) -> Shard:
        """The items this run collects: its shard's, or every one (``WHOLE``)."""
        return WHOLE if self.shard is None else Shard(*self.shard)

    @property
    def simulated(self) -> bool:
        return self.base_url is None

    @property
    def endpoint(self) -> str:
        """The endpoint as the views show it and the run's files keep it: ``simulated``, or --base-url with any
        password in it hidden (the requests use the real one)."""
        return "simulated" if self.base_url is None else scrub(self.base_url.rstrip("/"))
