"""What a run's side files, its index entry and an eval's metadata hold, validated with bounds as they are
read back.

``--resume``, ``vftui runs``, ``view`` and ``compare`` read these files, which may be damaged,
hand-edited or hostile. Each is a pydantic model of the fields vftui reads, every number bounded
(the other fields are kept as they are); a file that is too big, nests too deep, does not parse or
does not fit its model is ``Damaged``, with the reason in one phrase for the caller to word.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from vftui import bounds
from vftui.errors import UserError
from vftui.events import RunState
from vftui.run_files import shards
from vftui.run_files.files import RunFiles

LENIENT = ConfigDict(
    extra="allow", frozen=True, allow_inf_nan=False
)  # fields vftui does not read are kept
Count = Annotated[int, Field(ge=0, le=bounds.HUGE)]  # groups, items, dataset positions
Number = Annotated[float, Field(ge=-bounds.HUGE, le=bounds.HUGE)]


class Damaged(ValueError):
    """A file that does not read as what it should hold; ``reason`` says what is wrong with it."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path} is damaged ({reason})")
        self.path, self.reason = path, reason


class Settings(BaseModel):
    """A run's settings as saved (``RunConfig`` validates them all again when the run is resumed)."""

    model_config = LENIENT
    env: str = ""
    mode: str = ""
    steps: Count = 0
    pass_threshold: Number | None = None  # an eval's (older runs did not save it)
    env_args: dict[str, Any] = {}
    shard: list[int] | None = None  # [I, N] of a sharded run, as saved (older runs did not save it)

    @field_validator("shard", mode="before")
    @classmethod
    def _shard(cls, value: Any) -> Any:
        return None if value is None else shards.parse(value).as_json()

    @property
    def own_shard(self) -> shards.Shard:
        return shards.WHOLE if self.shard is None else shards.Shard(*self.shard)


class RunRecord(BaseModel):
    """``NAME.run.json``: the settings a run started with, and what it talked to."""

    model_config = LENIENT
    config: Settings
    model: str = ""
    endpoint: str = ""
    tokenizer: str = ""
    created: Annotated[float, Field(ge=0, le=bounds.HUGE)] = 0.0
    version_info: Any = None  # what made it (as an eval's metadata.json says it); read as it can be


class Checkpoint(BaseModel):
    """``NAME.checkpoint.json``: the items written (all below ``done_below``, and ``done_above``), the next
    new item (``iter``), and how the run ended."""

    model_config = LENIENT
    done_below: Count = 0
    done_above: list[Count] = []
    iter: Count = 0
    groups: Count = 0
    groups_done: Count | None = (
        None  # at its end, the groups it counts done (an eval's errors too) of its total
    )
    groups_total: Count | None = None
    # the seconds the run ran, every session's: the gap before a resume in none (listing.seconds_run)
    elapsed_s: Annotated[float, Field(ge=0, le=bounds.HUGE)] = 0.0
    saved_at: Annotated[float, Field(ge=0, le=bounds.HUGE)] | None = None  # when, by the wall clock
    state: RunState | None = None
    mean_reward: Number | None = None


class IndexEntry(BaseModel):
    """A run's entry in the run index: where its jsonl is."""

    out: str = Field(max_length=4096)

    @field_validator("out")
    @classmethod
    def _a_path(cls, value: str) -> str:
        if "\0" in value or not os.path.isabs(value):
            raise ValueError("it is not an absolute path")
        return value


class EvalMetadata(BaseModel):
    """vf-eval's ``metadata.json`` (ours adds pass@k and intervals): the fields a view or comparison reads."""

    model_config = LENIENT
    env_id: str = ""
    model: str = "?"
    base_url: str = ""
    pass_threshold: Number | None = None
    sampling_args: dict[str, Any] = {}
    env_args: Any = None  # shown only: another tool's form is no reason to refuse the file
    version_info: Any = (
        None  # vf-eval's (vf_version, env_version, ...); ours: vftui, verifiers, atroposlib
    )
    errors: Any = None  # ours: a list of the examples that failed to score (in no figure); another tool's may differ

    @property
    def errors_listed(self) -> int:
        return errors_listed(self.errors)


def errors_listed(errors: Any) -> int:
    """How many examples an eval's ``metadata.json`` lists as failed to score; 0 where ``errors`` is another
    tool's form."""
    return len(errors) if isinstance(errors, list) else 0


Record = TypeVar("Record", bound=BaseModel)


def read(path: Path, model: type[Record]) -> Record | None:
    """The file at ``path`` as ``model``; None when there is no such file."""
    try:
        data = _json(path)
    except FileNotFoundError:
        return None
    if not isinstance(data, dict):
        raise Damaged(path, "it is not a JSON object")
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise Damaged(path, explain(e)) from e


def read_object(path: Path) -> dict[str, Any]:
    """Another tool's side file (verifiers' resolved config, prime-rl's orchestrator config) read as vftui's own
    are: a regular file of a bounded size, never waited on (a FIFO there hung compare, a link to /dev/zero filled
    memory); empty when absent or no JSON object (a form vftui does not know), else ``Damaged``."""
    try:
        data = _json(path)
    except FileNotFoundError:
        return {}
    return data if isinstance(data, dict) else {}


def _json(path: Path) -> Any:
    """Every side file's one reader (``bounds.read_json``); ``FileNotFoundError`` when absent, else ``Damaged``
    saying why it cannot be read: not a regular file, too big, not JSON, nested too deep."""
    try:
        return bounds.read_json(path)
    except FileNotFoundError:
        raise
    except OSError as e:
        raise Damaged(path, f"cannot be read: {e.strerror}") from e
    except ValueError as e:
        raise Damaged(path, str(e)) from e


def explain(error: ValidationError) -> str:
    """The first problem, as ``field: what is wrong``."""
    first = error.errors()[0]
    where, message = (
        ".".join(str(part) for part in first["loc"]),
        first["msg"].removeprefix("Value error, "),
    )
    return f"{where}: {message}" if where else message


def run_record(files: RunFiles) -> RunRecord | None:
    """What a run was asked (its ``run_json``); None when there is none."""
    return read(files.run_json, RunRecord)


def saved_config(path: Path) -> dict[str, Any]:
    """The settings a resumable run was started with, as they were given."""
    files = RunFiles.find(path)
    try:
        record = run_record(files)
    except Damaged as e:
        raise UserError(f"--resume {path}: {e}") from e
    if record is None:
        raise UserError(f"--resume {path}: its {files.run_json.name} is gone")
    return record.config.model_dump(exclude_unset=True)
