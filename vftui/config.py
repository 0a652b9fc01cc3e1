"""RunConfig: what a run needs, merged as flags > VFTUI_* env vars > config file > defaults
(with --resume: flags > the resumed run's saved settings > defaults).

The config file is TOML with the flags' names as keys (``group_size = 4`` or
``group-size = 4``), by default ``config.toml`` in platformdirs' user config dir.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from vftui import paths
from vftui.bounds import HUGE, LARGE, check_nesting, load_json, read_toml
from vftui.defaults import DEFAULT_ENV, DEFAULT_HUB_TOKENIZER, PASS_THRESHOLD, SHARED_FLAGS
from vftui.errors import UserError
from vftui.events import Mode
from vftui.figures.eval_stats import k_values
from vftui.figures.signals import EVAL_FIGURES, SIGNALS, eval_gates, read_gates
from vftui.run_controls import MAX_TEMPERATURE, MIN_TEMPERATURE
from vftui.run_files.records import saved_config
from vftui.run_files.shards import WHOLE, Shard, from_slurm, parse
from vftui.text.redact import has_hidden_password, scrub

MODE_ALIASES = {
    "process": Mode.SFT,
    "serve": Mode.RL,
    "evaluate": Mode.EVAL,
}  # Atropos's names for them
DEFAULT_TEMPERATURE = 1.0
EVAL_DURING_RL_EXAMPLES = 32
FLAG_NAMES: dict[
    str, str
] = {}  # each setting's flag, filled once the model is built (for its own validators)
URL_SETTINGS = (
    "base_url",
    "extra_base_urls",
    "api_url",
)  # shown and saved with any password hidden
SERVER_SETTINGS = (
    "base_url",
    "extra_base_urls",
    "slurm",
)  # where the inference servers are: said together


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


class RunConfig(BaseModel):
    """One run's settings, each with its default and its ``--help`` text (the CLI is built from them).

    ``base_url=None`` means the embedded simulation.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

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
        "Hugging Face tokenizer name or folder for tokens/masks; default the "
        f"shipped one for the simulation, {DEFAULT_HUB_TOKENIZER} otherwise",
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
    # eval mode
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
    # rl (serve) mode
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

    @model_validator(mode="before")
    @classmethod
    def _eval_sizes(cls, data: Any) -> Any:
        """In eval mode a group is an example's rollouts: --rollouts-per-example is the group size."""
        if not isinstance(data, dict):
            return data
        mode = MODE_ALIASES.get(
            str(data.get("mode", "")).lower(), str(data.get("mode", "")).lower()
        )
        eval_only = [
            name for name in ("num_examples", "rollouts_per_example") if data.get(name) is not None
        ]
        if mode != Mode.EVAL:
            if eval_only and not (mode == Mode.RL and data.get("eval_every") is not None):
                raise ValueError(
                    f"{FLAG_NAMES[eval_only[0]]} is for --mode eval, or rl with --eval-every (sft and "
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
        return {**data, "group_size": data.get("group_size") or k or 1}

    @field_validator("*", mode="before")
    @classmethod
    def _yes_or_no_only_where_asked(cls, value: Any, info: ValidationInfo) -> Any:
        """A config file's true or false is a yes or no, never 1 or 0 (``steps = true`` ran one step)."""
        if isinstance(value, bool) and info.field_name not in YES_OR_NO:
            raise ValueError("true or false is not a value of this setting")
        return value

    @field_validator("mode", mode="before")
    @classmethod
    def _mode_alias(cls, value: Any) -> Any:
        return MODE_ALIASES.get(str(value).lower(), str(value).lower())

    @field_validator("shard", mode="before")
    @classmethod
    def _shard(cls, value: Any) -> Any:
        return None if value is None else tuple(parse(value).as_json())

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

    @model_validator(mode="after")
    def _one_endpoint_for_sft(self) -> RunConfig:
        if self.eval_every is not None and self.mode is not Mode.RL:
            raise ValueError("--eval-every is for --mode rl; --mode eval evaluates once")
        if self.mode is not Mode.EVAL and (gate := next(iter(eval_gates(self.fail_on)), None)):
            raise ValueError(
                f"--fail-on {gate.name}{gate.op}{gate.threshold:g} is a gate over an eval's figures: "
                "use it with --mode eval"
            )
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
        if self.slurm and self.mode is not Mode.RL:
            raise ValueError(
                f"--slurm finds rl's inference servers in a SLURM allocation; {self.mode} mode takes "
                "one --base-url"
            )
        if self.slurm and self.base_url is not None:
            raise ValueError(
                "--slurm finds the inference servers in the SLURM allocation, so it takes no --base-url; "
                "give one or the other"
            )
        if self.sim_latency and not self.simulated:
            raise ValueError(
                "--sim-latency slows the embedded simulation; it does nothing to --base-url's endpoint "
                "or --slurm's servers"
            )
        if self.mode is Mode.RL and self.shard is not None:
            raise ValueError(
                "--shard splits an sft or eval run's items between runs; rl mode feeds one trainer "
                "from one run (several --base-url balance inference servers)"
            )
        if self.mode is not Mode.RL and self.extra_base_urls:
            raise ValueError(
                f"{self.mode} mode takes one --base-url; several are for balancing inference servers in "
                "rl mode"
            )
        return self

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
    def own_shard(self) -> Shard:
        """The items this run collects: its shard's, or every one (``WHOLE``)."""
        return WHOLE if self.shard is None else Shard(*self.shard)

    @property
    def groups_hint(self) -> int:
        """The groups a run will collect, as far as is known before its environment loads (eval: 0, not yet)."""
        if self.mode is Mode.EVAL:
            return self.own_shard.share(self.num_examples or 0)
        return self.own_shard.share(self.steps)

    @property
    def simulated(self) -> bool:
        return self.base_url is None and not self.slurm

    @property
    def endpoint(self) -> str:
        """The endpoint as the views show it and the run's files keep it: ``simulated``, the SLURM allocation's
        servers (listed as the run starts), or --base-url with any password in it hidden (the requests use the
        real one)."""
        if self.slurm:
            return "SLURM allocation"
        return "simulated" if self.base_url is None else scrub(self.base_url.rstrip("/"))

    @property
    def runs_sim_trainer(self) -> bool:
        """rl on the embedded default starts the sim trainer with the API it starts, unless told not to."""
        if self.sim_trainer is not None:
            return self.sim_trainer
        return self.mode is Mode.RL and self.simulated and self.start_api

    def public_dict(self) -> dict[str, Any]:
        """The settings as saved beside a run and sent to wandb: no key is among them, and a URL's password is
        hidden."""
        data = self.model_dump(mode="json")
        for key in ("resume", "no_ui", "json_events", "theme"):
            data.pop(key)
        for key in URL_SETTINGS:
            value = data[key]
            data[key] = (
                [scrub(url) for url in value] if isinstance(value, list) else value and scrub(value)
            )
        return data


YES_OR_NO = {
    name
    for name, field in RunConfig.model_fields.items()
    if field.annotation in (bool, bool | None)
}


def _flag(name: str) -> str | None:
    extra = RunConfig.model_fields[name].json_schema_extra or {}
    return extra["flag"] if "flag" in extra else "--" + name.replace("_", "-")


FLAG_OF_FIELD = {name: _flag(name) or name for name in RunConfig.model_fields}
FLAG_NAMES.update(FLAG_OF_FIELD)


def _read_config_file(path: Path) -> dict[str, Any]:
    try:
        data = read_toml(path)
    except OSError as e:
        raise UserError(f"cannot read the config file {path}: {e.strerror}") from e
    except ValueError as e:
        raise UserError(f"the config file {path} {e}") from e
    section = data.get("run", data)
    if not isinstance(section, dict):
        raise UserError(
            f"the config file {path}: 'run' must be a table ([run] with settings under it)"
        )
    return {key.replace("-", "_"): value for key, value in section.items() if key != "run"}


def _read_env_vars(environ: dict[str, str]) -> dict[str, Any]:
    out = {}
    for name in RunConfig.model_fields:
        value = environ.get(f"VFTUI_{name.upper()}")
        if value is not None:
            out[name] = value
    return out


def load_config(
    flags: dict[str, Any],
    config_file: Path | None = None,
    environ: dict[str, str] | None = None,
) -> RunConfig:
    """Merge the sources and validate; any problem is a one-sentence ``UserError``.

    With ``resume`` among the flags, the resumed run's saved settings stand in for the
    config file and the environment, so it goes on as it started unless a flag says
    otherwise (and appends to its own jsonl); --base-url or --slurm given again replaces both of the saved ones.
    """
    environ = dict(os.environ) if environ is None else environ
    resumed = None
    if flags.get("resume") is not None:
        resumed = saved_config(Path(flags["resume"]))
        resumed.pop("out", None)
        if flags.get("slurm") or flags.get("base_url") is not None:
            for key in SERVER_SETTINGS:
                resumed.pop(key, None)
        _check_saved_urls(resumed, flags)
    merged: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for key, value, source in _settings(flags, config_file, environ, resumed):
        merged[key], sources[key] = value, source
    if resumed is None and merged.get("shard") is None and _mode_of(merged) is not Mode.RL:
        slurm = from_slurm(
            environ
        )  # a job array's task is a shard unless something above said which
        if slurm is not None:
            merged["shard"], sources["shard"] = slurm
    try:
        return RunConfig.model_validate(merged)
    except ValidationError as e:
        raise UserError(_explain(e, sources)) from e


def _mode_of(merged: dict[str, Any]) -> Mode | None:
    """The mode the settings ask for, before they are validated (None: one that is not a mode)."""
    name = str(merged.get("mode", RunConfig.model_fields["mode"].default)).lower()
    try:
        return Mode(MODE_ALIASES.get(name, name))
    except ValueError:
        return None


def _check_saved_urls(resumed: dict[str, Any], flags: dict[str, Any]) -> None:
    """A URL saved with its password hidden cannot be asked again: the flag must give it anew."""
    for key in URL_SETTINGS:
        saved = resumed.get(key)
        urls = saved if isinstance(saved, list) else [saved]
        if flags.get(key) is None and any(
            isinstance(url, str) and has_hidden_password(url) for url in urls
        ):
            flag = FLAG_OF_FIELD[key] if key != "extra_base_urls" else "--base-url"
            raise UserError(
                f"--resume: the run's {flag} had a password, which vftui does not save; give {flag} "
                "again"
            )


def _settings(
    flags: dict[str, Any],
    config_file: Path | None,
    environ: dict[str, str],
    resumed: dict[str, Any] | None,
) -> Iterator[tuple[str, Any, str]]:
    """Every (setting, value, where it came from), lowest precedence first; flags are last."""
    if resumed is not None:
        for key, value in resumed.items():
            yield key, value, "from the resumed run"
    else:
        file_path = config_file or paths.default_config_file()
        if config_file is not None or file_path.exists():
            for key, value in _read_config_file(file_path).items():
                yield key, value, f"in {file_path}"
        for key, value in _read_env_vars(environ).items():
            yield key, value, f"from VFTUI_{key.upper()}"
    for key, value in flags.items():
        if value is not None:
            yield key, value, ""


def _explain(error: ValidationError, sources: dict[str, str]) -> str:
    first = error.errors()[0]
    field = str(first["loc"][0]) if first["loc"] else ""
    if first["type"] == "extra_forbidden":
        return f"unknown setting '{field}' {sources.get(field, '')}".strip()
    message = first["msg"].removeprefix("Value error, ")
    if not field:  # a rule over several settings says which itself
        return message
    flag = FLAG_OF_FIELD.get(field, field)
    where = f" ({sources[field]})" if sources.get(field) else ""
    return f"invalid {flag}{where}: {message}"
