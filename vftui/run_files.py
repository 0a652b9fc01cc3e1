"""The files of a run beside its jsonl, and how to find a run to resume: no heavy imports."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from vftui.errors import UserError

RUN_SUFFIX, CHECKPOINT_SUFFIX, LOCK_SUFFIX, LOG_SUFFIX = ".run.json", ".checkpoint.json", ".lock", ".collector.log"
SOCKET_SUFFIX, EVAL_SUFFIX, DROPS_SUFFIX = ".sock", ".eval", ".dropped.jsonl"


def read_json_object(path: Path) -> dict[str, Any]:
    """A JSON object file's content: ``{}`` when it is missing, unreadable or not an object (a run's side
    files and an eval's metadata are read this way by every view of them)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def run_description(out_path: Path) -> dict[str, Any]:
    """The ``.run.json`` beside a run's jsonl (its settings, model, endpoint), ``{}`` when there is none."""
    return read_json_object(out_path.with_suffix(RUN_SUFFIX))


def eval_dir(out_path: Path) -> Path:
    """An eval's results beside its jsonl: ``results.jsonl`` and ``metadata.json`` (vf-eval's), ``atropos/``."""
    return out_path.with_suffix(EVAL_SUFFIX)


def lock_holder(out_path: Path) -> int | None:
    """The pid written in the run's lock file by the process holding it (``collector.output.lock``)."""
    try:
        return int(out_path.with_suffix(LOCK_SUFFIX).read_text().strip())
    except (OSError, ValueError):
        return None


def sidecars(out_path: Path) -> tuple[Path, Path]:
    """The run description and the checkpoint kept beside a run's jsonl."""
    return out_path.with_suffix(RUN_SUFFIX), out_path.with_suffix(CHECKPOINT_SUFFIX)


def find_resumable(path: Path, asked_by: str = "--resume") -> Path:
    """The jsonl of the run at ``path`` (a run folder, its jsonl or its .run.json); ``asked_by`` starts the refusal."""
    if path.is_dir():
        found = sorted(path.glob(f"*{RUN_SUFFIX}"))
        if len(found) != 1:
            what = "no run" if not found else f"{len(found)} runs"
            raise UserError(f"{asked_by} {path}: found {what} there; name the run's .jsonl file instead")
        return Path(str(found[0]).removesuffix(RUN_SUFFIX) + ".jsonl")
    if path.name.endswith(RUN_SUFFIX):
        return Path(str(path).removesuffix(RUN_SUFFIX) + ".jsonl")
    if path.suffix == ".jsonl" and path.with_suffix(RUN_SUFFIX).exists():
        return path
    raise UserError(f"{asked_by} {path}: not a vftui run (expected a run folder or its .jsonl)")


def saved_config(path: Path) -> dict[str, Any]:
    """The settings a resumable run was started with."""
    out = find_resumable(path)
    run_file, _ = sidecars(out)
    try:
        return json.loads(run_file.read_text())["config"]
    except (OSError, ValueError, KeyError) as e:
        raise UserError(f"--resume {path}: cannot read {run_file.name}: {e}") from e
