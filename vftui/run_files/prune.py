"""``vftui runs --prune``: a run that is not running is forgotten (its files stay), and one in a folder of the
default runs folder that collected nothing is deleted: its own files, and its folder once empty if vftui made it.

A run's files may sit beside the user's (notes, other runs, a folder of their own under the runs
folder), and its path may come from an index entry anyone could have edited. So what may go is
decided by pure functions of what was found on disk (``place``, ``to_delete``), which the tests
check against random trees, and ``prune`` carries it out holding the run's lock, so that no run
starts on those files meanwhile.
"""

from __future__ import annotations

import contextlib
import enum
import os
import shutil
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from vftui import paths
from vftui.errors import UserError
from vftui.run_files.files import RunFiles
from vftui.run_files.index import forget
from vftui.run_files.listing import DAMAGED, RunLine
from vftui.run_files.lock import RunLock
from vftui.run_files.vf_eval import METADATA

NOT_PLAIN = "goes through a symbolic link or '..'"


class Place(enum.Enum):
    REFUSED = (
        "its path is not its file's own"  # through a link or '..': left as it is, entry and files
    )
    ELSEWHERE = "kept elsewhere"  # forgotten; its files stay
    RUN_FOLDER = "in a folder of the default runs folder"  # deleted if it collected nothing


class Kind(enum.Enum):
    FILE = "file"
    FOLDER = "folder"
    OTHER = "other"  # a link, a FIFO, a socket, a device: unlinking one never touches what it names


@dataclass(frozen=True)
class Plan:
    """What goes, in this order: the run's own files and its eval folder, its lock, then its folder if empty."""

    files: tuple[Path, ...] = ()
    trees: tuple[Path, ...] = ()
    folder: Path | None = None


def place(out: Path, resolved: Path | None, runs_dir: Path) -> Place:
    """Where a run's jsonl is: ``out`` as listed, ``resolved`` the same path resolved strictly (None: it does not
    resolve), ``runs_dir`` the default runs folder, resolved."""
    if not out.is_absolute() or ".." in out.parts or resolved != out:
        return Place.REFUSED
    return Place.RUN_FOLDER if out.parent.parent == runs_dir else Place.ELSEWHERE


def to_delete(run: RunFiles, beside: Mapping[str, Kind], made_by_vftui: bool) -> Plan:
    """What of a run that collected nothing goes: of ``beside`` (every entry of its folder, by name), the files
    named after its jsonl that vftui writes (a folder at such a name is not vftui's and stays) and its eval
    folder; its folder too when ``made_by_vftui`` and nothing else is in it."""
    own = {path.name for path in (run.jsonl, *run.side_files)}
    evals = run.eval_dir.name
    files = tuple(
        run.folder / name
        for name, kind in sorted(beside.items())
        if (name in own or name == evals) and kind is not Kind.FOLDER
    )
    trees = (run.eval_dir,) if beside.get(evals) is Kind.FOLDER else ()
    left = set(beside) - {path.name for path in (*files, *trees)}
    return Plan(files, trees, run.folder if made_by_vftui and not left else None)


@dataclass(frozen=True)
class Pruned:
    forgotten: bool = False
    deleted: bool = False
    note: str = ""  # why a run that might have gone stays


def prune(line: RunLine) -> Pruned:
    """Forget or delete one listed run as the module says; a running or damaged run, or one with groups, stays."""
    if line.running:
        return Pruned()
    out = line.out_path
    try:
        resolved = out.resolve(strict=True)
    except (OSError, RuntimeError):
        resolved = None
    where = place(out, resolved, paths.runs_dir().resolve())
    if where is Place.REFUSED:
        return Pruned(note=f"prune leaves the run at {out} as it is: its path {NOT_PLAIN}")
    run = RunFiles(out)
    if (
        where is Place.ELSEWHERE
    ):  # found in the index, or through a link in the runs folder (listed all the same)
        return Pruned(forgotten=forget(run))
    if line.state == DAMAGED or line.groups_done or not _holds_nothing(run):
        return Pruned()
    return _delete_if_empty(run)


def _delete_if_empty(run: RunFiles) -> Pruned:
    """The run's files as ``to_delete`` says, under its lock, if it still holds nothing then."""
    try:
        lock = RunLock(run).acquire("prune leaves it")
    except (UserError, OSError) as e:
        return Pruned(note=str(e))
    try:
        if not _holds_nothing(run):
            return Pruned()
        plan = to_delete(run, _entries(run.folder), run.made_by_vftui)
        for tree in plan.trees:
            shutil.rmtree(tree)
        for path in plan.files:
            if (
                path != lock.path
            ):  # the lock goes last, so no run can take the name before the rest is gone
                path.unlink(missing_ok=True)
    except OSError as e:
        return Pruned(note=f"prune could not delete all of the empty run at {run.jsonl}: {e}")
    finally:
        lock.release()
    if plan.folder is not None:
        with contextlib.suppress(OSError):  # something came into it meanwhile: it stays
            plan.folder.rmdir()
    forget(run)
    return Pruned(deleted=True)


def _holds_nothing(run: RunFiles) -> bool:
    """Whether a run recorded nothing: its jsonl an empty file, no dropped group (an rl run at temperature 0 drops
    every group, and its drops are all that view counts), and no rows in its eval folder. Only a run vftui made,
    with the record it writes as it starts: an empty file at a path an index entry names, beside the user's own
    ``data.html``, is no run, and nothing of it goes."""
    try:
        jsonl, record = run.jsonl.lstat(), run.run_json.lstat()
    except OSError:
        return False
    return (
        stat.S_ISREG(jsonl.st_mode)
        and stat.S_ISREG(record.st_mode)
        and not jsonl.st_size
        and not _size(run.drops)
        and not _rows(run)
    )


def _rows(run: RunFiles) -> bool:
    """Whether an eval folder holds a file that is not empty but the summaries an eval writes however few examples it
    did; one that cannot be read holds something, and so does a file of data at its name."""
    folder = run.eval_dir
    summaries = {
        folder / METADATA,
        run.eval_atropos / "metrics.json",
    }  # written even over no example
    try:
        found = folder.lstat()
    except FileNotFoundError:
        return False
    except OSError:
        return True
    if not stat.S_ISDIR(found.st_mode):
        return _size(folder) > 0
    unread: list[OSError] = []
    walked = os.walk(
        folder, onerror=unread.append
    )  # links not followed: a link holds nothing of the run's
    files = (Path(root, name) for root, _, names in walked for name in names)
    return any(_size(f) and f not in summaries for f in files) or bool(unread)


def _size(path: Path) -> int:
    """The size of the regular file at ``path`` (a link, a FIFO, a device or nothing: 0)."""
    try:
        found = path.lstat()
    except OSError:
        return 0
    return found.st_size if stat.S_ISREG(found.st_mode) else 0


def _entries(folder: Path) -> dict[str, Kind]:
    """Every entry of ``folder`` by name, its kind as it is (a link is a link, whatever it names)."""
    kinds = {}
    for entry in folder.iterdir():
        mode = entry.lstat().st_mode
        kinds[entry.name] = (
            Kind.FILE if stat.S_ISREG(mode) else Kind.FOLDER if stat.S_ISDIR(mode) else Kind.OTHER
        )
    return kinds
