"""Where every run this user started keeps its jsonl, for ``vftui runs`` and ``vftui attach``.

A run whose ``--out`` is outside the default runs folder would otherwise be found by
nobody: each run leaves a small entry (the path of its jsonl, named by a hash of it, so a
resume finds the same entry) in an index folder of the user's data folder.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from pathlib import Path

from vftui import paths
from vftui.run_files import records, store
from vftui.run_files.files import RunFiles
from vftui.run_files.records import IndexEntry


def index_dir() -> Path:
    return paths.data_dir() / "index"


ID_LENGTH = 6  # hex digits: a run's short id, which every command takes in place of its path


def run_id(out_path: Path) -> str:
    """A run's short id: the start of the hash of its jsonl's path (its index entry's name)."""
    return RunFiles(out_path).digest[:ID_LENGTH]


def resolve_id(text: str) -> Path | None:
    """The jsonl of the one known run whose id starts with ``text`` (4 hex digits or more), if any."""
    found = runs_with_id(text)
    return found[0] if len(found) == 1 else None


def looks_like_id(text: str) -> bool:
    """Hex digits, of any case (an id copied from a listing in capitals is the same id)."""
    return re.fullmatch(r"[0-9a-fA-F]{4,24}", text) is not None


def runs_with_id(text: str) -> list[Path]:
    """The jsonl of every known run whose id starts with ``text``; none for what is no id."""
    if not looks_like_id(text):
        return []
    return [out for out in known_runs() if RunFiles(out).digest.startswith(text.lower())]


def forget(files: RunFiles) -> bool:
    """Take a run out of the index (its files stay); whether it was in it."""
    try:
        (index_dir() / f"{files.digest}.json").unlink()
    except OSError:
        return False
    return True


def remember(files: RunFiles) -> None:
    """Record a run's jsonl; best effort (an unwritable data folder only hides it from ``runs``)."""
    with contextlib.suppress(OSError, store.WriteFailed):
        index_dir().mkdir(parents=True, exist_ok=True)
        store.write_json_atomic(
            index_dir() / f"{files.digest}.json", {"out": str(files.real_jsonl)}
        )


def known_runs(skipped: list[str] | None = None) -> list[Path]:
    """The jsonl of every run in the index or the default runs folder that still exists; a damaged index
    entry, or one naming a path through a link or '..', is skipped, and its sentence added to ``skipped`` when
    given."""
    found: dict[Path, None] = {}
    missing = 0
    for entry, out in _entries():
        if isinstance(out, records.Damaged):
            if skipped is not None:
                skipped.append(
                    f"the run index entry {out}; it was skipped (remove it to stop this note)"
                )
        elif not _exists(out):
            missing += 1  # deleted, or its folder moved or not mounted now: kept until --prune
        elif _plain(out):
            found[out] = None
        elif skipped is not None:  # not written by ``remember``: no command acts on what it names
            skipped.append(
                f"the run index entry {entry} names {out}, which goes through a symbolic link or '..'; "
                "it was skipped (remove it to stop this note)"
            )
    for files in RunFiles.all_in(paths.runs_dir(), depth=2) if paths.runs_dir().is_dir() else []:
        found[files.real_jsonl] = None
    if missing and skipped is not None:
        skipped.append(
            f"{missing} run(s) in the index are not where they were (deleted, or a folder moved or not "
            "mounted): left out; `vftui runs --prune` forgets them"
        )
    return list(found)


def forget_missing() -> int:
    """Take out of the index every run whose jsonl is not there (``--prune``), how many; and every copy of a
    run's own entry under another name (made by hand: ``forget`` takes the own one, and the copy kept the run
    listed after each prune)."""
    forgotten = 0
    for entry, out in _entries():
        if isinstance(out, records.Damaged):
            continue  # said by the listing; its own file to remove
        missing = not _exists(out)
        own = index_dir() / f"{RunFiles(out).digest}.json"
        if missing or (entry != own and own.exists()):
            with contextlib.suppress(OSError):
                entry.unlink()
                forgotten += missing
    return forgotten


def _entries() -> Iterator[tuple[Path, Path | records.Damaged]]:
    """Each index entry with the jsonl it names, or why it does not read (one removed meanwhile is left out)."""
    for entry in sorted(index_dir().glob("*.json")) if index_dir().is_dir() else []:
        try:
            record = records.read(entry, IndexEntry)
        except records.Damaged as e:
            yield entry, e
            continue
        if record is not None:
            yield entry, Path(record.out)


def _plain(path: Path) -> bool:
    """Whether ``path`` is its file's own path, as ``remember`` writes it: no link on the way, no '..'."""
    try:
        return path.resolve(strict=True) == path
    except (OSError, RuntimeError):
        return False


def _exists(path: Path) -> bool:
    """Whether anything is at ``path`` (a link that loops or leads nowhere is: its run is listed as damaged)."""
    try:
        return os.path.lexists(path)
    except OSError:  # a name too long for the file system names nothing there
        return False
