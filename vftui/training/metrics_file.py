"""prime-rl's ``metrics.jsonl``: read as it grows, and written the way prime-rl writes it.

prime-rl's ``FileMonitor`` (``monitors/file.py``) appends, line-buffered, one row per log call:
``{"step": N, "time": unix seconds, **metrics}``, non-finite values dropped. The trainer and the
orchestrator append their own rows to the one file, each running at its own step (the orchestrator
ahead by its off-policy lag), and both log ``time/step`` and ``time/save_ckpt``: those are told
apart here by the row's side (``time/step (trainer)``). A resumed run logs its steps from the
checkpoint on again. Any other name is kept as it is, known or not.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from vftui import bounds, safe_files
from vftui.training.tail import FileTail

MAX_LINE = 16 * 1024**2  # a row of a few hundred metrics is tens of KB
TRAINER_MARKS = ("time/wait_for_batch", "time/forward_backward", "optim/lr", "perf/mfu")
ORCHESTRATOR_MARKS = ("time/wait_for_policy", "progress/tasks", "off_policy/dropped")
BOTH_SIDES = ("time/step", "time/save_ckpt")  # both sides log these under one name


@dataclass(frozen=True)
class Row:
    step: int
    time: float | None
    values: dict[str, float]


@dataclass
class Read:
    """One poll of the file: its new rows, and what could not be read, counted."""

    rows: list[Row] = field(default_factory=list)
    restarted: bool = False
    more: bool = False
    bad_lines: int = 0
    first_bad: str = ""  # what the first bad line was, for a sentence
    long_lines: int = 0
    skipped_values: int = 0  # values that are not finite numbers (null, text, NaN written by hand)
    error: str = ""


def side(values: Mapping[str, object]) -> str:
    """``trainer``, ``orchestrator`` or ``""``: who logged a row, from the names only one side logs."""
    if any(name in values for name in TRAINER_MARKS):
        return "trainer"
    if any(name in values for name in ORCHESTRATOR_MARKS) or any(
        name.startswith(("train/", "progress/")) for name in values
    ):
        return "orchestrator"
    return ""


def series_name(name: str, who: str) -> str:
    """The name a value is charted under: its own, but for the names both sides log."""
    return f"{name} ({who})" if who and name in BOTH_SIDES else name


def parse(line: bytes, found: Read) -> Row | None:
    """A row from one line; a line that is not one is counted in ``found``."""
    try:
        value = bounds.load_json(line)
    except (ValueError, UnicodeDecodeError) as e:
        return _bad(found, f"not JSON ({e})")
    if not isinstance(value, dict):
        return _bad(found, "not a JSON object")
    step = value.get("step")
    if type(step) is not int or not 0 <= step < bounds.HUGE:
        return _bad(found, f"its step is {_shown(step)}, not a step number")
    when = bounds.score(value.get("time"))
    who = side(value)
    values: dict[str, float] = {}
    for name, raw in value.items():
        if name in ("step", "time"):
            continue
        number = bounds.score(raw)
        if number is None:
            found.skipped_values += 1
            continue
        values[series_name(name, who)] = number
    return Row(step, when, values)


def _bad(found: Read, why: str) -> Row | None:
    """Count a line that is not a row (None, for ``parse`` to return)."""
    found.bad_lines += 1
    found.first_bad = found.first_bad or why
    return None


def _shown(value: object) -> str:
    text = (
        json.dumps(value)
        if isinstance(value, (int, float, str, bool, type(None)))
        else "not a number"
    )
    return text if len(text) <= 40 else text[:39] + "…"


class MetricsReader:
    """Follows one ``metrics.jsonl``. The first read of a long file reads its head (the run's early
    levels) and its last ``tail_steps`` steps, not its middle: a window is what is charted."""

    HEAD_BYTES = 2 * 1024**2

    def __init__(self, path: Path, tail_steps: int) -> None:
        self.tail = FileTail(path, MAX_LINE)
        self.tail_steps = tail_steps
        self.skipped: tuple[int, int] | None = None  # the steps a first read jumped over
        self._started = False

    def read(self) -> Read:
        if not self._started:
            self._started = True
            size = self.tail.size() or 0
            if size > 2 * self.HEAD_BYTES:
                return self._head_and_tail(size)
        return self._rows(self.tail.read())

    def _head_and_tail(self, size: int) -> Read:
        head = self._rows(self.tail.read(self.HEAD_BYTES))
        steps = {row.step for row in head.rows}
        per_step = self.tail.offset / max(1, len(steps))
        start = max(self.tail.offset, size - int(per_step * self.tail_steps * 1.25))
        if start > self.tail.offset:
            self.tail.start_at(start)
            rest = self._rows(self.tail.read())
            if rest.rows and steps:
                self.skipped = (max(steps) + 1, rest.rows[0].step - 1)
            head.rows += rest.rows
            for name in ("bad_lines", "long_lines", "skipped_values"):
                setattr(head, name, getattr(head, name) + getattr(rest, name))
            head.first_bad = head.first_bad or rest.first_bad
            head.more, head.error = rest.more, rest.error
        return head

    def _rows(self, lines) -> Read:
        found = Read(
            restarted=lines.restarted,
            more=lines.more,
            long_lines=lines.long_lines,
            error=lines.error,
        )
        for line in lines.lines:
            if line.strip() and (row := parse(line, found)) is not None:
                found.rows.append(row)
        return found


def append_row(
    path: Path, step: int, metrics: Mapping[str, float], when: float | None = None
) -> None:
    """One row as prime-rl's ``FileMonitor`` appends it (non-finite values dropped); for sims and tests."""
    row = {"step": step, "time": time.time() if when is None else when}
    row |= {k: v for k, v in metrics.items() if isinstance(v, (int, float)) and math.isfinite(v)}
    fd = safe_files.open_append(path)
    try:
        os.write(fd, (json.dumps(row) + "\n").encode())
    finally:
        os.close(fd)
