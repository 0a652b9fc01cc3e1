"""RunConfig: what a run needs, merged as flags > VFTUI_* env vars > config file > defaults
(with --resume: flags > the resumed run's saved settings > defaults).

The config file is TOML with the flags' names as keys (``group_size = 4`` or
``group-size = 4``), by default ``config.toml`` in platformdirs' user config dir.
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from vftui import paths
from vftui.defaults import DEFAULT_API_URL, DEFAULT_ENV
from vftui.errors import UserError

MODE_ALIASES = {"sft": "sft", "process": "sft", "rl": "rl", "serve": "rl"}
# Upper bounds far beyond any real run, so a typo is one sentence, not an OverflowError deep inside.
LARGE, HUGE = 100_000, 10**12


class RunConfig(BaseModel):
    """One run's settings. ``base_url=None`` means the embedded simulation."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    mode: Literal["sft", "rl"] = "sft"
    env: str = DEFAULT_ENV
    env_args: dict[str, Any] = Field(default_factory=dict)
    base_url: str | None = None
    model: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    tokenizer: str | None = None
    group_size: int = Field(default=8, ge=1, le=LARGE)
    steps: int = Field(default=1000, ge=1, le=HUGE)
    max_tokens: int = Field(default=2048, ge=1, le=HUGE)
    temperature: float = Field(default=1.0, ge=0.0, le=2.0)
    concurrency: int = Field(default=32, ge=1, le=LARGE)
    seed: int = Field(default=0, ge=-HUGE, le=HUGE)
    out: Path | None = None
    resume: Path | None = None
    wandb: bool = False
    wandb_project: str = "vftui"
    wandb_name: str | None = None
    no_ui: bool = False
    json_events: bool = False
    timeout: int = Field(default=300, ge=1, le=HUGE)
    max_response_mb: int = Field(default=64, ge=1, le=LARGE)
    retries: int = Field(default=5, ge=0, le=LARGE)
    window: int = Field(default=256, ge=1, le=LARGE)
    theme: str | None = None
    identical_alert: float = Field(default=0.5, ge=0.0, le=1.0)
    # rl (serve) mode
    server_type: Literal["vllm", "sglang"] = "vllm"
    tool_parser: str | None = None
    extra_base_urls: list[str] = Field(default_factory=list)
    api_url: str = DEFAULT_API_URL
    start_api: bool = False
    batch_size: int | None = Field(default=None, ge=1, le=HUGE)
    sim_trainer: bool | None = None

    @field_validator("mode", mode="before")
    @classmethod
    def _mode_alias(cls, value: Any) -> Any:
        return MODE_ALIASES.get(str(value).lower(), value)

    @field_validator("env_args", mode="before")
    @classmethod
    def _env_args_json(cls, value: Any) -> Any:
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError as e:
                raise ValueError(f"it is not valid JSON ({e.msg} at column {e.colno})") from e
        if not isinstance(value, dict):
            raise ValueError("it must be a JSON object, like '{\"max_turns\": 3}'")
        return value

    @property
    def simulated(self) -> bool:
        return self.base_url is None

    @property
    def runs_sim_trainer(self) -> bool:
        """rl on the embedded default starts the sim trainer with the API it starts, unless told not to."""
        if self.sim_trainer is not None:
            return self.sim_trainer
        return self.mode == "rl" and self.simulated and self.start_api

    def public_dict(self) -> dict[str, Any]:
        """The settings as saved beside a run and sent to wandb (no secrets exist here)."""
        data = self.model_dump(mode="json")
        for key in ("resume", "no_ui", "json_events", "theme"):
            data.pop(key)
        return data


FLAG_OF_FIELD = {name: "--" + name.replace("_", "-") for name in RunConfig.model_fields}
FLAG_OF_FIELD["json_events"] = "--json"


def _read_config_file(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as f:
            data = tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        raise UserError(f"the config file {path} does not parse as TOML: {e}") from e
    except UnicodeDecodeError as e:
        raise UserError(f"the config file {path} is not UTF-8 text (byte {e.start})") from e
    except OSError as e:
        raise UserError(f"cannot read the config file {path}: {e.strerror}") from e
    section = data.get("run", data)
    if not isinstance(section, dict):
        raise UserError(f"the config file {path}: 'run' must be a table ([run] with settings under it)")
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
    resumed: dict[str, Any] | None = None,
) -> RunConfig:
    """Merge the sources and validate; any problem is a one-sentence ``UserError``.

    ``resumed`` is a resumed run's saved settings: they stand in for the config file and
    the environment, so a resumed run goes on as it started unless a flag says otherwise.
    """
    environ = dict(os.environ) if environ is None else environ
    merged: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for key, value, source in _settings(flags, config_file, environ, resumed):
        merged[key], sources[key] = value, source
    try:
        return RunConfig.model_validate(merged)
    except ValidationError as e:
        raise UserError(_explain(e, sources)) from e


def _settings(
    flags: dict[str, Any], config_file: Path | None, environ: dict[str, str], resumed: dict[str, Any] | None
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
    flag = FLAG_OF_FIELD.get(field, field)
    where = f" ({sources[field]})" if sources.get(field) else ""
    message = first["msg"].removeprefix("Value error, ")
    return f"invalid {flag}{where}: {message}"
