"""The files of a run beside its jsonl, and how to find a run to resume: no heavy imports (``run_records``
reads them back)."""

from __future__ import annotations

from pathlib import Path

from vftui import safe_files
from vftui.errors import UserError

RUN_SUFFIX, CHECKPOINT_SUFFIX, LOCK_SUFFIX, LOG_SUFFIX = (
    ".run.json",
    ".checkpoint.json",
    ".lock",
    ".collector.log",
)
SOCKET_SUFFIX, EVAL_SUFFIX, DROPS_SUFFIX, HTML_SUFFIX = ".sock", ".eval", ".dropped.jsonl", ".html"
SIDECAR_SUFFIXES = (
    RUN_SUFFIX,
    CHECKPOINT_SUFFIX,
    LOCK_SUFFIX,
    LOG_SUFFIX,
    SOCKET_SUFFIX,
    DROPS_SUFFIX,
    HTML_SUFFIX,
)


def eval_dir(out_path: Path) -> Path:
    """An eval's results beside its jsonl: ``results.jsonl`` and ``metadata.json`` (vf-eval's), ``atropos/``."""
    return out_path.with_suffix(EVAL_SUFFIX)


def own_files(out_path: Path) -> set[Path]:
    """The files vftui writes for a run: its jsonl and the files beside it named after it (an eval's folder,
    ``eval_dir``, aside)."""
    return {out_path, *(out_path.with_suffix(suffix) for suffix in SIDECAR_SUFFIXES)}


def jsonl_named(out: Path) -> Path:
    """``out`` (``--out``) if it ends in .jsonl: its side files take its name less its suffix, so ``a.v1`` and ``a.v2``
    would share ``a.run.json`` and ``a.checkpoint.json``, and ``--resume`` finds a run by its .jsonl."""
    if out.suffix != ".jsonl":
        raise UserError(
            f"--out {out}: a run's file must end in .jsonl (e.g. --out {out}.jsonl): its side files take "
            f"its name less its suffix ({out.with_suffix(RUN_SUFFIX).name}, ...), as another run's could"
        )
    return out


def lock_holder(out_path: Path) -> int | None:
    """The pid written in the run's lock file by the process holding it (``run_files.lock``)."""
    try:
        with safe_files.open_to_read(out_path.with_suffix(LOCK_SUFFIX)) as f:
            return int(f.read(32).strip())
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
            raise UserError(
                f"{asked_by} {path}: found {what} there; name the run's .jsonl file instead"
            )
        return Path(str(found[0]).removesuffix(RUN_SUFFIX) + ".jsonl")
    if path.name.endswith(RUN_SUFFIX):
        return Path(str(path).removesuffix(RUN_SUFFIX) + ".jsonl")
    if path.suffix == ".jsonl" and path.with_suffix(RUN_SUFFIX).exists():
        return path
    raise UserError(f"{asked_by} {path}: not a vftui run (expected a run folder or its .jsonl)")
