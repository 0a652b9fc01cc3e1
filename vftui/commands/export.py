"""``vftui export SOURCE... -o OUT``: collected rollouts to a training set (``run_files.export``).

Prints what was kept and why the rest was not, counted by reason (``--json`` for scripts); a line on
stderr every few seconds while a long source is read. Nothing kept: one sentence, exit 1, nothing
written. Ctrl-C: the temporary file is removed, exit 130.
"""

from __future__ import annotations

import json
import math
import signal
import sys
import time
from pathlib import Path

from vftui import safe_files
from vftui.errors import STOP_SIGNALS, UserError
from vftui.figures.group_filter import parse_filter
from vftui.run_files import export
from vftui.run_files.export import Selection, Tally, summary
from vftui.text.printable import say

PROGRESS_EVERY_S = 5.0


def selection(
    where: str | None,
    min_reward: float | None,
    drop_truncated: bool,
    best_of: int | None,
    dedupe: bool,
) -> Selection:
    try:
        predicate = parse_filter(where) if where else None
    except ValueError as e:
        raise UserError(f"--where: {e}") from None
    if min_reward is not None and not math.isfinite(min_reward):
        raise UserError("--min-reward must be a finite number")
    if best_of is not None and not 1 <= best_of <= 100_000:
        raise UserError("--best-of takes 1 to 100000 rollouts")
    return Selection(predicate, min_reward, drop_truncated, best_of, dedupe)


def run_export(
    sources: list[Path],
    out: Path,
    fmt: str,
    chosen: Selection,
    force: bool,
    as_json: bool,
) -> int:
    said = time.monotonic()

    def progress(tally: Tally) -> None:
        nonlocal said
        if time.monotonic() - said > PROGRESS_EVERY_S:
            said = time.monotonic()
            say(
                f"vftui export: {tally.groups:,} groups read, {tally.kept:,} rollouts kept",
                sys.stderr,
            )

    out = safe_files.given_file(out, "-o")
    for sig in STOP_SIGNALS:  # SIGTERM and SIGHUP stop it as Ctrl-C does: the temporary file goes
        if signal.getsignal(sig) is not signal.SIG_IGN:  # one ignored from the start stays so
            signal.signal(sig, signal.default_int_handler)
    try:
        tally = export.export(sources, out, fmt, chosen, force, progress)
    except export.NothingKept as e:
        if as_json:
            _report(out, fmt, e.tally, as_json)
        raise
    _report(out, fmt, tally, as_json)
    return 0


def _report(out: Path, fmt: str, tally: Tally, as_json: bool) -> None:
    if as_json:
        print(
            json.dumps(
                {
                    "out": str(out),
                    "format": fmt,
                    "groups": tally.groups,
                    "groups_kept": tally.groups_kept,
                    "rollouts": tally.rollouts,
                    "kept": tally.kept,
                    "rows": tally.rows,
                    "left_out": dict(tally.left_out),
                    "unreadable_lines": tally.unreadable,
                },
                indent=2,
            )
        )
        return
    say(summary(out, fmt, tally), sys.stdout)
