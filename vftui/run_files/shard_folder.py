"""A folder of one run's shards (``--shard I/N`` runs), which ``vftui view`` and ``vftui compare`` read as one run.

The folder holds the shards' runs side by side (their jsonl files and ``.run.json``), or a folder
each (each machine's run folder, copied in). They are one run's when each is a shard, all of
one environment and mode and all of the same N: each shard's items are then its own (item
modulo N), so no item is in two of them, as long as no shard is there twice and every line's
item is its shard's (``foreign``). A shard that is not there, or one with fewer items than its
share up to the highest item any holds (stopped early, or groups dropped), is a warning, not
a refusal: what is there is read.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from vftui import safe_files
from vftui.errors import UserError
from vftui.group_format import META
from vftui.run_files import records, store
from vftui.run_files.files import RunFiles
from vftui.run_files.records import Settings
from vftui.run_files.shards import Shard

MISSING_NAMED = 10  # shards a warning names of those missing; the rest it counts


@dataclass(frozen=True)
class ShardRun:
    """One shard's run: its jsonl and its shard."""

    path: Path
    shard: Shard
    name: str  # its jsonl as the folder names it (``a/groups.jsonl``), for sentences


@dataclass(frozen=True)
class ShardedRun:
    """The shards found in ``folder``, by shard number."""

    folder: Path
    runs: tuple[ShardRun, ...]
    env: str
    count: int  # N

    def missing(self) -> list[str]:
        """A warning line, one however many shards are not there: ``3 of 8 shards missing: 2, 5, 7``."""
        present = {run.shard.index for run in self.runs}
        absent = self.count - len(present)
        if absent == 0:
            return []
        first = list(
            itertools.islice((i for i in range(self.count) if i not in present), MISSING_NAMED + 1)
        )
        if absent == 1:
            return [f"shard {first[0]}/{self.count} missing"]
        named = ", ".join(map(str, first[:MISSING_NAMED])) + (
            ", …" if absent > MISSING_NAMED else ""
        )
        return [f"{absent:,} of {self.count:,} shards missing: {named}"]


def find(folder: Path) -> ShardedRun | None:
    """The shards in ``folder`` (several runs beside each other, or the runs of its folders); None when the
    folder holds one run, or runs that are not shards (the caller's own rules say what it holds)."""
    beside = RunFiles.all_in(folder)
    described = beside if len(beside) > 1 else [] if beside else RunFiles.all_in(folder, depth=2)
    if not described:
        return None
    runs = [(d.jsonl, _settings(d)) for d in described]
    if any(settings.shard is None for _, settings in runs):
        if beside:
            return None
        raise UserError(
            f"the folders in {folder} hold {len(runs)} runs that are not all shards of one run "
            "(--shard); name one run's folder or .jsonl file"
        )
    shard_runs = [
        ShardRun(path, settings.own_shard, str(path.relative_to(folder))) for path, settings in runs
    ]
    _check_one_run(folder, shard_runs, [settings for _, settings in runs])
    shard_runs.sort(key=lambda run: run.shard)
    return ShardedRun(folder, tuple(shard_runs), runs[0][1].env, shard_runs[0].shard.count)


def foreign(run: ShardRun, item: int) -> str | None:
    """Why a line of ``run`` with ``item`` does not belong in it (the item is another shard's), or None."""
    if run.shard.owns(item):
        return None
    owner = Shard(item % run.shard.count, run.shard.count)
    return (
        f"{run.name} (shard {run.shard}) holds item {item}, which is shard {owner}'s: the shards overlap; "
        "remove the runs that do not belong to this one"
    )


def gaps(counts: dict[Shard, int], count: int, top_item: int) -> list[str]:
    """A warning line for each shard with fewer groups than its items up to ``top_item`` (the highest any holds),
    the first ``MISSING_NAMED`` of them, then one that counts the others."""
    lines = []
    for shard, groups in sorted(counts.items()):
        expected = shard.share(top_item + 1)
        if groups < expected:
            lines.append(
                f"shard {shard} holds {groups} of its {expected} items up to item {top_item} "
                f"({expected - groups} missing: stopped early, or groups dropped)"
            )
    if len(lines) > MISSING_NAMED + 1:
        lines[MISSING_NAMED:] = [
            f"and {len(lines) - MISSING_NAMED:,} more shards of {count:,} hold fewer items "
            "than their share"
        ]
    return lines


def _settings(described: RunFiles) -> Settings:
    try:
        record = records.run_record(described)
    except records.Damaged as e:
        raise UserError(str(e)) from e
    return record.config if record is not None else Settings()


def _check_one_run(folder: Path, runs: list[ShardRun], settings: list[Settings]) -> None:
    """One environment, one mode, one N, each shard once; else a sentence naming what differs."""
    kinds = {(s.env, s.mode) for s in settings}
    if len(kinds) > 1:
        named = "; ".join(
            f"{run.name}: {s.mode} of {s.env}" for run, s in zip(runs, settings, strict=True)
        )
        raise UserError(
            f"the shards in {folder} are not of one run ({named}); a folder of shards holds one run's"
        )
    counts = {run.shard.count for run in runs}
    if len(counts) > 1:
        named = ", ".join(f"{run.shard} in {run.name}" for run in runs)
        raise UserError(
            f"the shards in {folder} split the items in different numbers of shards ({named}); a run's "
            "shards share one N"
        )
    seen: dict[Shard, ShardRun] = {}
    for run in runs:
        if (twin := seen.setdefault(run.shard, run)) is not run:
            raise UserError(_twice(twin, run))


def _twice(first: ShardRun, second: ShardRun) -> str:
    """Two runs of one shard: they overlap, and the sentence names an item both hold."""
    held = set(_items(first.path))
    common = next((item for item in _items(second.path) if item in held), None)
    both = f"shard {first.shard} is there twice, in {first.name} and {second.name}"
    if common is None:
        return f"{both}; keep one of them"
    return f"{both}, which overlap (both hold item {common}); keep one of them"


def _items(path: Path) -> Iterator[int]:
    """The items of a run's group lines, read a line at a time (lines that are not groups are left out)."""
    try:
        with safe_files.open_to_read(path) as f:
            for raw in store.group_lines(f):
                group = store.parse_group_line(raw)
                meta = group.get(META) if isinstance(group, dict) else None
                if isinstance(meta, dict) and type(meta.get("item")) is int:
                    yield meta["item"]
    except OSError as e:
        raise UserError(f"cannot read {path}: {e.strerror}") from e
