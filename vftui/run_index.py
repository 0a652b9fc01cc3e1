"""Where every run this user started keeps its jsonl, for ``vftui runs`` and ``vftui attach``.

A run whose ``--out`` is outside the default runs folder would otherwise be found by
nobody: each run leaves a small entry (the path of its jsonl, named by a hash of it, so a
resume finds the same entry) in an index folder of the user's data folder.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path

from vftui import paths, store
from vftui.run_files import RUN_SUFFIX


def index_dir() -> Path:
    return paths.data_dir() / "index"


def remember(out_path: Path) -> None:
    """Record a run's jsonl; best effort (an unwritable data folder only hides it from ``runs``)."""
    out = out_path.resolve()
    name = hashlib.sha256(os.fsencode(out)).hexdigest()[:24]
    with contextlib.suppress(OSError, store.WriteFailed):
        index_dir().mkdir(parents=True, exist_ok=True)
        store.write_json_atomic(index_dir() / f"{name}.json", {"out": str(out)})


def known_runs() -> list[Path]:
    """The jsonl of every run in the index or the default runs folder that still exists."""
    found: dict[Path, None] = {}
    for entry in sorted(index_dir().glob("*.json")) if index_dir().is_dir() else []:
        try:
            out = Path(json.loads(entry.read_text())["out"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if out.exists():
            found[out] = None
        else:
            with contextlib.suppress(OSError):
                entry.unlink()  # its run was deleted
    for run_file in paths.runs_dir().glob(f"*/*{RUN_SUFFIX}") if paths.runs_dir().is_dir() else []:
        found[Path(str(run_file).removesuffix(RUN_SUFFIX) + ".jsonl").resolve()] = None
    return list(found)
