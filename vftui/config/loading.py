"""load_config: a run's settings merged as flags > VFTUI_* env vars > config file > defaults
(with --resume: flags > the resumed run's saved settings > defaults).

The config file is TOML with the flags' names as keys (``group_size = 4`` or
``group-size = 4``), by default ``config.toml`` in platformdirs' user config dir.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from vftui import paths
from vftui.bounds import read_toml
from vftui.config.fields import mode_named
from vftui.config.rl import takes_slurm_shard
from vftui.config.run_config import FLAG_OF_FIELD, URL_SETTINGS, RunConfig
from vftui.errors import UserError
from vftui.events import Mode
from vftui.run_files.files import RunFiles
from vftui.run_files.records import saved_config
from vftui.run_files.shards import from_slurm
from vftui.text.redact import has_hidden_password

SERVER_SETTINGS = (
    "base_url",
    "extra_base_urls",
    "slurm",
)  # where the inference servers are: said together


def _read_config_file(path: Path) -> dict[str, Any]:
    data = read_toml(path, "the config file")
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
        _check_out_is_the_resumed_run(Path(flags["resume"]), flags.get("out"))
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
    if resumed is None and merged.get("shard") is None and takes_slurm_shard(_mode_of(merged)):
        slurm = from_slurm(
            environ
        )  # a job array's task is a shard unless something above said which
        if slurm is not None:
            merged["shard"], sources["shard"] = slurm
    try:
        return RunConfig.model_validate(merged)
    except ValidationError as e:
        raise UserError(_explain(e, sources)) from e


def _check_out_is_the_resumed_run(resume: Path, out: str | Path | None) -> None:
    """--out beside --resume names the run itself, or is refused: another path was dropped without a word,
    and the groups went on into the resumed run's file."""
    if out is None:
        return
    jsonl = RunFiles.find(resume).jsonl
    if os.path.realpath(Path(out).expanduser()) != os.path.realpath(jsonl):
        raise UserError(
            f"--resume goes on writing the run's own files ({jsonl}); --out cannot move it to {out}: "
            "drop --out"
        )


def _mode_of(merged: dict[str, Any]) -> Mode | None:
    """The mode the settings ask for, before they are validated (None: one that is not a mode)."""
    try:
        return Mode(mode_named(merged.get("mode", RunConfig.model_fields["mode"].default)))
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
