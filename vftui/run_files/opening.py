"""Where a run writes: a new jsonl (never overwriting one), or a resumed run's, repaired and read back.

Either way the run holds its lock (``lock.RunLock``) before it touches the file.
"""

from __future__ import annotations

import collections
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

from vftui import paths, safe_files
from vftui.bounds import LARGE
from vftui.errors import UserError
from vftui.events import GroupCollected, GroupDropped
from vftui.run_files import records, store
from vftui.run_files.drops import damaged_line, read_drops
from vftui.run_files.files import RunFiles
from vftui.run_files.groupfile import group_event
from vftui.run_files.ledger import ItemLedger
from vftui.run_files.lock import RunLock
from vftui.run_files.records import Checkpoint
from vftui.run_files.shards import Shard
from vftui.text.wording import counted

logger = logging.getLogger(__name__)
IN_FLIGHT_AT_MOST = (
    2 * LARGE
)  # groups a run has in flight at most: --concurrency's bound, and a quarter more spares


@dataclass
class Output:
    """The jsonl a run appends to, its lock, and what a resumed one had written."""

    files: RunFiles
    lock: RunLock
    groups_before: int = 0
    ledger: ItemLedger = field(default_factory=ItemLedger)
    written: list[GroupCollected] = field(
        default_factory=list
    )  # a resumed run's groups, for its totals
    dropped: list[GroupDropped] = field(
        default_factory=list
    )  # and the groups it dropped (its drop log)
    tail: list[bytes] = field(default_factory=list)  # a resumed run's last lines, for its window
    made: list[Path] = field(default_factory=list)  # the folders it made for --out, deepest first
    # a resumed run's seconds in its earlier sessions (its checkpoint's)
    elapsed_before: float = 0.0


def open_new(out: Path | None, env_id: str) -> Output:
    """``out`` (not a link), or a new run folder's ``groups.jsonl``. Where anything is at the name or at one
    of its side files' (``RunFiles.taken_by``: a finished run, a link, the user's own ``notes.html``), the
    name takes a ``_1`` suffix, then ``_2``..., so a new run writes over nothing; unless a live run holds
    the name: then its sentence."""
    asked = RunFiles.new(out, env_id)
    made = [p for p in (asked.folder, *asked.folder.parents) if not p.exists()]
    if not paths.writable_dir(asked.folder):
        raise UserError(f"cannot write to the output folder {asked.folder}")
    hint = "wait for it to end, or choose another --out"
    for files in map(RunFiles, store.numbered(asked.jsonl)):
        if files.taken_by is not None:
            if files == asked:  # the name asked for: its own live run is refused, not moved aside
                RunLock(files).refuse_if_held(hint)
            continue
        lock = RunLock(files).acquire(hint)
        # the drop log too, now: made on the first drop, it could have become another run's jsonl
        if _made(files.jsonl):
            if _made(files.drops):
                break
            files.jsonl.unlink()
        lock.release()  # something came to the name since it looked
    if files != asked:
        logger.warning(
            "%s exists; writing to %s instead", asked.taken_by or asked.jsonl, files.jsonl
        )
    return Output(files, lock, made=made)


def _made(path: Path) -> bool:
    """Whether ``path`` was made here, empty; False where something came to its name first."""
    try:
        os.close(safe_files.create_new(path, 0o644))
    except FileExistsError:
        return False
    return True


def open_resumed(run: Path, window: int, shard: Shard) -> Output:
    """The resumed run's jsonl with a torn last line cut, its groups and the items left to collect.

    An item is done when its line is in the file or its drop is in the drop log (a dropped group
    has no line): those two are the truth. The checkpoint is a hint that may lag them by a group
    or, damaged or edited, claim more: what it claims beyond them is collected (with a warning),
    never skipped. Items missing below the last one done (in flight when it stopped, or cut with
    a torn line) are collected first. The ledger counts the shard's own positions, as the
    checkpoint does.
    """
    files = RunFiles.to_resume(run)
    lock = RunLock(files).acquire("stop it before resuming it")
    try:
        for path in (files.jsonl, files.drops):
            if what := safe_files.not_regular(path):
                raise UserError(f"--resume: {path} is {what}, not a run's file; remove it first")
        saved = read_checkpoint(files.checkpoint)
        written = groups_written(files.jsonl)
        if (damage := damaged_line(files)) is not None:
            raise UserError(
                f"--resume: line {damage[0]} of {files.drops} is {damage[1]}; only a torn last line is cut, so "
                "mend or remove that line first"
            )
        # only once all of it reads (a refused resume changes nothing); a drop appended after a torn one would
        # be lost with it
        for path in (files.jsonl, files.drops):
            if cut := store.repair_tail(path):
                logger.warning("cut a torn last line (%d bytes) from %s", cut, path)
        # after the repair: a whole last drop that only lacked its newline counts
        dropped = read_drops(files)[0]
    except BaseException:
        lock.release()
        raise
    items = [group.item for group in written] + [drop.item for drop in dropped]
    done = {shard.position(item) for item in items}
    ledger = ItemLedger(0, done, handed_out(saved, done, files.checkpoint.name, files.jsonl.name))
    if ledger.lost:
        logger.warning(
            "%s in flight when the run stopped: collecting them again first",
            counted(ledger.lost, "item"),
        )
    tail = _tail_lines(files.jsonl, window)
    return Output(
        files, lock, len(written), ledger, written, dropped, tail, elapsed_before=saved.elapsed_s
    )


def handed_out(saved: Checkpoint, done: set[int], checkpoint: str, out: str) -> int:
    """Where new items begin: the checkpoint's ``iter`` (items below it were handed out; those not done were in
    flight when the run stopped), unless it claims what the file cannot back. Items it says are done that the file
    and its drop log do not hold are collected (counted without listing them, however large the claim); an ``iter``
    further past the last item done than a run can have in flight starts at that item instead. Each said once."""
    claimed = saved.done_below - sum(1 for item in done if item < saved.done_below)
    claimed += sum(
        1 for item in set(saved.done_above) if item >= saved.done_below and item not in done
    )
    if claimed:
        items = "1 item" if claimed == 1 else f"{claimed:,} items"
        logger.warning(
            "the checkpoint %s counts %s done that neither %s nor its drop log holds: they count as "
            "not done (the file is the truth)",
            checkpoint,
            items,
            out,
        )
    after = max(done, default=-1) + 1
    if saved.iter - after > IN_FLIGHT_AT_MOST:
        logger.warning(
            "the checkpoint %s says items up to %s were handed out, far past the %s that %s accounts for: "
            "carrying on from there",
            checkpoint,
            f"{saved.iter:,}",
            f"{after:,}",
            out,
        )
        return after
    return saved.iter


def read_checkpoint(path: Path) -> Checkpoint:
    """A resumed run's checkpoint (none: nothing recorded); one that does not read is a one-sentence refusal."""
    try:
        return records.read(path, Checkpoint) or Checkpoint()
    except records.Damaged as e:
        raise UserError(
            f"--resume: the checkpoint {path} is damaged ({e.reason}); remove it to resume from the "
            "groups in the file alone (groups dropped before would be collected again)"
        ) from e


def groups_written(out: Path) -> list[GroupCollected]:
    """Every group line; any other line but a torn last one (``store.torn_tail``: cut once all of it reads), or
    a line that repeats an item (a run writes each once: two files joined by hand), refuses the resume."""
    groups: list[GroupCollected] = []
    line_of: dict[int, int] = {}  # each item's line
    unread: store.BadLine | None = None  # the torn last line, or refused once a line follows it
    for entry in store.read_groups(out):
        if unread is not None:
            _refuse_line(out, unread)
        if isinstance(entry, store.BadLine):
            unread = entry
            continue
        number, raw = entry
        try:
            group = group_event(len(groups) + 1, raw)
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            _refuse_line(
                out, store.BadLine(number, f"not a group vftui can read ({type(e).__name__}: {e})")
            )
        if (first := line_of.setdefault(group.item, number)) != number:
            _refuse_line(
                out, store.BadLine(number, f"a repeat of item {group.item} of line {first}")
            )
        groups.append(group)
    if unread is not None and not store.torn_tail(out):
        _refuse_line(out, unread)
    return groups


def _refuse_line(out: Path, line: store.BadLine) -> NoReturn:
    raise UserError(
        f"--resume: line {line.number} of {out} is {line.reason}; only a torn last line is cut, "
        "so mend or remove that line first"
    )


def _tail_lines(path: Path, count: int) -> list[bytes]:
    """The last ``count`` group lines (every line was read as a group before)."""
    with safe_files.open_to_read(path) as f:
        return list(
            collections.deque(
                (line for line in store.group_lines(f) if isinstance(line, bytes) and line.strip()),
                maxlen=count,
            )
        )
